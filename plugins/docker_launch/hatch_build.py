"""Ships the clone image, the repository's top-level image/, in this plugin's wheel.

A build hook rather than a `force-include` table: the wheel is built both from the checkout,
where image/ is two folders up, and from the sdist (`uv build` makes the wheel of it), which
carries image/ at its root; a fixed force-include path fails the build in one of the two."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SHIPPED_AS = "shadowclone_docker_launch/image"
"""Where the wheel holds it: the package's `image` folder (images.image_files)."""


class ImageHook(BuildHookInterface):  # type: ignore[type-arg]
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version == "editable":
            return  # an editable install reads the checkout's image/ (images.image_files)
        root = Path(self.root)
        for folder in (root.parent.parent / "image", root / "image"):
            if (folder / "Dockerfile").is_file():
                build_data["force_include"][str(folder)] = SHIPPED_AS
                return
        raise FileNotFoundError(f"no image/Dockerfile beside {root} nor two folders up")
