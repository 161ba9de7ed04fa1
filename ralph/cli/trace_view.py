"""`ralph trace LOOP [ITERATION]`: an attempt's trajectory as a timeline, or as JSON.

An attempt that no agent stream gave steps of (a `cmd:` agent, aider, an LLM actor whose edits
ralph applies) shows what ralph kept of it instead: the files it changed with their lines
(from the iteration's record, written at the time), the actor's last output lines (kept in the
trace, else read from actor.log) and one line saying why there are no steps."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ralph.actors.command import LOG_FILE
from ralph.actors.tail import log_tail
from ralph.actors.trace import READ_STEPS, TRACE_FILE, Step, Trajectory, read
from ralph.cli.common import show
from ralph.errors import RalphError, StoreError
from ralph.glyphs import plural, spans
from ralph.ids import validate_loop_id
from ralph.reading import Unreadable
from ralph.rendering import lines, whole

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult

    from ralph.memory.store import MemoryStore
    from ralph.workspace.branches import ChangedFile

SHOWN_FILES = 50  # files listed on the screen; `--json` has them all
SHOWING = "showing the files changed and the last output"


def iterations(store: MemoryStore, loop_id: str) -> list[int]:
    """The loop's iterations that left anything to show: a trace, a record or an actor.log."""
    numbered = {
        int(path.parent.name)
        for name in (TRACE_FILE, LOG_FILE)
        for path in store.loop_dir(loop_id).glob(f"[0-9][0-9][0-9]*/{name}")
        if path.parent.name.isdigit()
    }
    return sorted(numbered | {n for n, _ in store.record_paths(loop_id)})


def trace_path(store: MemoryStore, loop_id: str, iteration: int | None) -> tuple[int, Path]:
    """The iteration's trace.jsonl, which may not exist (default: the last iteration); errors
    name the iterations there are."""
    validate_loop_id(loop_id)
    if not store.loop_dir(loop_id).is_dir() and not store.reflections_dir(loop_id).is_dir():
        store.read_state(loop_id)  # names an unknown loop as such
        raise StoreError(f"unknown loop {loop_id!r}", hint="see `ralph reflections list`")
    have = iterations(store, loop_id)
    if iteration is None:
        if not have:
            raise StoreError(f"loop {loop_id} has no iterations yet")
        iteration = have[-1]
    elif iteration not in have:
        known = f"; it has iterations {spans(have)}" if have else "; it has none yet"
        raise StoreError(
            f"loop {loop_id} has no iteration {iteration}{known}",
            hint=f"`ralph reflections list --loop {loop_id}` lists them",
        )
    return iteration, store.artifacts_dir(loop_id, iteration) / TRACE_FILE


def show_trace(store: MemoryStore, loop_id: str, iteration: int | None, *, as_json: bool) -> None:
    show(trace_view(store, loop_id, iteration), as_json=as_json)


def trace_view(store: MemoryStore, loop_id: str, iteration: int | None) -> TraceView:
    """What `ralph trace` shows of an iteration: its steps, and for an attempt without steps
    from a stream the files it changed and the actor's last output."""
    number, path = trace_path(store, loop_id, iteration)
    trajectory = None
    if path.exists() or path.is_symlink():
        try:
            trajectory = read(path)
        except Unreadable as exc:
            raise StoreError(f"{path}: {exc}") from None
    view = TraceView(loop_id, number, trajectory or Trajectory(_actor(store, loop_id)))
    view.why_no_steps = why_no_steps(trajectory)
    if view.why_no_steps is not None:
        view.changed_files = files_changed(store, loop_id, number)
        output = trajectory.output if trajectory else []
        view.last_output = output or log_tail(path.with_name(LOG_FILE))
    return view


def _actor(store: MemoryStore, loop_id: str) -> str:
    """The loop's actor as configured, for an iteration that kept no trace."""
    try:
        return store.read_state(loop_id).settings.actor
    except RalphError:
        return "unknown"


def why_no_steps(trajectory: Trajectory | None) -> str | None:
    """Why an attempt shows its files and last output: an actor without a step stream, a
    stream that held none, no trace at all; None for an agent whose stream gave steps."""
    from ralph.actors.registry import DEFAULT_MODELS
    from ralph.actors.tracing import STREAMS

    if trajectory is None:
        return f"no trace was kept of this attempt; {SHOWING}"
    source = trajectory.source
    if source in STREAMS or source == "unknown":  # "unknown": a trace without its meta line
        held = f"{source}'s stream" if source in STREAMS else "the trace"
        return None if trajectory.steps else f"{held} held no steps; {SHOWING}"
    kind, sep, _ = source.partition(":")
    if kind in ("cmd", "script") and sep:
        return f"{kind}: actors print no step stream; {SHOWING}"
    if kind in DEFAULT_MODELS and sep:
        return f"LLM actors answer in one message whose edits ralph applies; {SHOWING}"
    return f"{source} prints no step stream; {SHOWING}"


def files_changed(store: MemoryStore, loop_id: str, iteration: int) -> list[ChangedFile] | None:
    """The files the attempt changed with their lines, as its record says (the tree that was
    judged and committed, kept at the time: a rollback since changes nothing here); None
    without a readable record."""
    from ralph.memory.store import load_record_file
    from ralph.workspace.branches import ChangedFile

    path = store.record_path(loop_id, iteration)
    record = load_record_file(path, iteration).record if path.exists() else None
    if record is None:
        return None
    return [
        ChangedFile(action.file_path, action.changes.additions, action.changes.deletions)
        for action in record.actor_output.actions
        if action.file_path and action.changes is not None
    ]


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
    lines without a terminal; for an attempt without a step stream (`why_no_steps`) also the
    files it changed and the actor's last output. Its JSON form (`json_fields`) names an
    error or unread lines only when there are some, and those three only when they apply."""

    loop_id: str
    iteration: int
    trajectory: Trajectory
    why_no_steps: str | None = None
    changed_files: list[ChangedFile] | None = None  # None: no record tells
    last_output: list[str] = field(default_factory=list)

    @property
    def json_fields(self) -> tuple[str, ...]:
        names: tuple[str, ...] = ("loop_id", "iteration", "source", "steps", "dropped", "unparsed")
        names += tuple(n for n in ("error", "unread") if getattr(self.trajectory, n))
        if self.why_no_steps is not None:
            names += ("why_no_steps", "changed_files", "last_output")
        return names

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
        count = plural(len(trajectory.steps), "step")
        say = lines if console.is_terminal else _whole_lines  # a pipe: nothing wrapped
        if self.why_no_steps is not None and not trajectory.steps:
            title = f"{self.loop_id} iteration {self.iteration} ({trajectory.source})"
        else:
            title = f"{self.loop_id} iteration {self.iteration}: {count} ({trajectory.source})"
        if console.is_terminal:
            yield _title(title)  # its own line: a table wraps its title at the table's width
            if trajectory.steps:
                yield _table(trajectory, start)
        else:
            yield from say(title)
            for i, step in enumerate(trajectory.steps, 1):
                yield from say(*_plain_step(i, step, start))
        if trajectory.dropped:
            yield from say(f"{plural(trajectory.dropped, 'step')} left out to bound the trace")
        if trajectory.unparsed:
            yield from say(f"{plural(trajectory.unparsed, 'line')} of output not JSON")
        if trajectory.error:
            yield from say(f"parsing stopped: {trajectory.error}")
        if trajectory.unread:
            yield from say(
                f"{plural(trajectory.unread, 'more line')} not read: "
                f"a trace shows at most {READ_STEPS} steps"
            )
        if self.why_no_steps is not None:
            yield from say(self.why_no_steps, *_files_lines(self.changed_files))
            yield from say(*_output_lines(self.last_output))


def _whole_lines(*texts: str) -> Iterator[Any]:
    """Lines a pipe gets whole: rich would wrap them at 80 columns, a path in the middle."""
    for text in texts:
        yield whole(text)


def _title(text: str) -> Any:
    from rich.text import Text

    return Text(text, style="bold")


def _files_lines(files: list[ChangedFile] | None) -> list[str]:
    """`files changed:` then `  +12 -3  path` a file, like `git diff --numstat`."""
    if files is None:
        return ["files changed: unknown (no record of this iteration)"]
    if not files:
        return ["files changed: none"]
    counts = [
        ("(binary)", "")
        if f.added is None or f.removed is None
        else (f"+{f.added}", f"-{f.removed}")
        for f in files[:SHOWN_FILES]
    ]
    wide = max(len(a) for a, _ in counts), max(len(r) for _, r in counts)
    out = [f"files changed ({len(files)}):"]
    out += [
        f"  {a:>{wide[0]}} {r:>{wide[1]}}  {f.path}"
        for (a, r), f in zip(counts, files, strict=False)
    ]
    if len(files) > SHOWN_FILES:
        out.append(f"  … {plural(len(files) - SHOWN_FILES, 'more file')}")
    return out


def _output_lines(output: list[str]) -> list[str]:
    if not output:
        return ["the actor's last output: none kept"]
    head = f"the actor's last output ({plural(len(output), 'line')}):"
    return [head, *(f"  {line}" for line in output)]


def _table(trajectory: Trajectory, start: datetime | None) -> Any:
    from rich.markup import escape
    from rich.table import Table

    table = Table(show_edge=False)
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
