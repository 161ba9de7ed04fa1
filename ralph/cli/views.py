"""How the episodic memory is shown to people (rich) and to scripts (JSON).

Listings read state files only; `show` reads one record; `validate` reads what it is given.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ralph import schemas
from ralph.errors import ConfigError, StoreError
from ralph.glyphs import first_line
from ralph.ids import validate_loop_id
from ralph.memory.store import RECORD_NAME, MemoryStore, record_problems

if TYPE_CHECKING:
    from rich.console import Console

    from ralph.records import IterationRecord


def _print_json(data: Any) -> None:
    from ralph.cli.common import print_json

    print_json(data)


def emit_table(console: Console, title: str, columns: list[str], rows: list[list[str]]) -> None:
    """A rich table on a terminal; tab-separated lines (header first) for pipes and CI."""
    if not console.is_terminal:
        for row in [columns, *rows]:
            console.file.write("\t".join(cell.replace("\t", " ") for cell in row) + "\n")
        return
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(escape(cell) for cell in row))
    console.print(table)


def _reward(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def list_loops(store: MemoryStore, console: Console, *, as_json: bool) -> None:
    listings = store.list_loops()
    running = store.running_loops()
    rows: list[dict[str, Any]] = []
    for item in listings:
        state = item.state
        if state is None and item.record_count and not store.state_path(item.loop_id).exists():
            from ralph.memory.transfer import (
                records_summary,  # imported: described from its records
            )

            rows.append({"loop_id": item.loop_id, **records_summary(store, item.loop_id)})
            rows[-1]["problem"] = None
            continue
        rows.append(
            {
                "loop_id": item.loop_id,
                "task": state.task if state else None,
                "status": store.effective_status(state, running) if state else "invalid",
                "iterations": state.iteration if state else item.record_count,
                "best_reward": state.best_reward if state else None,
                "updated_at": state.updated_at if state else None,
                "problem": item.problem,
            }
        )
    if as_json:
        _print_json(rows)
        return
    if not rows:
        console.print('no loops yet: start one with `ralph run "TASK"`')
        return
    cells = [
        [
            str(row["loop_id"]),
            first_line(str(row["task"] or f"({row['problem']})"), 60),
            str(row["status"]),
            str(row["iterations"]),
            _reward(row["best_reward"]),
            str(row["updated_at"] or "-").replace("T", " ").removesuffix("Z"),
        ]
        for row in rows
    ]
    emit_table(console, "loops", ["loop", "task", "status", "iter", "best", "updated"], cells)


def list_iterations(store: MemoryStore, loop_id: str, console: Console, *, as_json: bool) -> None:
    validate_loop_id(loop_id)
    files = store.read_records(loop_id)
    if not files and not store.state_path(loop_id).exists():
        raise StoreError(f"unknown loop {loop_id!r}", hint="`ralph reflections list` shows loops")
    rows: list[dict[str, Any]] = []
    for f in files:
        record = f.record
        if record is None:
            rows.append({"iteration": f.iteration, "valid": False, "problem": f.problems[0]})
            continue
        credit = record.self_reflection.credit_assignment
        rows.append(
            {
                "iteration": record.iteration,
                "valid": True,
                "passed": record.evaluator_output.passed,
                "reward": record.evaluator_output.reward_signal,
                "failure_category": credit.failure_category if credit else None,
                "root_cause": credit.root_cause if credit and credit.root_cause else None,
                "reflection": first_line(record.self_reflection.reflection_text, 200),
            }
        )
    if as_json:
        _print_json(rows)
        return
    cells = [
        [
            str(row["iteration"]),
            "yes" if row["passed"] else "no",
            _reward(row["reward"]),
            str(row["failure_category"] or "-"),
            first_line(str(row["root_cause"] or row["reflection"]), 90),
        ]
        if row["valid"]
        else [str(row["iteration"]), "invalid", "-", "-", str(row["problem"])]
        for row in rows
    ]
    # what differs between iterations first: the root cause, else the reflection's first line
    columns = ["iter", "passed", "reward", "category", "root cause / reflection"]
    emit_table(console, f"loop {loop_id}", columns, cells)


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
        have = f"; it has {', '.join(map(str, stored))}" if stored else ""
        raise StoreError(f"loop {loop_id} has no prompt for iteration {iteration}{have}")
    return path.read_text("utf-8", errors="replace")


def show_record(
    store: MemoryStore, loop_id: str, iteration: int | None, console: Console, *, as_json: bool
) -> None:
    validate_loop_id(loop_id)
    if iteration is None:
        paths = store.record_paths(loop_id)
        if not paths:
            store.read_state(loop_id)  # names an unknown loop as such
            raise StoreError(f"loop {loop_id!r} has no records yet")
        iteration = paths[-1][0]
    if as_json:
        path = store.record_path(loop_id, iteration)
        if not path.exists():
            raise StoreError(f"loop {loop_id} has no iteration {iteration}")
        from ralph.memory.store import MAX_RECORD_BYTES
        from ralph.reading import Unreadable, read_json_bounded

        try:
            _print_json(read_json_bounded(path, MAX_RECORD_BYTES, strict=False))
        except Unreadable as exc:
            raise StoreError(f"{path}: {exc}") from None
        return
    record = store.read_record(loop_id, iteration)
    render_record(record, console)
    if record.ralph and record.ralph.obsolete:
        console.print("obsolete: its lessons are never injected into a prompt", markup=False)
    if (store.artifacts_dir(loop_id, iteration) / "trace.jsonl").is_file():
        traced = record.ralph.trace if record.ralph else None
        steps = f" ({traced.steps} steps)" if traced else ""
        console.print(f"trace{steps}: ralph trace {loop_id} {iteration}", markup=False)
    from ralph.memory.feedback import describe, read_feedback

    verdict = read_feedback(store, loop_id)
    if verdict is not None:
        console.print(describe(verdict), markup=False, soft_wrap=True)
    _render_usage(store, loop_id, iteration, console)


def _render_usage(store: MemoryStore, loop_id: str, iteration: int, console: Console) -> None:
    """How often other loops were given this reflection's lessons, and how often that helped."""
    from ralph.memory.search import SearchIndex

    try:
        with SearchIndex(store) as index:
            usage = index.usage(loop_id, iteration)
    except (StoreError, sqlite3.Error, OSError):
        return  # the index is a convenience: `show` works without it
    times = f"{usage.retrieved} time{'' if usage.retrieved == 1 else 's'}"
    line = f"used by other loops: {times}, helped {usage.helped}"
    if usage.used_by:
        line += f" ({', '.join(usage.used_by[:5])}{', ...' if len(usage.used_by) > 5 else ''})"
    console.print(f"[dim]{line}[/]" if console.is_terminal else line, markup=console.is_terminal)


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
    from ralph.cli.live import progress_bar
    from ralph.memory.search import SearchIndex
    from ralph.records import FAILURE_CATEGORIES

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
        _print_json([hit.to_json() for hit in hits])
        return
    if not hits:
        console.print(f"no reflection matches {query!r}", markup=False)
        return
    top = hits[0].score or 1.0  # BM25 scores mean little alone: show them against the best
    cells = [
        [
            f"{hit.score / top:.0%}",
            f"{hit.loop_id}#{hit.iteration}",
            str(hit.category or ("passed" if hit.passed else "-")),
            _reward(hit.confidence),
            f"{hit.retrieved}/{hit.helped}",
            # the root cause first: it says what differs, not "My attempt did not ..."
            ("[obsolete] " if hit.obsolete else "") + first_line(hit.root_cause or hit.summary, 80),
        ]
        for hit in hits
    ]
    columns = ["relevance", "reflection", "category", "conf", "used/helped", "summary"]
    emit_table(console, f"search: {query}", columns, cells)


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

    changed = store.mark_obsolete(loop_id, iteration, obsolete=obsolete)
    what = "obsolete: its lessons are no longer injected" if obsolete else "no longer obsolete"
    prefix = "" if changed else "already "
    console.print(f"{loop_id}#{iteration} {prefix}{what}", markup=False)


def render_record(record: IterationRecord, console: Console) -> None:
    from rich.markup import escape

    ev = record.evaluator_output
    verdict = "[green]passed[/]" if ev.passed else "[red]failed[/]"
    console.print(
        f"[bold]{record.loop_id}[/] iteration {record.iteration}  {verdict}  "
        f"reward {_reward(ev.reward_signal)}  {record.timestamp}"
    )
    if record.task_description:
        console.print(f"[bold]task[/] {escape(record.task_description)}")
    console.print("\n[bold]actions[/]")
    for action in record.actor_output.actions or []:
        where = f" {action.file_path}" if action.file_path else ""
        console.print(f"  - {action.type}{escape(where)}: {escape(action.description)}")
    if not record.actor_output.actions:
        console.print("  (no changes)")
    failing = [r for r in ev.results or [] if r.status != "pass"]
    if failing:
        console.print("\n[bold]failing checks[/]")
        for result in failing:
            console.print(f"  {result.tool}: {result.status}")
    if ev.errors:
        for error in ev.errors[:10]:
            where = error.location() or "-"
            console.print(f"    {escape(where)}  {escape(first_line(error.message, 120))}")
        if record.error_count > 10:
            console.print(f"    ... {record.error_count - 10} more")
    sr = record.self_reflection
    console.print("\n[bold]reflection[/]")
    console.print(f"  {escape(sr.reflection_text)}")
    credit = sr.credit_assignment
    if credit and (credit.root_cause or credit.failure_category):
        console.print(
            f"  root cause: {escape(credit.root_cause or '-')}"
            f"  [dim]({credit.failure_category or 'uncategorised'})[/]"
        )
    for title, items in (("insights", sr.actionable_insights), ("lessons", sr.lessons_learned)):
        if items:
            console.print(f"\n[bold]{title}[/]")
            for item in items:
                console.print(f"  - {escape(item)}")
    if record.ralph:
        console.print(f"\n[dim]reflection source: {record.ralph.reflection_source}[/]")
        if record.ralph.quality_flags:
            console.print(f"[dim]quality flags: {', '.join(record.ralph.quality_flags)}[/]")


def validate_paths(paths: list[Path], console: Console) -> int:
    """Validate every JSON file under `paths`; print the invalid ones. Exit status 0 or 1."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files.extend(
                sorted(
                    p
                    for p in path.rglob("*.json")
                    if p.is_file() and (RECORD_NAME.match(p.name) or p.name == "state.json")
                )
            )
        elif path.is_file():
            files.append(path)
        else:
            raise StoreError(f"{path}: no such file or directory")
    invalid = 0
    for file in files:
        problems = validate_file(file)
        if problems:
            invalid += 1
            console.print(f"[red]invalid[/] {file}", markup=True)
            for problem in problems[:20]:
                console.print(f"  {problem}", markup=False)
    console.print(f"{len(files) - invalid} valid, {invalid} invalid ({len(files)} files)")
    return 1 if invalid else 0


def memory_paths(store: MemoryStore) -> list[Path]:
    """What `validate` reads by default: `reflections/` and `loops/`, whichever exist (records
    copied from CI or written by aiwg come without ralph's `loops/`)."""
    found = [p for p in (store.base / "reflections", store.base / "loops") if p.is_dir()]
    if not found:
        raise StoreError(
            f"nothing to validate: {store.base} has no reflections/ or loops/",
            hint="pass the files or folders to validate",
        )
    return found


def validate_file(path: Path) -> list[str]:
    """Problems of one file: a record (`NNN.json`) or a loop state (`state.json`)."""
    from ralph.memory.store import MAX_RECORD_BYTES, MAX_STATE_BYTES
    from ralph.reading import Unreadable, read_json_bounded

    state = path.name == "state.json"
    try:  # a record as the import takes it: strict JSON that can be written back as UTF-8
        data = read_json_bounded(
            path, MAX_STATE_BYTES if state else MAX_RECORD_BYTES, writable=not state
        )
    except Unreadable as exc:
        return [str(exc)]
    if state:
        return schemas.errors(schemas.LOOP_STATE, data)
    return record_problems(data)
