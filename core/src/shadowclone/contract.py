"""The run contract: what a launcher hands the run program, and the names both sides and the
engines agree on, defined here once.

A launcher starts the run program with the run folder and the secrets file where these
variables say (a container's launcher mounts them at the fixed paths below), the clone's id in
`CLONE_ID_VARIABLE` (serve puts it, with the rest of the non-secret variables, in
`LaunchSpec.env`), and labels its clone with `LABEL_CLONE` so it finds it again.
"""

from __future__ import annotations

RUN_FOLDER_VARIABLE = "SHADOWCLONE_RUN_FOLDER"
"""Where the clone's run folder is, as the run program sees it."""
SECRETS_VARIABLE = "SHADOWCLONE_SECRETS_FILE"
"""Where the owner's secrets file is, read-only: the run program alone opens it."""
CLONE_ID_VARIABLE = "SHADOWCLONE_CLONE_ID"
"""The clone's id; every process of the clone inherits it, so leftovers can be found."""
LOGIN_STATE_VARIABLE = "SHADOWCLONE_LOGIN_STATE"
"""The login's state folder, which outlives the clone (a ChatGPT plan's rotated tokens)."""
EGRESS_VARIABLE = "SHADOWCLONE_EGRESS_PROXY"
"""A network-off clone's way out (a proxy URL with its token), for the run program alone."""
RELAY_VARIABLE = "SHADOWCLONE_RELAY"
"""serve's relay (`http://HOST:PORT`) when the run folder is the clone machine's own and travels
over the network; unset when the run folder is shared with the owner's machine."""
RELAY_CREDENTIAL_VARIABLE = "SHADOWCLONE_RELAY_CREDENTIAL"
"""The clone's credential for serve's relay, for the run program alone (as the egress token)."""
WORKSPACE_VARIABLE = "SHADOWCLONE_WORKSPACE"
"""Where the workspace goes (default: `workspace` in the run folder)."""
ENGINE_USER_VARIABLE = "SHADOWCLONE_ENGINE_USER"
"""UID:GID the engine runs as, apart from the run program (the clone image sets it)."""
REPO_CACHE_VARIABLE = "SHADOWCLONE_REPO_CACHE"
"""The repository's cache (a bare mirror of its branches, run/repocache.py), which outlives the
clone: the run program keeps it, the engine may only read it."""
REPO_CACHE_MIRROR = "mirror.git"
"""In a repository's cache: the bare mirror of its branches."""
REPO_CACHE_COMPLETE = "shadowclone-complete"
"""In the mirror: made once its first fill ended (a mirror without it is made again)."""
REPO_CACHE_LOCK = "lock"
"""In a repository's cache: the lock its fills, and its removal, take."""
SHARED_GROUP_VARIABLE = "SHADOWCLONE_SHARED_GROUP"
"""The group the run program and the engine share their folders through."""
SHARED_UMASK = 0o007
"""What the engine (and the run program in shared folders) creates, the other can change."""
SHARED_DIR_MODE = 0o2770
"""Shared folders: the run program's and the group's; what is made in them, folders too,
takes the group (setgid), so with `SHARED_UMASK` it is shared as it is made."""

REQUEST_FILE = "request.json"
"""What `start` asks for, in the run folder."""
HANDOFF_FILE = "handoff.json"
"""In the run folder: the phase a relaunch is for (a launch without it is a first one)."""

GITHUB_TOKEN_KEY = "github_token"
"""The secrets file's key of the GitHub token every clone needs."""

CONTAINER_RUN_FOLDER = "/clone/run"
"""Where a container's launcher mounts the run folder (the run program's default)."""
CONTAINER_WORKSPACE = CONTAINER_RUN_FOLDER + "/workspace"
"""Where the workspace is in a container (`workspace` in the run folder): a dev container's
`workspaceFolder` leads there."""
CONTAINER_SECRETS_FILE = "/clone/secrets.toml"
"""Where a container's launcher mounts the secrets file (the run program's default)."""
CONTAINER_REPO_CACHE = "/clone/repo-cache"
"""Where a container's launcher mounts the repository's cache: always there, since the
workspaces that borrow its objects name it."""

ENGINE_AREA = "engine"
"""In the run folder: the engine's own folder; its home is `home` in it."""
CONTAINER_PREBUILT = "/clone/prebuilt"
"""In a prebuilt image (run/prebuild.py): what the environment's `onCreateCommand` and
`updateContentCommand` made, `workspace` and `home`, with `PREBUILT_INFO` saying from what."""
FEATURES_LIFECYCLE = "/clone/features-lifecycle.json"
"""In an environment image with features: the lifecycle commands its features declare (their
entries of the image's `devcontainer.metadata` label), which run before the configuration's."""
FEATURES_LIFECYCLE_VARIABLE = "SHADOWCLONE_FEATURES_LIFECYCLE"
"""Where the run program looks for them instead (tests)."""
PREBUILT_INFO = "prebuilt.json"
PREBUILT_VARIABLE = "SHADOWCLONE_PREBUILT"
"""Where the run program looks for a prebuilt image's files (default: `CONTAINER_PREBUILT`)."""

LABEL_CLONE = "shadowclone.clone"
"""The label naming the clone a launcher's container (or process) runs."""
LABEL_TARGET = "shadowclone.target"
"""The label naming the clone's target, owner/repo#number."""

ASK_SERVER = "shadowclone_ask"
"""The MCP server the engine asks the owner through; its tool is `mcp__shadowclone_ask__ask`."""
ASK_TOOL = "ask"
