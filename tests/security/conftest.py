"""Fixtures shared with other tests: serve's scripts file for the fake launcher, and the owner
of a whole clone (the CLI, serve, the fake GitHub)."""

from tests.cli.test_clone_e2e import owner  # noqa: F401 - fixture
from tests.serve.conftest import ready, scripts  # noqa: F401 - fixtures
