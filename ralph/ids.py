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


def loop_branch(loop_id: str) -> str:
    """The loop's git branch, `ralph/<slug>-<hash>`: the id without its `ralph-` prefix, so a
    branch never reads `ralph/ralph-…`. (Loops started before keep theirs: the state names it.)"""
    return f"ralph/{validate_loop_id(loop_id).removeprefix('ralph-')}"


def short_id(loop_id: str) -> str:
    """What tells a loop from the others at a glance: its 8-hex suffix, else the id itself."""
    tail = loop_id.rsplit("-", 1)[-1]
    if len(tail) == 8 and all(c in "0123456789abcdef" for c in tail):
        return tail
    return loop_id.removeprefix("ralph-")
