"""The names, labels and paths the Docker launcher and the clone image agree on.

In one place because three parties read them: the launcher's modules, the image
(image/Dockerfile, image/clone-entry) and the tests, which look containers up by them.
"""

from __future__ import annotations

from shadowclone.plugin import Refused, contract

LABEL_CLONE = contract.LABEL_CLONE
LABEL_TARGET = contract.LABEL_TARGET
LABEL_SPARE = "shadowclone.spare-of"
"""On a spare: the device and inode of the folder it waits in (a rename keeps them)."""
LABEL_SPARE_SPEC = "shadowclone.spare-spec"
"""On a spare: the digest of all it was made with but its clone (`Recipe.digest`)."""
CONTAINER_PREFIX = "shadowclone-"
SPARE_PREFIX = "shadowclone-spare-"
SPARE_PIPE = ".spare"
"""The pipe in a spare's folder on which `launch` names its clone (image/clone-entry)."""
SPARE_VARIABLE = "SHADOWCLONE_SPARE"
LABEL_SCOPE = "shadowclone.clones-folder"
LABEL_PROXY_OF = "shadowclone.proxy-of"
LABEL_EGRESS_OF = "shadowclone.egress-of"
VERSION_LABEL = "io.shadowclone.version"
"""The shadowclone an image holds (`shadowclone image build` sets it)."""

RUN_FOLDER = contract.CONTAINER_RUN_FOLDER
SECRETS_FILE = contract.CONTAINER_SECRETS_FILE
LOGIN_STATE = "/clone/login-state"
REPO_CACHE = contract.CONTAINER_REPO_CACHE
HOME = "/home/clone"
PRIVATE = "/run/clone"
"""The in-memory folder where the image's entry point copies the secrets of a root owner."""
CLONE_UID = 1000
"""The image's `clone` user (image/Dockerfile's CLONE_UID): the run program's, for a root owner."""
CAPABILITIES = ("CHOWN", "SETUID", "SETGID", "KILL")
"""All a clone's container gets: what its run program needs to start the engine as another user
and stop it (image/clone-entry). Docker's init uses KILL to hand on the stop signal."""
OWNER_VARIABLE = "SHADOWCLONE_OWNER"
"""The owner's `uid:gid`, for the image's entry point."""
EGRESS_VARIABLE = contract.EGRESS_VARIABLE
"""The run program's way out of a network-off clone: the relay's URL with the egress token."""
LOGIN_STATE_VARIABLE = contract.LOGIN_STATE_VARIABLE
ENGINE_USER_VARIABLE = contract.ENGINE_USER_VARIABLE
"""Where the image names its engine user's `uid:gid` (image/Dockerfile)."""
EGRESS_FOLDER = "/egress"
"""Where the proxy's socket volume is mounted, in the proxy and in the clone (the image makes
the folder, owned by `clone`, so a new volume starts out writable by the proxy)."""
EGRESS_SOCKET = f"{EGRESS_FOLDER}/proxy.sock"
RELAY_ADDRESS = "127.0.0.1:3128"
"""Where the clone's relay listens (image/clone-entry)."""
EGRESS_USER = "shadowclone"
"""The user name in the egress proxy URL; the password is the clone's egress token."""
HOST_GATEWAY = {"host.docker.internal": "host-gateway"}


def container_name(clone_id: str) -> str:
    return f"{CONTAINER_PREFIX}{clone_id}"


def spare_name(spare: str) -> str:
    return f"{SPARE_PREFIX}{spare}"


def proxy_name(clone_id: str) -> str:
    return f"shadowclone-{clone_id}-proxy"


def volume_name(clone_id: str) -> str:
    return f"shadowclone-{clone_id}-egress"


def check_id(clone_id: str) -> None:
    """Refuse what cannot be part of a container's name before Docker is asked anything."""
    if not clone_id or not all(c.isalnum() or c in "-_." for c in clone_id):
        raise Refused(f"{clone_id!r} is not a clone id")
