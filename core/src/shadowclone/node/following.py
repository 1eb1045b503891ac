"""`follow`: a clone's progress lines as they are written, until it ends."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from shadowclone import files
from shadowclone.node.runfolder import RunFolder
from shadowclone.node.schemas import ProgressLine
from shadowclone.node.scrub import scrubbed_line
from shadowclone.node.views import CloneView, read_view


def follow(
    folder: RunFolder,
    waiting_for: Callable[[CloneView], str],
    lines: int = 20,
    poll_s: float = 1.0,
    on_wait: Callable[[str], None] | None = None,
) -> Iterator[ProgressLine]:
    """See `Node.follow`; `waiting_for` is asked at each look, so a changed config counts."""
    from watchfiles import watch  # its native module: only for a follow

    progress, _, offset = folder.progress(files.tail_offset(folder.progress_file))
    yield from (scrubbed_line(line) for line in progress[-lines:]) if lines else []
    told = ""

    def ended() -> bool:
        nonlocal told
        view = read_view(folder)
        if on_wait is not None:
            reason = waiting_for(view)
            if reason and reason != told:
                on_wait(reason)
            told = reason
        return not view.state.active

    if any(p.final for p in progress) or ended():
        return
    for _changes in watch(
        folder.path,
        rust_timeout=int(poll_s * 1000),
        yield_on_timeout=True,
        debounce=50,
        step=20,
    ):
        new, _, offset = folder.progress(offset)
        yield from (scrubbed_line(line) for line in new)
        if any(p.final for p in new) or ended():
            return
