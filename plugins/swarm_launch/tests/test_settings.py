"""`[launchers.swarm]` as the owner writes it: every key read as documented, anything else
refused in one line naming the key and what was expected; and what the launcher refuses before
it asks the swarm anything."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st
from shadowclone.plugin import BadInput, LaunchSpec, NetworkMode, Refused, RelayingLauncher

from shadowclone_swarm_launch.launcher import SwarmLauncher
from shadowclone_swarm_launch.sent import checked
from shadowclone_swarm_launch.settings import SwarmSettings
from shadowclone_swarm_launch.tasks import rfc3339


def test_a_full_table_is_read() -> None:
    settings = SwarmSettings.read(
        {
            "manager": "ssh://me@box",
            "registry": "registry.lan:5000/team",
            "node_lost_s": 90,
            "run_folders": "shared",
            "host_address": "10.0.0.5",
        }
    )
    assert settings == SwarmSettings(
        "ssh://me@box", "registry.lan:5000/team", 90.0, "shared", "10.0.0.5"
    )
    assert settings.host() == "10.0.0.5"
    assert SwarmSettings.read({}) == SwarmSettings()


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"managr": "x"}, "launchers.swarm.managr: unknown key; expected one of "),
        ({"manager": ""}, "launchers.swarm.manager: expected a non-empty string"),
        ({"registry": 5}, "launchers.swarm.registry: expected a non-empty string"),
        ({"node_lost_s": 1}, "launchers.swarm.node_lost_s: expected seconds, from 5 to 86400"),
        ({"node_lost_s": True}, "launchers.swarm.node_lost_s: expected seconds, from 5 to 86400"),
        ({"run_folders": "nfs"}, "launchers.swarm.run_folders: expected one of shared, sent"),
        ({"relay_port": 0}, "launchers.swarm.relay_port: expected a port, from 1 to 65535"),
        ({"relay_port": "7475"}, "launchers.swarm.relay_port: expected a port, from 1 to 65535"),
        ({"relay_port": True}, "launchers.swarm.relay_port: expected a port, from 1 to 65535"),
    ],
)
def test_what_cannot_be_used_is_refused_in_one_line(options: dict[str, Any], said: str) -> None:
    with pytest.raises(BadInput) as refused:
        SwarmSettings.read(options)
    assert str(refused.value).startswith(said)


values = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12)


@given(
    st.dictionaries(
        st.sampled_from(
            [
                "manager",
                "registry",
                "node_lost_s",
                "run_folders",
                "host_address",
                "relay_port",
                "other",
            ]
        )
        | st.text(max_size=6),
        values,
        max_size=4,
    )
)
def test_any_table_is_read_or_refused_in_one_line(options: dict[str, Any]) -> None:
    try:
        SwarmSettings.read(options)
    except BadInput as error:
        assert "\n" not in str(error) and str(error).startswith("launchers.swarm.")


def test_a_network_off_clone_with_no_model_host_is_refused_before_the_swarm_is_asked(
    tmp_path: Path,
) -> None:
    """Its proxy would let nothing through: the clone fails in one line, nothing is made."""
    spec = LaunchSpec(
        clone_id="261206-000000-abcd",
        run_folder=tmp_path,
        secrets_file=tmp_path / "secrets.toml",
        image="unused",
        network=NetworkMode.MODEL_ONLY,
    )
    launcher = SwarmLauncher(tmp_path, settings=SwarmSettings(manager="tcp://192.0.2.1:9"))
    with pytest.raises(Refused) as refused:
        launcher.launch(spec)
    assert "no model host" in str(refused.value) and "\n" not in str(refused.value)


@given(
    st.datetimes(
        min_value=datetime.datetime(1970, 1, 2), timezones=st.timezones(), allow_imaginary=False
    ),
    st.integers(0, 999),
)
def test_dockers_times_read_to_the_microsecond(when: datetime.datetime, nanos: int) -> None:
    """RFC 3339 with nanoseconds (Docker's `UpdatedAt`, `SystemTime`), in any offset."""
    offset = when.utcoffset()
    assert offset is not None
    minutes = int(offset.total_seconds()) // 60
    zone = (
        "Z"
        if minutes == 0
        else f"{'+' if minutes > 0 else '-'}{abs(minutes) // 60:02}:{abs(minutes) % 60:02}"
    )
    text = when.strftime("%Y-%m-%dT%H:%M:%S") + f".{when.microsecond:06}{nanos:03}{zone}"
    read = rfc3339(text)
    assert read is not None and read == when.replace(tzinfo=datetime.timezone(offset))


@given(st.text(max_size=40), st.text(min_size=1, max_size=5))
def test_anything_else_is_no_time(text: str, junk: str) -> None:
    """Nothing but a whole time is read: text around a time, or without one, is None."""
    if not any(c.isdigit() for c in text):
        assert rfc3339(text) is None
    assert rfc3339("2026-12-06T23:40:01.5Z" + junk) is None
    assert rfc3339(junk + "2026-12-06T23:40:01Z") is None


@pytest.mark.parametrize(("folders", "port"), [("sent", 7475), ("shared", None), (None, None)])
def test_serve_runs_its_relay_only_for_run_folders_sent(
    tmp_path: Path, folders: str | None, port: int | None
) -> None:
    settings = SwarmSettings(manager="tcp://127.0.0.1:9", run_folders=folders)
    launcher = SwarmLauncher(tmp_path / "clones", "image", settings=settings)
    assert isinstance(launcher, RelayingLauncher) and launcher.relay_port() == port


def test_a_sent_clone_without_its_relay_or_with_a_renewing_login_is_refused(
    tmp_path: Path,
) -> None:
    """serve gives a relaying launcher's specs their relay: one without cannot reach serve; a
    login whose tokens live in a folder of the owner's machine cannot run on another."""
    settings = SwarmSettings(manager="tcp://127.0.0.1:9", run_folders="sent")
    launcher = SwarmLauncher(tmp_path / "clones", "image", settings=settings)
    spec = LaunchSpec(
        clone_id="261206-000000-abcd",
        run_folder=tmp_path / "clones" / "261206-000000-abcd",
        secrets_file=tmp_path / "secrets.toml",
        image="image",
    )
    with pytest.raises(Refused, match="no access to serve's relay"):
        launcher.launch(attrs.evolve(spec, relay=None))
    with pytest.raises(Refused, match='run_folders = "shared"'):
        checked(attrs.evolve(spec, login_state=tmp_path / "login"))
    assert checked(attrs.evolve(spec, repo_cache=tmp_path / "repos")).repo_cache is None
