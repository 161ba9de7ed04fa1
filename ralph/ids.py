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


SLUG_CHARS = 40


def new_loop_id(task: str) -> str:
    """`ralph-<slug>-<8 hex>`: readable in listings, unique across runs of the same task."""
    return f"ralph-{slug_of(task)}-{os.urandom(4).hex()}"


def slug_of(task: str) -> str:
    """The task's first words, at most `SLUG_CHARS`, cut between words (`…-comparison`, never
    `…-comparison-te`); a first word longer than that is cut."""
    words = [w for w in re.split(r"[^a-z0-9]+", task.lower()) if w]
    slug = ""
    for word in words:
        longer = f"{slug}-{word}" if slug else word
        if len(longer) > SLUG_CHARS:
            break
        slug = longer
    return slug or (words[0][:SLUG_CHARS] if words else "loop")


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
