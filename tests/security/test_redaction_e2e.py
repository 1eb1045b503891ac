"""Secrets through a whole clone: the real CLI, serve with the fake launcher, the real run
program, the scripted engine, real git and the fake GitHub. The engine prints the secrets of
the secrets file (a GitHub token, an API key, a value of no known shape, and the refresh token
inside a pasted JSON login) in generated forms and splits, in its words, in a command's
output, in a failure message, in a file it commits and in a commit message; then every place
a clone's text leaves it is searched with a detector written apart from the redactor.
"""

from __future__ import annotations

import base64
import codecs
import json
import os
import re
import subprocess
import urllib.parse

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import State
from shadowclone_fake_launch.keeper import OUTPUT_FILE
from shadowclone_fake_launch.launcher import FakeLauncher, default_state_dir
from shadowclone_testing.owner import SECRET, Owner
from shadowclone_testing.scripted import Fail, Run, Say, Step, Write

REFRESH = "rt-9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c"
"""The refresh token inside the pasted ChatGPT login: of no known shape, only a JSON leaf."""
AUTH_JSON = json.dumps(
    {"tokens": {"refresh_token": REFRESH, "account_id": "acct"}, "last_refresh": "never"}
)
FORMS = ("plain", "spaced", "percent", "base64", "json-escaped", "split-lines", "split-writes")
PLACES = ("say", "run", "fail", "write", "commit-message", "home", "stderr")


def write_secrets(owner: Owner, extra: str) -> None:
    descriptor = os.open(owner.home.secrets_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(
            f'github_token = "{owner.token}"\nanthropic_api_key = "{SECRET}"\n'
            f'extra_api_key = "{extra}"\nchatgpt_auth_json = {json.dumps(AUTH_JSON)}\n'
        )


def form_of(secret: str, form: str) -> str:
    if form == "spaced":
        return " ".join(secret)
    if form == "percent":
        return "".join(f"%{b:02X}" for b in secret.encode())
    if form == "base64":
        return base64.b64encode(secret.encode()).decode()
    if form == "json-escaped":
        return "".join(f"\\u{ord(c):04x}" for c in secret)
    return secret


def found_in(text: str, secret: str) -> bool:
    """The detector: the secret as is, with any whitespace or JSON/percent escapes in it, or
    base64-encoded (a fragment long enough to count)."""
    if not text:
        return False
    views = [text]
    unescaped = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), text)
    views.append(unescaped.replace("\\n", "").replace("\\t", ""))
    views.append(urllib.parse.unquote(text))
    flat = [re.sub(r"\s+", "", view) for view in views]
    if any(secret in view for view in views + flat):
        return True
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + secret.encode()).decode()
        middle = encoded[4 : len(encoded) - 4]
        if len(middle) >= 12 and any(middle in view for view in flat):
            return True
    return False


leaks = st.lists(
    st.tuples(
        st.sampled_from(("token", "api_key", "extra", "refresh")),
        st.sampled_from(FORMS),
        st.sampled_from(PLACES),
        st.integers(min_value=1, max_value=30),
    ),
    min_size=1,
    max_size=5,
)
extras = st.text("abcdefghjkmnpqrstuvwxyz23456789", min_size=12, max_size=32)


def script_for(secrets: dict[str, str], chosen: list[tuple[str, str, str, int]]) -> list[Step]:
    steps: list[Step] = [Write("notes.md", "notes\n")]
    failure = None
    for number, (name, form, place, where) in enumerate(chosen):
        secret = secrets[name]
        text = form_of(secret, "plain" if form.startswith("split") else form)
        cut = min(where, len(text) - 1)
        if form == "split-lines":
            text = text[:cut] + "\n" + text[cut:]
        if place == "say":
            if form == "split-writes":
                steps += [Say(f"look: {text[:cut]}"), Say(text[cut:] + " there")]
            else:
                steps.append(Say(f"look: {text}"))
        elif place == "run":
            steps.append(Run(f"printf '%s\\n' {json.dumps(text)}"))
        elif place == "write":
            steps.append(Write(f"leak{number}.txt", f"key = {text}\n"))
        elif place == "home":  # the engine's own files, outside the workspace
            steps.append(Run(f"printf '%s\\n' {json.dumps(text)} > \"$HOME/.leak{number}\""))
        elif place == "stderr":  # a program of the engine's writing to its stderr
            steps.append(Run(f"printf '%s\\n' {json.dumps(text)} >&2"))
        elif place == "commit-message":
            steps.append(Run(f"git add -A && git commit -qm {json.dumps('note ' + text)} || true"))
        else:
            failure = f"cannot sign in with {text}"
    if failure is not None:
        steps.append(Fail(failure))
    return steps


def everything_that_left(owner: Owner, clone_id: str, number: int) -> dict[str, str]:
    """Every place the text of this clone (on issue `number`) leaves it: the run folder's own
    files, what the CLI shows, and all GitHub got (its branch's files and messages, its pull
    request, the comments on its issue)."""
    folder = RunFolder(owner.home.clones_dir / clone_id)
    workspace = folder.path / "workspace"
    places = {
        f"run folder {path.relative_to(folder.path)}": path.read_text(errors="replace")
        for path in folder.path.rglob("*")
        if path.is_file() and not path.is_symlink() and workspace not in path.parents
    }
    output = FakeLauncher(default_state_dir()).clone_folder(clone_id) / OUTPUT_FILE
    places["the clone's output"] = output.read_text(errors="replace") if output.exists() else ""
    assert not (folder.path / "engine").exists(), "the engine's corner stays behind"
    lines = places.get("run folder progress.jsonl", "").splitlines()
    texts = [json.loads(line).get("text", "") for line in lines if line.strip()]
    places["progress texts, joined"] = "".join(texts)
    for args in (("get", clone_id, "-n", "500"), ("get", clone_id, "--json", "-n", "500")):
        result = owner.cli(*args)
        places[" ".join(args)] = result.out + result.err
    listed = json.loads(owner.cli("list", "--json").out)
    places["list --json"] = json.dumps([c for c in listed if c["id"] == clone_id])
    bare = str(owner.github.repo_path("you/app"))
    branch = f"shadowclone/{number}-leaky"
    if owner.github.branch_sha("you/app", branch) is not None:
        pushed = subprocess.run(
            ["git", "--git-dir", bare, "log", "-p", "--format=%B", branch, "^main"],
            capture_output=True,
            text=True,
            errors="replace",
            check=True,
        )
        places["pushed to GitHub"] = pushed.stdout
    for issue in owner.github.pull_requests("you/app"):
        if issue.pull is not None and issue.pull.head_ref == branch:
            places[f"pull request #{issue.number}"] = issue.title + issue.body
    places["comments"] = "".join(c.body for c in owner.github.comments("you/app", number))
    return places


@settings(
    max_examples=int(os.environ.get("SHADOWCLONE_REDACTION_CLONES", "6")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(chosen=leaks, extra=extras)
def test_no_secret_leaves_a_clone_in_any_form_or_split(
    sc_owner: Owner, chosen: list[tuple[str, str, str, int]], extra: str
) -> None:
    write_secrets(sc_owner, extra)
    secrets = {"token": sc_owner.token, "api_key": SECRET, "extra": extra, "refresh": REFRESH}
    number = sc_owner.github.create_issue("you/app", author="you", title="Leaky")
    if sc_owner.serve is not None:
        sc_owner.serve.end()
    sc_owner.serving(script_for(secrets, chosen))
    clone_id = sc_owner.start(f"you/app#{number}")
    record = sc_owner.wait(clone_id, State.DONE, State.FAILED)
    for place, text in everything_that_left(sc_owner, clone_id, number).items():
        for name, secret in secrets.items():
            assert not found_in(text, secret), f"{name} leaked into {place}: {chosen}"
    wrote = any(place in ("write", "commit-message") for _, _, place, _ in chosen)
    if wrote:
        assert record.pr_url is None
        shown = sc_owner.cli("get", clone_id, "-n", "500").out
        assert "push stopped: a secret is in" in shown


def test_a_secret_in_a_committed_file_stops_the_push_unless_allowed(sc_owner: Owner) -> None:
    number = sc_owner.github.create_issue("you/app", author="you", title="Config")
    sc_owner.serving([Write("config.env", f"ANTHROPIC_API_KEY={SECRET}\n"), Say("done")])
    stopped = sc_owner.start(f"you/app#{number}")
    sc_owner.wait(stopped, State.DONE, State.FAILED)
    shown = sc_owner.cli("get", stopped, "-n", "100").out
    assert "push stopped: a secret is in config.env" in shown
    assert sc_owner.github.branch_sha("you/app", "shadowclone/1-config") is None
    allowed = sc_owner.cli("start", f"you/app#{number}", "--allow-secrets", "--json")
    assert allowed.code == 0, allowed.err
    clone_id = json.loads(allowed.out)["id"]
    sc_owner.wait(clone_id, State.DONE)
    pushed = sc_owner.github.read_file("you/app", "shadowclone/1-config", "config.env")
    assert pushed == f"ANTHROPIC_API_KEY={SECRET}\n"


def test_a_token_the_engine_renews_is_never_let_out(sc_owner: Owner) -> None:
    """A token the secrets file never held, which the engine writes into the login file of its
    state folder (as Claude Code and Codex do when they renew a login) and then says, prints and
    logs: the run program learns it from the file and nothing lets it out."""
    renewed = "renewed-access-7Hq2Lw9Zx4Kp"
    write_secrets(sc_owner, "nothing-renewed-here-42")
    # Written without saying it: ROT13 in the command, as the engine renews a login unseen.
    login = json.dumps({"accessToken": renewed, "expiresAt": 1})
    hidden = codecs.encode(login, "rot13")
    number = sc_owner.github.create_issue("you/app", author="you", title="Leaky")
    if sc_owner.serve is not None:
        sc_owner.serve.end()
    sc_owner.serving(
        [
            Write("notes.md", "notes\n"),
            Run(
                f"printf '%s' {json.dumps(hidden)} | tr A-Za-z N-ZA-Mn-za-m"
                ' > "$TMPDIR/credentials.json"'
            ),
            Say(f"my new token is {renewed}"),
            Run(f"printf '%s\\n' {renewed}; printf '%s\\n' {renewed} >&2"),
            Say(f"and split: {renewed[:9]}"),
            Say(f"{renewed[9:]} there"),
        ]
    )
    clone_id = sc_owner.start(f"you/app#{number}")
    sc_owner.wait(clone_id, State.DONE, State.FAILED)
    left = everything_that_left(sc_owner, clone_id, number)
    for place, text in left.items():
        assert not found_in(text, renewed), f"the renewed token leaked into {place}"
    assert "my new token is [redacted]" in left["run folder progress.jsonl"]
