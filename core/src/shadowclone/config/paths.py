"""Where shadowclone keeps things on the host, by the platform's conventions.

`SHADOWCLONE_HOME`, when set, puts the config, the secrets file, the clones folder, the setup
records and the locks all under that one folder (tests and the demo use it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import attrs
import platformdirs

HOME_VARIABLE = "SHADOWCLONE_HOME"
APP = "shadowclone"


@attrs.frozen
class Paths:
    """The host paths; the locks live in the clones folder."""

    config_file: Path
    secrets_file: Path
    clones_dir: Path
    setup_dir: Path

    @property
    def start_lock(self) -> Path:
        return self.clones_dir / "start.lock"

    @property
    def serve_lock(self) -> Path:
        return self.clones_dir / "serve.lock"

    @property
    def serve_log(self) -> Path:
        return self.clones_dir / "serve.log"

    @property
    def throttles_file(self) -> Path:
        """Which logins serve holds back for an overload (`Throttles`), for `get` and
        `status` to tell."""
        return self.clones_dir / "throttles.json"

    @property
    def served_config_file(self) -> Path:
        """The config a running serve applies, and why the file is not applied if it is not
        (`serve/following.py`): beside the config file, so it is found whatever the config
        says of the clones folder, and while the config does not load."""
        return self.config_file.with_name("serve-config.json")

    @property
    def completion_cache(self) -> Path:
        """The installed engines as a shell's completion last found them, and what they were
        found under (`cli/params.py`): a TAB need not load every plugin."""
        return self.config_file.with_name("completion-cache.json")

    @property
    def repo_caches_dir(self) -> Path:
        """The repositories' caches (run/repocache.py), one folder each: `OWNER/NAME`."""
        return self.clones_dir / "repos"

    def repo_cache(self, full_name: str) -> Path:
        """The cache folder of the repository `owner/name` (as GitHub spells it, any case)."""
        owner, name = full_name.lower().split("/")
        return self.repo_caches_dir / owner / name

    @property
    def sessions_dir(self) -> Path:
        """serve's pointers from each pull request to the clone that last kept an engine
        session for it (serve/sessions.py)."""
        return self.clones_dir / "sessions"

    @property
    def active_dir(self) -> Path:
        """One small file per active clone: admission reads these, not every run folder."""
        return self.clones_dir / "active"

    def login_state(self, login: str) -> Path:
        """The state folder of one login, beside the secrets it grew from: what the clones of
        a login that renews its tokens keep of them. Host code makes it, never opens it."""
        return self.secrets_file.parent / "logins" / login

    def with_overrides(self, clones: str | None, secrets: str | None) -> Paths:
        return attrs.evolve(
            self,
            clones_dir=Path(clones).expanduser() if clones else self.clones_dir,
            secrets_file=Path(secrets).expanduser() if secrets else self.secrets_file,
        )


def default_paths(environ: Mapping[str, str] | None = None) -> Paths:
    environ = os.environ if environ is None else environ
    home = environ.get(HOME_VARIABLE)
    if home:
        root = Path(home).expanduser().absolute()
        return Paths(root / "config.toml", root / "secrets.toml", root / "clones", root / "setup")
    dirs = platformdirs.PlatformDirs(APP, appauthor=False)
    config_dir = Path(dirs.user_config_dir)
    data_dir = Path(dirs.user_data_dir)
    return Paths(
        config_dir / "config.toml",
        config_dir / "secrets.toml",
        data_dir / "clones",
        data_dir / "setup",
    )
