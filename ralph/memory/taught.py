"""What the memory teaches (`ralph reflections lessons`): each lesson, the failure it is for, how
often it was offered and helped (`merit`), retired or not, and where it came from; duplicates
(the same failure, the same advice) are one row with their counts added up."""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ralph.glyphs import first_line
from ralph.memory.lessons import ENVIRONMENT_CATEGORY, Lesson
from ralph.memory.merit import Merit, lesson_records, merits
from ralph.memory.retrieval import deduplicate
from ralph.memory.search import SearchIndex
from ralph.memory.transfer import imported_from
from ralph.rendering import Rows, lines

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult

    from ralph.memory.store import MemoryStore


@dataclass
class LessonRow:
    """One lesson of the memory (the newest wording of its duplicates)."""

    lesson: str
    failure: str  # what it is for: `tests: tests/t.py::test_x`, …
    offered: int
    helped: int
    retired: bool  # offered `retire_after` times without helping: not offered again
    obsolete: bool  # its record is marked obsolete by a person
    source: str  # loop#iteration, and the archive when it was imported

    def cells(self) -> list[str]:
        state = "obsolete" if self.obsolete else "retired" if self.retired else "offered"
        return [
            first_line(self.lesson, 70),
            first_line(self.failure, 50),
            f"{self.helped}/{self.offered}",
            state,
            self.source,
        ]


class LessonList(list[LessonRow]):
    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if not self:
            yield from lines("no lessons yet: a loop's failed attempts teach them")
            return
        columns = ["lesson", "for", "helped/offered", "state", "from"]
        yield Rows("lessons", columns, [row.cells() for row in self])


def lesson_figures(
    store: MemoryStore, loop_ids: Collection[str] | None, *, retire_after: int
) -> dict[str, Any]:
    """`ralph analyze`'s figures of the lessons the loops' records teach: added (each record's
    lessons), merged (duplicates of another), retired, and the share of offers that helped."""
    added, rows = _lessons(store, retire_after, loop_ids)
    offered = sum(r.offered for r in rows)
    helped = sum(r.helped for r in rows)
    return {
        "added": added,
        "merged": added - len(rows),
        "retired": sum(1 for r in rows if r.retired),
        "offered": offered,
        "helped": helped,
        "helped_share": helped / offered if offered else None,
    }


def lessons_taught(
    store: MemoryStore, *, retire_after: int, include_all: bool = False
) -> LessonList:
    """The memory's lessons, those that may still be offered unless `include_all`."""
    _, rows = _lessons(store, retire_after, None)
    found = LessonList(r for r in rows if include_all or not (r.retired or r.obsolete))
    found.sort(key=lambda r: (r.retired or r.obsolete, -r.helped, r.failure, r.source))
    return found


def _lessons(
    store: MemoryStore, retire_after: int, loop_ids: Collection[str] | None
) -> tuple[int, list[LessonRow]]:
    """(lessons before merging, the merged rows) of the loops (None: every loop)."""
    wanted = None if loop_ids is None else set(loop_ids)
    added = 0
    with SearchIndex(store) as index:
        rows = lesson_records(index)
        earned = merits(index, store)
    imported = imported_from(store)
    groups: dict[frozenset[str], list[Lesson]] = {}
    labels: dict[frozenset[str], str] = {}
    obsolete: set[str] = set()
    for loop_id, iteration, ts, texts, scope_json, is_obsolete, category in rows:
        if category == ENVIRONMENT_CATEGORY or (wanted is not None and loop_id not in wanted):
            continue
        scope = json.loads(scope_json) if scope_json else {}
        key = frozenset(scope)
        labels[key] = ", ".join(list(scope.values())[:3])
        source = f"{loop_id}#{iteration}"
        if is_obsolete:
            obsolete.add(source)
        for k, text in enumerate(json.loads(texts)):
            added += 1
            merit = earned.get(f"{source}.{k}", Merit())
            lesson = Lesson(f"{source}.{k}", text, source, 0.0, ts or 0.0)
            lesson.offered, lesson.helped = merit.offered, merit.helped
            groups.setdefault(key, []).append(lesson)
    found: list[LessonRow] = []
    for key, members in groups.items():
        for kept in deduplicate(members):
            source = kept.source
            where = f"{source}, imported from {imported[source]}" if source in imported else source
            row = LessonRow(
                kept.text,
                labels[key],
                kept.offered,
                kept.helped,
                Merit(kept.offered, kept.helped).retired(retire_after),
                source in obsolete,
                where,
            )
            found.append(row)
    return added, found
