"""What `ralph reflections show` shows of one iteration: its record (actions, each check's
verdict and diagnostics, the reflection, insights, lessons), then what the memory knows about
it (obsolete, its trace, the loop's feedback, how often other loops used its lessons). Both draw
themselves; the JSON form of `show` is the record file as stored (`record_data`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ralph.errors import StoreError
from ralph.glyphs import first_line, plural, spans
from ralph.ids import validate_loop_id
from ralph.memory.feedback import describe, read_feedback
from ralph.memory.search import SearchIndex
from ralph.memory.store import MAX_RECORD_BYTES
from ralph.reading import Unreadable, read_json_bounded
from ralph.records import DIAGNOSTICS_PER_CHECK
from ralph.rendering import Wrapped, reward_text, whole

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult
    from rich.text import Text

    from ralph.memory.search import LessonUsage
    from ralph.memory.store import MemoryStore
    from ralph.records import CheckResult, CheckTally, Diagnostic, IterationRecord


@dataclass
class RecordView:
    """An iteration record, drawn for a person."""

    record: IterationRecord

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from rich.text import Text

        for line in self.markup():  # a paragraph wraps under its own indent
            yield Wrapped(Text.from_markup(line))

    def markup(self) -> Iterator[str]:
        """The record's lines in rich markup, its own text escaped."""
        from rich.markup import escape

        record = self.record
        ev = record.evaluator_output
        verdict = "[green]passed[/]" if ev.passed else "[red]failed[/]"
        yield (
            f"[bold]{escape(record.loop_id)}[/] iteration {record.iteration}  {verdict}  "
            f"reward {reward_text(ev.reward_signal)}  {escape(record.timestamp)}"
        )
        if record.task_description:
            yield f"[bold]task[/] {escape(record.task_description)}"
        yield "\n[bold]actions[/]"
        for action in record.actor_output.actions or []:
            where = f" {action.file_path}" if action.file_path else ""
            yield f"  - {escape(action.type)}{escape(where)}: {escape(action.description)}"
        if not record.actor_output.actions:
            yield "  (no changes)"
        yield from _checks_markup(record)
        sr = record.self_reflection
        yield "\n[bold]reflection[/]"
        for paragraph in sr.reflection_text.strip().splitlines() or [""]:
            yield f"  {escape(paragraph)}"
        credit = sr.credit_assignment
        if credit and (credit.root_cause or credit.failure_category):
            yield (
                f"  root cause: {escape(credit.root_cause or '-')}"
                f"  [dim]({escape(credit.failure_category or 'uncategorised')})[/]"
            )
        for title, items in (("insights", sr.actionable_insights), ("lessons", sr.lessons_learned)):
            if items:
                yield f"\n[bold]{title}[/]"
                for item in items:
                    yield f"  - {escape(item)}"
        if record.ralph:
            yield f"\n[dim]reflection source: {escape(record.ralph.reflection_source)}[/]"
            if record.ralph.quality_flags:
                yield f"[dim]quality flags: {escape(', '.join(record.ralph.quality_flags))}[/]"


SHOWN_PER_CHECK = 10  # diagnostics listed under a check; the rest are counted


def _checks_markup(record: IterationRecord) -> Iterator[str]:
    """Each check with its role and verdict as the run said them, its own diagnostics under
    it; a guard failing only as it did before the loop is no failure of this attempt."""
    from rich.markup import escape

    ev = record.evaluator_output
    results = ev.results or []
    if all(r.status == "pass" for r in results):
        return
    grouped = _grouped_errors(record)
    if grouped is None:  # a record from before check_verdicts: its diagnostics ungrouped
        yield "\n[bold]failing checks[/]"
        for result in results:
            if result.status != "pass":
                yield f"  {escape(result.tool)}: {escape(_legacy_word(record, result))}"
        if ev.errors:
            yield "  [dim]diagnostics of all checks:[/]"
            yield from _diagnostic_lines(ev.errors, record.error_count)
        return
    yield "\n[bold]checks[/]"
    for result, tally, errors in grouped:
        yield f"  {escape(result.tool)}: {escape(_verdict_word(record, result, tally))}"
        if errors and not (_role(record, result.tool) == "guard" and not tally.new):
            yield from _diagnostic_lines(errors, tally.errors)


def _diagnostic_lines(errors: list[Diagnostic], total: int) -> Iterator[str]:
    from rich.markup import escape

    for error in errors[:SHOWN_PER_CHECK]:
        where = error.location() or "-"
        yield f"    {escape(where)}  {escape(first_line(error.message, 120))}"
    if total > SHOWN_PER_CHECK:
        yield f"    ... {total - SHOWN_PER_CHECK} more"


def _role(record: IterationRecord, tool: str) -> str | None:
    roles = (record.ralph.check_roles if record.ralph else None) or {}
    return roles.get(tool)


def _verdict_word(record: IterationRecord, result: CheckResult, tally: CheckTally) -> str:
    """`target, fail: 29 failures, 29 new, 10 fixed`; `guard, as before (161 old findings)`;
    `guard worse (+2 new, 161 old findings)`: the run's words for a check (cli/live.py)."""
    role = _role(record, result.tool)
    if role != "guard":
        counts = [plural(tally.errors, "failure")] if tally.errors else []
        counts += [f"{tally.new} new"] if tally.new else []
        counts += [f"{tally.fixed} fixed"] if tally.fixed else []
        said = f"{role}, {result.status}" if role else result.status
        return f"{said}: {', '.join(counts)}" if counts else said
    before = tally.errors - tally.new
    old = plural(before, "old finding")
    if tally.new:
        return (
            f"guard worse (+{tally.new} new, {old})"
            if before
            else f"guard worse (+{tally.new} new)"
        )
    return f"guard, as before ({old})" if before else "guard ok"


def _legacy_word(record: IterationRecord, result: CheckResult) -> str:
    """A failing check of a record without per-check verdicts: its role, and `as before` for a
    guard when the attempt broke nothing."""
    role = _role(record, result.tool)
    if role == "guard" and record.ralph is not None and record.ralph.regressions == 0:
        return "guard, as before"
    return f"{role}, {result.status}" if role else result.status


def _grouped_errors(
    record: IterationRecord,
) -> list[tuple[CheckResult, CheckTally, list[Diagnostic]]] | None:
    """Each check's result, verdict and diagnostics: the record keeps them check by check, at
    most `DIAGNOSTICS_PER_CHECK` each. None when the record has no verdict for every check or
    its diagnostics do not add up (an older or edited record)."""
    ev = record.evaluator_output
    verdicts = (record.ralph.check_verdicts if record.ralph else None) or {}
    errors = ev.errors or []
    grouped, at = [], 0
    for result in ev.results or []:
        tally = verdicts.get(result.tool)
        if tally is None:
            return None
        kept = min(tally.errors, DIAGNOSTICS_PER_CHECK)
        grouped.append((result, tally, errors[at : at + kept]))
        at += kept
    return grouped if at == len(errors) else None


@dataclass
class ShownRecord:
    """`ralph reflections show`: the record, then what the memory knows about it."""

    record: IterationRecord
    trace: str | None  # how to see its trace, when it has one
    feedback: str | None  # the loop's feedback in words
    usage: LessonUsage | None  # None: the search index could not tell

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from rich.text import Text

        yield RecordView(self.record)
        if self.record.ralph and self.record.ralph.obsolete:
            yield Text("obsolete: its lessons are never injected into a prompt")
        if self.trace:
            yield Wrapped(self.trace, hang=2, shell=True)  # a command to copy
        if self.feedback is not None:
            yield whole(self.feedback)
        if self.usage is not None:
            yield _usage_line(self.usage, dim=console.is_terminal)


def _usage_line(usage: LessonUsage, *, dim: bool) -> Text:
    """How often other loops were given this reflection's lessons, and how often that helped."""
    from rich.text import Text

    times = plural(usage.retrieved, "time")
    line = f"used by other loops: {times}, helped {usage.helped}"
    if usage.used_by:
        line += f" ({', '.join(usage.used_by[:5])}{', ...' if len(usage.used_by) > 5 else ''})"
    return Text(line, style="dim" if dim else "")


def missing_iteration(store: MemoryStore, loop_id: str, iteration: int) -> StoreError:
    """The error for a missing iteration, naming the ones the loop has (`1-3`)."""
    have = spans([n for n, _ in store.record_paths(loop_id)])
    known = f"iterations {have}" if have else "no records yet"
    return StoreError(f"loop {loop_id} has no iteration {iteration}; it has {known}")


def already_green(store: MemoryStore, loop_id: str) -> StoreError | None:
    """The error for a loop that ended green before any attempt: it will never have a record,
    so "no records yet" would send the user waiting."""
    try:
        state = store.read_state(loop_id)
    except StoreError:
        return None
    if state.stop_reason != "already_green":
        return None
    return StoreError(
        f"loop {loop_id} ended green before any attempt (already_green): every check passed, "
        "so there is no record to show"
    )


def last_iteration(store: MemoryStore, loop_id: str, iteration: int | None) -> int:
    """`iteration` (an error naming the others when it has no record), or the loop's last
    record's when None."""
    validate_loop_id(loop_id)
    if iteration is not None:
        if not store.record_path(loop_id, iteration).exists():
            if store.record_paths(loop_id):
                raise missing_iteration(store, loop_id, iteration)
            if green := already_green(store, loop_id):
                raise green
        return iteration
    paths = store.record_paths(loop_id)
    if not paths:
        store.read_state(loop_id)  # names an unknown loop as such
        raise already_green(store, loop_id) or StoreError(f"loop {loop_id!r} has no records yet")
    return paths[-1][0]


def record_data(store: MemoryStore, loop_id: str, iteration: int | None) -> Any:
    """`show --json`: the record file as stored (read within its size limit)."""
    iteration = last_iteration(store, loop_id, iteration)
    path = store.record_path(loop_id, iteration)
    if not path.exists():
        raise missing_iteration(store, loop_id, iteration)
    try:
        return read_json_bounded(path, MAX_RECORD_BYTES, strict=False)
    except Unreadable as exc:
        raise StoreError(f"{path}: {exc}") from None


def show_record(store: MemoryStore, loop_id: str, iteration: int | None) -> ShownRecord:
    """An iteration (the last by default) with what the memory knows about it."""
    iteration = last_iteration(store, loop_id, iteration)
    record = store.read_record(loop_id, iteration)
    trace = None
    if (store.artifacts_dir(loop_id, iteration) / "trace.jsonl").is_file():
        traced = record.ralph.trace if record.ralph else None
        steps = f" ({plural(traced.steps, 'step')})" if traced else ""
        trace = f"trace{steps}: ralph trace {loop_id} {iteration}"
    verdict = read_feedback(store, loop_id)
    feedback = describe(verdict) if verdict is not None else None
    return ShownRecord(record, trace, feedback, _usage(store, loop_id, iteration))


def _usage(store: MemoryStore, loop_id: str, iteration: int) -> LessonUsage | None:
    try:
        with SearchIndex(store) as index:
            return index.usage(loop_id, iteration)
    except (StoreError, sqlite3.Error, OSError):
        return None  # the index is a convenience: `show` works without it
