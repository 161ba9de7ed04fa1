"""`ralph trace LOOP [ITERATION]`: an attempt's trajectory as a timeline, or as JSON."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ralph.actors.trace import READ_STEPS, TRACE_FILE, Step, Trajectory, read
from ralph.errors import StoreError
from ralph.ids import validate_loop_id
from ralph.reading import Unreadable

if TYPE_CHECKING:
    from rich.console import Console

    from ralph.memory.store import MemoryStore


def trace_path(store: MemoryStore, loop_id: str, iteration: int | None) -> tuple[int, Path]:
    """The iteration's trace.jsonl (default the last iteration that has one); errors name why."""
    validate_loop_id(loop_id)
    if not store.loop_dir(loop_id).is_dir():
        store.read_state(loop_id)  # names an unknown loop as such
        raise StoreError(f"unknown loop {loop_id!r}", hint="see `ralph reflections list`")
    if iteration is None:
        found = sorted(store.loop_dir(loop_id).glob(f"[0-9][0-9][0-9]/{TRACE_FILE}"))
        if not found:
            raise StoreError(f"loop {loop_id} has no traces yet")
        return int(found[-1].parent.name), found[-1]
    path = store.artifacts_dir(loop_id, iteration) / TRACE_FILE
    if not path.is_file():
        raise StoreError(
            f"loop {loop_id} has no trace for iteration {iteration}",
            hint="traces are written from this version on; see `ralph reflections list --loop`",
        )
    return iteration, path


def show_trace(
    store: MemoryStore, loop_id: str, iteration: int | None, console: Console, *, as_json: bool
) -> None:
    number, path = trace_path(store, loop_id, iteration)
    try:
        trajectory = read(path)
    except Unreadable as exc:
        raise StoreError(f"{path}: {exc}") from None
    if as_json:
        data = {
            "loop_id": loop_id,
            "iteration": number,
            **trajectory.meta(),
            "steps": [step.to_json(i) for i, step in enumerate(trajectory.steps, 1)],
        }
        from ralph.cli.common import print_json

        print_json(data)
        return
    render_trace(loop_id, number, trajectory, console)


def _elapsed(step: Step, start: datetime | None) -> str:
    when = _when(step.ts)
    if when is None or start is None:
        return ""
    return f"{(when - start).total_seconds():.1f}s"


def _when(ts: str | None) -> datetime | None:
    try:
        return datetime.fromisoformat(ts.replace("Z", "+00:00")) if ts else None
    except ValueError:
        return None


def render_trace(loop_id: str, iteration: int, trajectory: Trajectory, console: Console) -> None:
    """Step, elapsed, tool, detail; thoughts dimmed. Plain lines without a terminal."""
    times = [w for w in (_when(s.ts) for s in trajectory.steps) if w is not None]
    start = min(times) if times else None
    title = f"{loop_id} iteration {iteration}: {len(trajectory.steps)} steps ({trajectory.source})"
    if console.is_terminal:
        _table(title, trajectory, start, console)
    else:
        console.print(title, markup=False)
        for i, step in enumerate(trajectory.steps, 1):
            _plain_step(i, step, start, console)
    if trajectory.dropped:
        console.print(f"{trajectory.dropped} steps left out to bound the trace", markup=False)
    if trajectory.unparsed:
        console.print(f"{trajectory.unparsed} lines of output were not JSON", markup=False)
    if trajectory.error:
        console.print(f"parsing stopped: {trajectory.error}", markup=False)
    if trajectory.unread:
        console.print(
            f"{trajectory.unread} more lines not read: a trace shows at most {READ_STEPS} steps",
            markup=False,
        )


def _table(title: str, trajectory: Trajectory, start: datetime | None, console: Console) -> None:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=title, show_edge=False, title_justify="left")
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("elapsed", justify="right", no_wrap=True)
    table.add_column("tool", no_wrap=True)
    table.add_column("detail", overflow="fold")
    for i, step in enumerate(trajectory.steps, 1):
        number, elapsed = str(i), _elapsed(step, start)
        if step.thought:
            thought = escape(step.thought.replace("\n", " ")[:300])
            table.add_row(number, elapsed, "" if step.tool else "(answer)", f"[dim]{thought}[/]")
            number = elapsed = ""
        if step.tool:
            detail = escape(step.target or step.input or "")
            if step.ok is False:
                detail += "  [red]failed[/]"
            if step.observation:
                first = step.observation.strip().splitlines()[0][:160]
                detail += f"\n[dim]→ {escape(first)}[/]"
            table.add_row(number, elapsed, escape(step.tool), detail)
    console.print(table)


def _plain_step(i: int, step: Step, start: datetime | None, console: Console) -> None:
    elapsed = _elapsed(step, start)
    head = f"{i:>3} {elapsed:>8} "
    if step.thought:
        console.print(f"{head}thought: {step.thought.replace(chr(10), ' ')[:300]}", markup=False)
        head = " " * len(head)
    if step.tool:
        failed = "  FAILED" if step.ok is False else ""
        console.print(f"{head}{step.tool}: {step.target or step.input or ''}{failed}", markup=False)
        if step.observation:
            first = step.observation.strip().splitlines()[0][:160]
            console.print(f"{' ' * len(head)}→ {first}", markup=False)
