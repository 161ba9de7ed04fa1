"""How `ralph batch` shows its loops: one live table on a terminal, plain lines in CI and pipes.

Both write to stderr, so `ralph batch --json` prints exactly one JSON object on stdout.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ralph.cli.common import console
from ralph.cli.live import PlainReporter, is_ci
from ralph.glyphs import changed_text, clip, plural, sparkline
from ralph.loop.batch import BatchView
from ralph.redact import redact
from ralph.rendering import Wrapped, reward_text

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult

    from ralph.loop.batch import Entry


class PlainView:
    """One timestamped line per event: a loop started, moved on an iteration, or finished."""

    def __init__(self) -> None:
        self.out = PlainReporter(sys.stderr)

    def begin(self, entries: list[Entry], jobs: int) -> None:
        self.out.line(_headline(entries, jobs))
        for entry in entries:
            if entry.phase == "done":
                self.out.line(f"[{entry.task.name}] {entry.loop_id} {entry.status} earlier")

    def event(self, entry: Entry | None, text: str) -> None:
        self.out.line(text if entry is None else f"[{entry.task.name}] {text}")

    def update(self, entries: list[Entry]) -> None:
        """Plain lines are written as events happen."""

    def end(self, entries: list[Entry]) -> None:
        """The summary a person reads after the batch: per loop its status, branch, changed files
        and the command that takes its work; then how many loops are green."""
        for entry in entries:
            for text in summary_lines(entry):
                self.out.line(f"[{entry.task.name}] {text}")
        self.out.line(green_line(entries))


def green_line(entries: list[Entry]) -> str:
    green = sum(1 for e in entries if e.status == "completed")
    return f"batch: {green}/{plural(len(entries), 'loop')} green"


def _headline(entries: list[Entry], jobs: int) -> str:
    todo = sum(1 for e in entries if e.phase == "queued")
    return f"batch: {plural(len(entries), 'task')}, {todo} to run, at most {jobs} at once"


def summary_lines(entry: Entry) -> list[str]:
    """One loop's lines in the batch summary: `ralph apply LOOP` only when it has work to
    apply, with `--force` for a loop that did not succeed (its best still fails its checks)."""
    head = f"{entry.loop_id} {entry.status}"
    if entry.stop_reason and entry.stop_reason not in ("success", entry.status):
        head += f" ({entry.stop_reason})"
    if entry.error:
        head += f": {clip(entry.error, 200)}"
    lines = [head]
    if entry.held_back:
        lines.append(f"  why     {entry.held_back}")
    if entry.branch:
        lines.append(f"  branch  {entry.branch}")
    if entry.changes_read:
        lines.append(f"  changed {changed_text(entry.changed_files)}")
    if entry.branch and entry.changes_read and entry.changed_files:
        force = "" if entry.status == "completed" else " --force"
        lines.append(f"  apply   ralph apply {entry.loop_id}{force}")
    return lines


class LiveView(PlainView):
    """A rich table of every loop, redrawn in place; events appear above it."""

    def __init__(self) -> None:
        super().__init__()
        from rich.live import Live

        self.console = console(stderr=True)  # the one clean console: a loop's error quotes it
        self.live = Live(console=self.console, refresh_per_second=4, transient=False)
        self.entries: list[Entry] = []

    def begin(self, entries: list[Entry], jobs: int) -> None:
        self.entries = entries
        self.live.start()
        self.live.update(self._table())
        self.console.print(_headline(entries, jobs))

    def event(self, entry: Entry | None, text: str) -> None:
        if entry is None or entry.error or entry.phase == "done":
            prefix = "" if entry is None else f"[{entry.task.name}] "
            self.console.print(prefix + text, markup=False, soft_wrap=True)

    def update(self, entries: list[Entry]) -> None:
        self.live.update(self._table())

    def end(self, entries: list[Entry]) -> None:
        self.live.update(self._table())
        self.live.stop()
        self.console.print(BatchSummary(entries), crop=False)

    def _table(self) -> BatchTable:
        return BatchTable(self.entries)


VALUE = len("  apply   ")  # where a summary line's value starts, after its label
# continuation lines go under the value, but no further: a loop id (55 characters at most)
# after a long task name would find no line with room for it, and pass the terminal's width
DEEPEST_HANG = 20


@dataclass
class BatchSummary:
    """The summary on a terminal, as the live view's events, without timestamps: lines wrap
    between words under their value, and `ralph apply` as a command that pastes whole (each
    cut line ends with ` \\`), as `ralph run`'s final lines do."""

    entries: list[Entry]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for entry in self.entries:
            prefix = f"[{entry.task.name}] "
            for text in summary_lines(entry):
                sub = text.startswith("  ")
                hang = min(len(prefix) + VALUE, DEEPEST_HANG) if sub else 2
                shell = text.startswith("  apply ")
                yield Wrapped(redact(prefix + text), hang=hang, shell=shell)
        yield Wrapped(green_line(self.entries))


@dataclass
class BatchTable:
    """Every loop of the batch as it was last seen: one row each, redrawn by the live view."""

    entries: list[Entry]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from rich import box
        from rich.table import Table
        from rich.text import Text

        table = Table(box=box.SIMPLE_HEAD, title="ralph batch", title_justify="left")
        for column in ("task", "loop", "status", "iter", "best", "rewards", "changed"):
            table.add_column(column, overflow="fold" if column == "loop" else "ellipsis")
        for entry in self.entries:
            limit = entry.task.max_iterations
            table.add_row(
                clip(entry.task.name, 30),
                entry.loop_id,
                _styled(entry.status),
                f"{entry.iteration}/{limit}" if limit else str(entry.iteration),
                reward_text(entry.best_reward),
                sparkline(entry.rewards),
                Text(changed_text(entry.changed_files, limit=3) if entry.changes_read else ""),
            )
        yield table


STYLES = {"completed": "green", "failed": "red", "error": "red", "running": "cyan"}


def _styled(status: str) -> Any:
    from rich.text import Text

    return Text(status, style=STYLES.get(status, "yellow"))


def make_view() -> BatchView:
    """Plain lines in CI or a pipe, the live table on a terminal."""
    if is_ci():
        return PlainView()
    return LiveView()
