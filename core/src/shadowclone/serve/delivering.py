"""Exactly-once delivery of the inbox to a clone.

The owner's `send` and `answer` append to inbox.jsonl; the clone reads only deliveries.jsonl,
which serve alone appends to. The deliveries file is itself the record of what was delivered,
so a restart of serve, however abrupt, neither drops nor repeats a line.
"""

from __future__ import annotations

import logging

from shadowclone import files
from shadowclone.node import schemas
from shadowclone.serve.clones import Clone

log = logging.getLogger(__name__)


def deliver(clone: Clone) -> None:
    """Copy each inbox line the clone has not had to its deliveries, once."""
    seen, _, clone.deliveries_offset = clone.folder.deliveries(clone.deliveries_offset)
    clone.delivered.update(line.id for line in seen)
    lines, _, clone.inbox_offset = clone.folder.inbox(clone.inbox_offset)
    for line in lines:
        if line.id in clone.delivered:
            continue
        files.append_line(clone.folder.deliveries_file, schemas.dumps(line))
        clone.delivered.add(line.id)
        log.info("delivered %s %s to clone %s", line.kind, line.id, clone.id)
