"""Removing a container whose removal another caller began: it is going, not an error (a spare
whose start failed is removed by the thread that started it while a launch removes the spares
of its folder). Without Docker: a container that answers as Docker does."""

from __future__ import annotations

import docker.errors
import pytest
import requests

from shadowclone_docker_launch.scope import remove_container


def api_error(status: int, explanation: str) -> docker.errors.APIError:
    response = requests.Response()
    response.status_code = status
    return docker.errors.APIError("refused", response=response, explanation=explanation)


class Refusing:
    """A container whose removal Docker refuses with `error`."""

    def __init__(self, error: docker.errors.DockerException) -> None:
        self.error = error

    def remove(self, force: bool, v: bool) -> None:
        raise self.error


@pytest.mark.parametrize(
    "error",
    [
        docker.errors.NotFound("gone", explanation="No such container: x"),
        api_error(409, "removal of container x is already in progress"),
    ],
)
def test_a_container_gone_or_going_is_removed(error: docker.errors.DockerException) -> None:
    remove_container(Refusing(error))  # type: ignore[arg-type]


def test_any_other_refusal_is_raised() -> None:
    error = api_error(409, "conflict: unable to remove the container")
    with pytest.raises(docker.errors.APIError):
        remove_container(Refusing(error))  # type: ignore[arg-type]
    with pytest.raises(docker.errors.APIError):
        remove_container(Refusing(api_error(500, "removal of container x is already in progress")))  # type: ignore[arg-type]
