"""The memory's commands that are not results of their own: search (its index and progress
bar; the hits draw themselves, `memory/listing.SearchResults`), a stored prompt, the obsolete
mark, and the date options several commands share."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from ralph.cli.common import show
from ralph.cli.live import progress_bar
from ralph.errors import ConfigError, StoreError
from ralph.glyphs import spans
from ralph.ids import validate_loop_id
from ralph.memory.merit import restore
from ralph.records import FAILURE_CATEGORIES

if TYPE_CHECKING:
    from rich.console import Console

    from ralph.memory.store import MemoryStore


def stored_prompt(store: MemoryStore, loop_id: str, iteration: int | None) -> str:
    """The prompt of an iteration as its actor got it (`NNN/prompt.md`); default the last."""
    folder = store.loop_dir(loop_id)
    stored = sorted(
        int(path.parent.name)
        for path in folder.glob("[0-9][0-9][0-9]*/prompt.md")
        if path.parent.name.isdigit()
    )
    if iteration is None:
        if not stored:
            store.read_state(loop_id)  # names an unknown loop as such
            raise StoreError(
                f"loop {loop_id} has no stored prompt",
                hint="prompts live in .aiwg/ralph/loops/<id>/NNN/, kept on this machine only",
            )
        iteration = stored[-1]
    path = store.artifacts_dir(loop_id, iteration) / "prompt.md"
    if not path.is_file():
        have = f"; it has prompts for iterations {spans(stored)}" if stored else ""
        raise StoreError(f"loop {loop_id} has no prompt for iteration {iteration}{have}")
    return path.read_text("utf-8", errors="replace")


def search_reflections(
    store: MemoryStore,
    query: str,
    console: Console,
    *,
    as_json: bool,
    category: str | None = None,
    min_confidence: float | None = None,
    loop_id: str | None = None,
    since: str | None = None,
    until: str | None = None,
    limit: int = 10,
) -> None:
    from ralph.memory.listing import SearchResults
    from ralph.memory.search import SearchIndex

    if loop_id is not None:
        validate_loop_id(loop_id)
    if category is not None and category not in FAILURE_CATEGORIES:
        choices = ", ".join(FAILURE_CATEGORIES)
        raise ConfigError(f"unknown failure category {category!r}", hint=f"one of: {choices}")
    with SearchIndex(store) as index:
        with progress_bar("indexing the memory (once; later searches reuse it)") as progress:
            index.sync(progress)
        hits = index.search(
            query,
            category=category,
            min_confidence=min_confidence,
            loop_id=loop_id,
            since=parse_when(since, "--since"),
            until=parse_when(until, "--until", end_of_day=True),
            limit=limit,
        )
    if as_json:
        show(hits, as_json=True)
        return
    console.print(SearchResults(query, hits), crop=False)


def parse_when(text: str | None, flag: str, *, end_of_day: bool = False) -> datetime | None:
    """`YYYY-MM-DD` or an ISO 8601 date-time; a bare date ends at midnight with `end_of_day`."""
    if text is None:
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ConfigError(
            f"{flag} {text!r} is not a date", hint="use YYYY-MM-DD or an ISO 8601 date-time"
        ) from None
    if end_of_day and len(text.strip()) == 10:
        when += timedelta(days=1, microseconds=-1)
    return when


def mark_obsolete(
    store: MemoryStore, loop_id: str, iteration: int, console: Console, *, obsolete: bool
) -> None:
    from ralph.memory.shown import last_iteration

    last_iteration(store, loop_id, iteration)  # a missing one: an error naming those there are
    changed = store.mark_obsolete(loop_id, iteration, obsolete=obsolete)
    if not obsolete:  # a lesson retired for not helping comes back too (memory/merit.py)
        restore(store, loop_id, iteration)
    what = "obsolete: its lessons are no longer injected" if obsolete else "no longer obsolete"
    prefix = "" if changed else "already "
    console.print(f"{loop_id}#{iteration} {prefix}{what}", markup=False)
