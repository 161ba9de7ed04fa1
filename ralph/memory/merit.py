"""Lessons earn their place: how often each lesson was offered, whether it helped, which retire.

All of it is derived from the records (the search index's `uses`, `docs.scope`): a record lists
the lessons its prompt was given (`ralph.lessons_used`) and the failures it still had after its
attempt (`ralph.failures`), so a lesson *helped* an attempt that passed, or that no longer had
any of the failures the lesson is for (a record from before the failures were kept: one that
improved). A lesson offered `lesson_retire_after` times (default `RETIRE_AFTER`) without ever
helping is *retired*: not offered again. `ralph reflections obsolete --undo LOOP ITERATION`
brings a record's retired lessons back: it writes the time to `lessons.json` beside the memory
(`restore`), and only offers after it count from then on. Near-duplicate lessons (the same
failure, the same advice) are one lesson: their counts add up (`retrieval.deduplicate`).
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ralph.errors import StoreError
from ralph.files import atomic_write_json, read_json

if TYPE_CHECKING:
    from ralph.memory.search import SearchIndex
    from ralph.memory.store import MemoryStore

RETIRE_AFTER = 3
RESTORES_NAME = "lessons.json"  # {"restored": {"loop#iteration": ISO time}}


@dataclass
class Merit:
    """How often a lesson was offered since it was last restored, and how often it helped."""

    offered: int = 0
    helped: int = 0
    used_by: list[str] = field(default_factory=list)

    def add(self, other: Merit) -> Merit:
        return Merit(
            self.offered + other.offered, self.helped + other.helped, self.used_by + other.used_by
        )

    def retired(self, retire_after: int) -> bool:
        return self.offered >= retire_after and self.helped == 0


def helped(lesson_scope: set[str], passed: bool, after: str | None, improved: bool | None) -> bool:
    """Whether the attempt that got a lesson fixed the failure the lesson is for."""
    if passed:
        return True
    if after is not None and lesson_scope:
        return not lesson_scope & set(json.loads(after))
    return bool(improved)


def merits(index: SearchIndex, store: MemoryStore) -> dict[str, Merit]:
    """Every offered lesson's merit, by lesson id (`loop#iteration.k`)."""
    restored = restores(store)
    scopes: dict[tuple[str, int], set[str]] = {}
    found: dict[str, Merit] = {}
    for lesson, src_loop, src_it, user_loop, user_it, ts, passed, after, improved in offers(index):
        since = restored.get(f"{src_loop}#{src_it}")
        if since is not None and (ts or 0.0) <= since:
            continue  # offered before a person brought it back
        if (src_loop, src_it) not in scopes:
            scopes[(src_loop, src_it)] = set(scope_of(index, src_loop, src_it))
        merit = found.setdefault(lesson, Merit())
        merit.offered += 1
        merit.used_by.append(f"{user_loop}#{user_it}")
        if helped(scopes[(src_loop, src_it)], bool(passed), after, improved):
            merit.helped += 1
    return found


def restores(store: MemoryStore) -> dict[str, float]:
    """When a person last brought each record's lessons back, as epoch seconds."""
    try:
        data = read_json(store.base / RESTORES_NAME)
    except (OSError, ValueError, StoreError):
        return {}
    restored = data.get("restored") if isinstance(data, dict) else None
    out: dict[str, float] = {}
    for source, when in (restored or {}).items():
        with contextlib.suppress(TypeError, ValueError):
            out[str(source)] = datetime.fromisoformat(str(when)).timestamp()
    return out


def restore(store: MemoryStore, loop_id: str, iteration: int) -> None:
    """Bring a record's retired lessons back: offers before now no longer count."""
    path = store.base / RESTORES_NAME
    data: dict[str, Any] = {"restored": {}}
    with contextlib.suppress(OSError, ValueError, StoreError):
        read = read_json(path)
        if isinstance(read, dict) and isinstance(read.get("restored"), dict):
            data = read
    data["restored"][f"{loop_id}#{iteration}"] = datetime.now(UTC).isoformat()
    atomic_write_json(path, data)


# --- what the index knows ---------------------------------------------------------------------


def offers(index: SearchIndex) -> list[tuple[Any, ...]]:
    """Every lesson given to an attempt: (lesson id, its loop, its iteration, the user's loop,
    iteration, time, passed, the failures it still had (JSON), improved), oldest first."""
    index.sync()
    return index.db.execute(
        "SELECT u.lesson, u.source_loop, u.source_iteration, d.loop_id, d.iteration, d.ts,"
        " d.passed, d.scope, u.improved FROM uses u JOIN docs d ON d.id = u.doc ORDER BY d.ts"
    ).fetchall()


def lesson_records(index: SearchIndex) -> list[tuple[Any, ...]]:
    """Records whose lessons may be offered: (loop, iteration, time, lessons (JSON), scope
    (JSON), obsolete, category), oldest first."""
    index.sync()
    return index.db.execute(
        "SELECT loop_id, iteration, ts, lessons, scope, obsolete, category FROM docs"
        " WHERE valid = 1 AND passed = 0 AND lessons IS NOT NULL ORDER BY ts, loop_id"
    ).fetchall()


def scope_of(index: SearchIndex, loop_id: str, iteration: int) -> dict[str, str]:
    """What a record's lessons are for (`lessons.record_scope`): key -> label."""
    index.sync()
    row = index.db.execute(
        "SELECT scope FROM docs WHERE loop_id = ? AND iteration = ?", (loop_id, iteration)
    ).fetchone()
    return json.loads(row[0]) if row and row[0] else {}
