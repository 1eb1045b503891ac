"""The self-review stage: the engine reads the change in a fresh session and judges it."""

from __future__ import annotations

import subprocess

from shadowclone.plugin.types import ReviewContext, ReviewResult

DIFF_LIMIT = 60_000

PROMPT = """You are reviewing a change in this repository (shadowclone self-review).
Do not run the code and do not change any file. Read the diff below against {base}.
Answer with a first line that is exactly PASS or FAIL: <one-line reason>, then your review:
bugs, missing tests, anything the change breaks.

```diff
{diff}
```
"""


class SelfReviewStage:
    name = "self-review"

    def run(self, context: ReviewContext) -> ReviewResult:
        if context.consult is None:
            return ReviewResult(self.name, True, "skipped: no engine to review with")
        # The owner's work is committed before the reviews, with what the engine left; the
        # work tree of someone else's pull request holds the base's engine settings in place
        # of its own (run/engine_settings.py), so its change is read from its commits alone.
        head = () if context.owner_wrote else ("HEAD",)
        diff = subprocess.run(
            # As the engine: the repository's config (diff drivers, textconv) is the engine's.
            [*context.run_as, "git", "diff", context.base_ref, *head],
            cwd=context.workspace,
            env=dict(context.env) if context.env else None,
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        if not diff.strip():
            return ReviewResult(self.name, True, "nothing to review: the change is empty")
        answer = context.consult(PROMPT.format(base=context.base_ref[:12], diff=diff[:DIFF_LIMIT]))
        first = next((line.strip() for line in answer.splitlines() if line.strip()), "")
        passed = not first.upper().startswith("FAIL")
        summary = first if first else "the engine said nothing"
        return ReviewResult(self.name, passed, summary[:200], answer)
