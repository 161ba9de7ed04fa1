"""What `ralph reflections list` shows: the loops of the memory, or one loop's iterations, as
results that draw themselves (a table, or tab-separated lines without a terminal) and whose
JSON form is the list of their rows.

Listings read state files only (one loop's iterations read its records)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ralph.errors import StoreError
from ralph.glyphs import first_line, plural
from ralph.ids import validate_loop_id
from ralph.rendering import Rows, Wrapped, lines, reward_text

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult

    from ralph.memory.search import Hit
    from ralph.memory.store import MemoryStore


@dataclass
class LoopRow:
    """One loop: from its state, or described by its records when it has no state file."""

    loop_id: str
    task: str | None
    status: str
    iterations: int
    best_reward: float | None
    updated_at: str | None
    problem: str | None

    def cells(self) -> list[str]:
        return [
            self.loop_id,
            first_line(str(self.task or f"({self.problem})"), 60),
            self.status,
            str(self.iterations),
            reward_text(self.best_reward),
            str(self.updated_at or "-").replace("T", " ").removesuffix("Z"),
        ]


class LoopList(list[LoopRow]):
    """Every loop of the memory."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if not self:
            yield from lines('no loops yet: start one with `ralph run "TASK"`')
            return
        columns = ["loop", "task", "status", "iter", "best", "updated"]
        yield Rows("loops", columns, [row.cells() for row in self])


def list_loops(store: MemoryStore) -> LoopList:
    listings = store.list_loops()
    running = store.running_loops()
    rows = LoopList()
    for item in listings:
        state = item.state
        if state is None and item.record_count and not store.state_path(item.loop_id).exists():
            from ralph.memory.transfer import (
                records_summary,  # imported: described from its records
            )

            rows.append(LoopRow(item.loop_id, **records_summary(store, item.loop_id), problem=None))
            continue
        rows.append(
            LoopRow(
                loop_id=item.loop_id,
                task=state.task if state else None,
                status=store.effective_status(state, running) if state else "invalid",
                iterations=state.iteration if state else item.record_count,
                best_reward=state.best_reward if state else None,
                updated_at=state.updated_at if state else None,
                problem=item.problem,
            )
        )
    return rows


@dataclass
class IterationRow:
    """One valid record of a loop."""

    iteration: int
    valid: bool
    passed: bool
    reward: float | None
    failure_category: str | None
    root_cause: str | None
    reflection: str

    def cells(self, width: int | None = None) -> list[str]:
        """What differs between iterations first: the root cause, else the reflection's first
        line; cut at `width` on a terminal only (a pipe keeps it whole)."""
        return [
            str(self.iteration),
            "yes" if self.passed else "no",
            reward_text(self.reward),
            str(self.failure_category or "-"),
            first_line(str(self.root_cause or self.reflection), width),
        ]


@dataclass
class InvalidIteration:
    """A record file that could not be read as a record, with its first problem."""

    iteration: int
    valid: bool
    problem: str

    def cells(self, width: int | None = None) -> list[str]:
        return [str(self.iteration), "invalid", "-", "-", self.problem]


class IterationList(list[IterationRow | InvalidIteration]):
    """One loop's iterations."""

    def __init__(self, loop_id: str, rows: list[IterationRow | InvalidIteration]) -> None:
        super().__init__(rows)
        self.loop_id = loop_id

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        columns = ["iter", "passed", "reward", "category", "root cause / reflection"]
        width = 90 if console.is_terminal else None  # a pipe or CSV never cuts a text
        yield Rows(f"loop {self.loop_id}", columns, [row.cells(width) for row in self])


def list_iterations(store: MemoryStore, loop_id: str) -> IterationList:
    validate_loop_id(loop_id)
    files = store.read_records(loop_id)
    if not files and not store.state_path(loop_id).exists():
        raise StoreError(f"unknown loop {loop_id!r}", hint="`ralph reflections list` shows loops")
    rows: list[IterationRow | InvalidIteration] = []
    for f in files:
        record = f.record
        if record is None:
            rows.append(InvalidIteration(f.iteration, valid=False, problem=f.problems[0]))
            continue
        credit = record.self_reflection.credit_assignment
        rows.append(
            IterationRow(
                iteration=record.iteration,
                valid=True,
                passed=record.evaluator_output.passed,
                reward=record.evaluator_output.reward_signal,
                failure_category=credit.failure_category if credit else None,
                root_cause=credit.root_cause if credit and credit.root_cause else None,
                reflection=first_line(record.self_reflection.reflection_text),
            )
        )
    return IterationList(loop_id, rows)


MIN_RELEVANCE = 0.005  # of the best hit's score: below, a hit shows as 0% and is left out


class SearchResults(list["Hit"]):
    """`ralph reflections search`: the reflections that match, the best first (the JSON form
    is each hit's `to_json`, its score rounded)."""

    def __init__(self, query: str, hits: list[Hit]) -> None:
        super().__init__(hits)
        self.query = query

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if not self:
            yield from lines(f"no reflection matches {self.query!r}")
            return
        top = self[0].score  # BM25 scores mean little alone: show them against the best
        # a hit at 0% of the best matched only words most reflections have: left out
        shown = [hit for hit in self if top <= 0 or hit.score / top >= MIN_RELEVANCE]
        width = 80 if console.is_terminal else None  # a pipe never cuts a text
        cells = [
            [
                f"{hit.score / top:.0%}" if top > 0 else "-",
                f"{hit.loop_id}#{hit.iteration}",
                str(hit.category or ("passed" if hit.passed else "-")),
                reward_text(hit.confidence),
                f"{hit.retrieved}/{hit.helped}",
                # the root cause first: it says what differs, not "My attempt did not ..."
                ("[obsolete] " if hit.obsolete else "")
                + first_line(hit.root_cause or hit.summary, width),
            ]
            for hit in shown
        ]
        columns = ["relevance", "reflection", "category", "conf", "used/helped", "summary"]
        yield Rows(f"search: {self.query}", columns, cells)
        if not console.is_terminal:  # tab-separated lines only
            return
        if top <= 0:
            yield Wrapped(
                "relevance -: every word searched for is in most reflections, so none ranks "
                "above another; add a rarer word"
            )
        elif len(shown) < len(self):
            left = plural(len(self) - len(shown), "more hit")
            yield Wrapped(f"{left} left out: they match only words most reflections have")
