"""`ralph trace LOOP [ITERATION]`: an attempt's trajectory as a timeline, or as JSON."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ralph.actors.trace import READ_STEPS, TRACE_FILE, Step, Trajectory, read
from ralph.cli.common import show
from ralph.errors import StoreError
from ralph.glyphs import plural, spans
from ralph.ids import validate_loop_id
from ralph.reading import Unreadable
from ralph.rendering import lines

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult

    from ralph.memory.store import MemoryStore


def trace_path(store: MemoryStore, loop_id: str, iteration: int | None) -> tuple[int, Path]:
    """The iteration's trace.jsonl (default the last iteration that has one); errors name why."""
    validate_loop_id(loop_id)
    if not store.loop_dir(loop_id).is_dir():
        store.read_state(loop_id)  # names an unknown loop as such
        raise StoreError(f"unknown loop {loop_id!r}", hint="see `ralph reflections list`")
    found = sorted(
        path
        for path in store.loop_dir(loop_id).glob(f"[0-9][0-9][0-9]*/{TRACE_FILE}")
        if path.parent.name.isdigit()
    )
    if iteration is None:
        if not found:
            raise StoreError(f"loop {loop_id} has no traces yet")
        return int(found[-1].parent.name), found[-1]
    path = store.artifacts_dir(loop_id, iteration) / TRACE_FILE
    if not path.is_file():
        have = [int(p.parent.name) for p in found]
        known = f"; it has traces for iterations {spans(have)}" if have else ""
        raise StoreError(
            f"loop {loop_id} has no trace for iteration {iteration}{known}",
            hint="traces are written from this version on; see `ralph reflections list --loop`",
        )
    return iteration, path


def show_trace(store: MemoryStore, loop_id: str, iteration: int | None, *, as_json: bool) -> None:
    number, path = trace_path(store, loop_id, iteration)
    try:
        trajectory = read(path)
    except Unreadable as exc:
        raise StoreError(f"{path}: {exc}") from None
    show(TraceView(loop_id, number, trajectory), as_json=as_json)


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


@dataclass
class TraceView:
    """An attempt's trajectory: step, elapsed, tool, detail (thoughts dimmed) in a table, plain
    lines without a terminal. Its JSON form (`json_fields`) names an error or unread lines
    only when there are some."""

    loop_id: str
    iteration: int
    trajectory: Trajectory

    @property
    def json_fields(self) -> tuple[str, ...]:
        names = ("loop_id", "iteration", "source", "steps", "dropped", "unparsed")
        return names + tuple(n for n in ("error", "unread") if getattr(self.trajectory, n))

    @property
    def source(self) -> str:
        return self.trajectory.source

    @property
    def steps(self) -> list[dict[str, Any]]:
        return [step.to_json(i) for i, step in enumerate(self.trajectory.steps, 1)]

    @property
    def dropped(self) -> int:
        return self.trajectory.dropped

    @property
    def unparsed(self) -> int:
        return self.trajectory.unparsed

    @property
    def error(self) -> str | None:
        return self.trajectory.error

    @property
    def unread(self) -> int:
        return self.trajectory.unread

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        trajectory = self.trajectory
        times = [w for w in (_when(s.ts) for s in trajectory.steps) if w is not None]
        start = min(times) if times else None
        title = (
            f"{self.loop_id} iteration {self.iteration}: {plural(len(trajectory.steps), 'step')} "
            f"({trajectory.source})"
        )
        if console.is_terminal:
            yield _table(title, trajectory, start)
        else:
            yield from lines(title)
            for i, step in enumerate(trajectory.steps, 1):
                yield from lines(*_plain_step(i, step, start))
        if trajectory.dropped:
            yield from lines(f"{plural(trajectory.dropped, 'step')} left out to bound the trace")
        if trajectory.unparsed:
            yield from lines(f"{plural(trajectory.unparsed, 'line')} of output not JSON")
        if trajectory.error:
            yield from lines(f"parsing stopped: {trajectory.error}")
        if trajectory.unread:
            yield from lines(
                f"{plural(trajectory.unread, 'more line')} not read: "
                f"a trace shows at most {READ_STEPS} steps"
            )


def _table(title: str, trajectory: Trajectory, start: datetime | None) -> Any:
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
    return table


def _plain_step(i: int, step: Step, start: datetime | None) -> list[str]:
    elapsed = _elapsed(step, start)
    head = f"{i:>3} {elapsed:>8} "
    out = []
    if step.thought:
        out.append(f"{head}thought: {step.thought.replace(chr(10), ' ')[:300]}")
        head = " " * len(head)
    if step.tool:
        failed = "  FAILED" if step.ok is False else ""
        out.append(f"{head}{step.tool}: {step.target or step.input or ''}{failed}")
        if step.observation:
            first = step.observation.strip().splitlines()[0][:160]
            out.append(f"{' ' * len(head)}→ {first}")
    return out
