"""The serve fixtures (a scripts file for the fake launcher) for the hostile-input tests."""

from tests.serve.conftest import ready, scripts  # noqa: F401 - fixtures
