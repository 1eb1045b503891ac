"""The dashboard answers only to its own names: a page that rebinds a name of its own to
127.0.0.1 reaches nothing."""

from __future__ import annotations

import httpx2
import pytest
from shadowclone.config import Paths, load_config, set_value
from shadowclone.dashboard.hosts import ServedNames
from shadowclone.dashboard.server import make_server
from shadowclone_testing.web import free_port, running


def test_a_request_for_a_name_the_dashboard_does_not_serve_is_refused(sc_home: Paths) -> None:
    set_value(sc_home, "dashboard.url", '"https://dash.example.net:8765/"')
    config, paths = load_config(sc_home)
    port = free_port()
    with running(make_server(config, paths, "127.0.0.1", port)) as url:
        for name in (
            "rebound.attacker.example",
            "localhost.attacker.example",
            "127.0.0.1.nip.io",
            "10.0.0.7",
            "dash.example.net.attacker.example",
        ):
            refused = httpx2.get(f"{url}/", headers={"Host": f"{name}:{port}"}, timeout=5)
            assert refused.status_code == 421, name
            assert refused.text == "refused: this dashboard does not serve that host name"
            login = httpx2.get(f"{url}/login", headers={"Host": name}, timeout=5)
            assert login.status_code == 421, name
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "LocalHost."):
            assert httpx2.get(f"{url}/", headers={"Host": host}, timeout=5).status_code == 401
        served = httpx2.get(f"{url}/", headers={"Host": "dash.example.net:8765"}, timeout=5)
        assert served.status_code == 401  # its configured name: on to the token's gate


@pytest.mark.parametrize(
    ("bind", "header", "allowed"),
    [
        ("127.0.0.1", "127.0.0.1:8765", True),
        ("127.0.0.1", "localhost", True),
        ("127.0.0.1", "192.168.1.5:8765", False),
        ("::1", "[::1]:8765", True),
        ("192.168.1.5", "192.168.1.5:8765", True),
        ("192.168.1.5", "localhost:8765", False),
        ("192.168.1.5", "evil.example", False),
        ("0.0.0.0", "192.168.1.5:8765", True),
        ("0.0.0.0", "[fe80::1]:8765", True),
        ("0.0.0.0", "localhost", True),
        ("0.0.0.0", "evil.example", False),
        ("0.0.0.0", "", False),
    ],
)
def test_the_names_served_follow_the_bind_address(bind: str, header: str, allowed: bool) -> None:
    assert ServedNames(bind).allows(header) is allowed
