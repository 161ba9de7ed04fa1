"""Loop ids: the one pattern every path built from a user-given id is checked against."""

from __future__ import annotations

import os
import re

from ralph.errors import StoreError

LOOP_ID_PATTERN = re.compile(r"^ralph-[a-z0-9-]+$")


def validate_loop_id(loop_id: str) -> str:
    """A user-given id must match the pattern before it touches a path."""
    if not LOOP_ID_PATTERN.fullmatch(loop_id or ""):
        raise StoreError(
            f"invalid loop id {loop_id!r}",
            hint="loop ids look like ralph-fix-date-parser-3f9a1c2e (lowercase, digits, dashes)",
        )
    return loop_id


def new_loop_id(task: str) -> str:
    """`ralph-<slug>-<8 hex>`: readable in listings, unique across runs of the same task."""
    slug = re.sub(r"[^a-z0-9]+", "-", task.lower()).strip("-")[:40].strip("-") or "loop"
    return f"ralph-{slug}-{os.urandom(4).hex()}"
