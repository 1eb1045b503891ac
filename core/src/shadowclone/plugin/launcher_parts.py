"""The optional parts of a launcher: what serve asks of a launcher that has them (each found
with `isinstance`), beyond the `Launcher` protocol every launcher follows."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from shadowclone.plugin.types import LaunchSpec


@runtime_checkable
class PreparingLauncher(Protocol):
    """A launcher whose `prepare` may have work for a spec without an environment (optional:
    serve prepares such a spec only when `needs_prepare` says so): the swarm launcher pushes
    the clone image to the registry its nodes pull from, which takes long the first time and
    must not hold serve's loop in `launch`."""

    def needs_prepare(self, spec: LaunchSpec) -> bool:
        """Whether `prepare(spec)` has work to do before `launch(spec)`."""
        ...


@runtime_checkable
class RelayingLauncher(Protocol):
    """A launcher whose clones' machines share no folder with the owner's (optional): serve
    runs its relay (docs/scale-out.md) on `host_address()` at `relay_port()`, and each spec
    carries the clone's `RelayAccess`, which the launcher hands the run program."""

    def relay_port(self) -> int | None:
        """The port serve's relay listens on; None: this launcher's run folders are shared."""
        ...


@runtime_checkable
class DescribedLauncher(Protocol):
    """A launcher with more to show than ready or not (optional: `shadowclone status` shows
    its lines under the launcher's): the machines of a swarm, each with its clones."""

    def describe(self) -> list[tuple[str, bool, str]]:
        """One (name, fine, detail) per thing the owner may want to see: a node down is not
        fine."""
        ...


@runtime_checkable
class PhasedLauncher(Protocol):
    """A launcher that keeps something for a clone's whole life, across its phases (optional:
    serve calls `end_phase` between phases only with a launcher that has it, `remove`
    otherwise).

    A clone may end one phase and ask for another (a review after the work): serve then calls
    `end_phase(clone_id)` and `launch` again for the same clone. What a phase ran goes; what
    lasts for the clone (the Docker launcher's Compose services, with their data) stays for the
    next launch to take up, and goes with `remove` once the clone's ending is recorded."""

    def end_phase(self, clone_id: str) -> None:
        """Remove what the clone's phase ran, keeping what the clone's next phase takes up."""
        ...


@runtime_checkable
class SpareLauncher(Protocol):
    """A launcher that can start a clone's container ahead of its clone (optional: serve
    keeps spares only with a launcher that has these too).

    serve makes a spare run folder and calls `keep_spare` with the spec a clone of that kind
    would launch with, its `run_folder` the spare and its `clone_id` the spare's name. A start
    may then take the folder as a new clone's (renamed; what is mounted stays mounted), and
    serve's `launch` of that clone's spec, for the same folder, should take up what was
    started ahead if it was made for the same spec, or remove it and launch as usual. Nothing
    started ahead may read the secrets or run the clone before `launch`."""

    def keep_spare(self, spec: LaunchSpec) -> None:
        """Start what `spec` needs, waiting in the spare folder `spec.run_folder`."""
        ...

    def drop_spare(self, folder: Path) -> None:
        """Remove what was started ahead in `folder`, a spare serve gave up."""
        ...

    def drop_spares(self, keep: Sequence[Path]) -> list[str]:
        """Remove what was started ahead in every folder not in `keep` (gone, given up by
        serve, or taken by a clone that launched without it); one line per thing removed."""
        ...
