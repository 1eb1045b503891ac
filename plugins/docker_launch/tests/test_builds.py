"""A build's failure as the owner reads it: docker's last lines in one error, and, when a
download met a certificate authority the build does not trust (a TLS-inspecting proxy), the
option that gives it."""

from __future__ import annotations

import sys

import pytest

from shadowclone_docker_launch.builds import CA_HINT, BuildError, run_build


def failing(*lines: str) -> list[str]:
    printed = "".join(f"print({line!r});" for line in lines)
    return [sys.executable, "-c", f"{printed}raise SystemExit(1)"]


@pytest.mark.parametrize(
    "line",
    [
        "npm ERR! code SELF_SIGNED_CERT_IN_CHAIN",
        "pip: SSL: CERTIFICATE_VERIFY_FAILED certificate verify failed: self-signed certificate",
        "curl: (60) SSL certificate problem: unable to get local issuer certificate",
        "Get https://registry-1.docker.io/v2/: x509: certificate signed by unknown authority",
    ],
)
def test_an_untrusted_authority_names_the_ca_option(line: str) -> None:
    heard: list[str] = []
    with pytest.raises(BuildError) as failed:
        run_build(failing("Step 3/9 : RUN npm install", line), "the image", heard.append)
    said = str(failed.value)
    assert said.startswith("docker could not build the image (exit 1): Step 3/9")
    assert said.endswith(CA_HINT) and "--ca-cert FILE" in said and "\n" not in said
    assert heard[-1] == line


def test_another_failure_has_no_such_hint(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(BuildError) as failed:
        run_build(failing("E: Unable to locate package nope"), "the image", None)
    assert "--ca-cert" not in str(failed.value)
    assert "Unable to locate package nope" in capsys.readouterr().out  # shown as it went
