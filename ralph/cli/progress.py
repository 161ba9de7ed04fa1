"""Checks running, on a terminal: which run, which finished with what status, the time so far.

A real suite can take half a minute with nothing else on screen. The view is transient (the
report that follows replaces it) and drawn on stderr only when stderr is a terminal outside CI:
pipes, CI logs and `--json` stay exactly as they were.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from ralph.cli.live import is_ci

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.spinner import Spinner

    from ralph.evaluators.base import CheckOutcome

Done = Callable[["CheckOutcome"], None]
STYLES = {"pass": "green", "fail": "red", "error": "yellow", "skip": "dim"}


class CheckProgress:
    """The state the view draws: every check, running or finished; updated from worker threads."""

    def __init__(self, names: list[str]) -> None:
        self.names = list(names)
        self.started = time.monotonic()
        self.finished: dict[str, tuple[str, float]] = {}  # name -> (status, seconds)
        self._lock = threading.Lock()
        self._spinner: Spinner | None = None

    def done(self, outcome: CheckOutcome) -> None:
        with self._lock:
            seconds = (outcome.result.duration_ms or 0) / 1000
            self.finished[outcome.spec.name] = (outcome.result.status, seconds)

    def lines(self) -> list[tuple[str, str]]:
        """(text, style) per line: a header with the elapsed time, then one line per check."""
        elapsed = time.monotonic() - self.started
        with self._lock:
            finished = dict(self.finished)
        running = [n for n in self.names if n not in finished]
        header = f"checks: {len(finished)}/{len(self.names)} done  {elapsed:.0f}s"
        rows = [(header, "bold")]
        for name in self.names:
            if name in finished:
                status, seconds = finished[name]
                rows.append((f"  {name:<16} {status:<6} {seconds:5.1f}s", STYLES.get(status, "")))
            else:
                rows.append((f"  {name:<16} running {elapsed:4.0f}s", "dim"))
        if not running:
            rows[0] = (f"checks: all {len(self.names)} done  {elapsed:.0f}s", "bold")
        return rows

    def view(self) -> RenderableType:
        from rich.console import Group
        from rich.spinner import Spinner
        from rich.text import Text

        (header, style), *rows = self.lines()
        if self._spinner is None:  # one spinner, so that it turns
            self._spinner = Spinner("dots")
        self._spinner.update(text=Text(header, style=style))
        return Group(self._spinner, *(Text(*r) for r in rows))


@contextlib.contextmanager
def check_progress(names: list[str], *, enabled: bool = True) -> Iterator[Done]:
    """An `on_done(outcome)` callback for `CheckSuite.evaluate`, drawing the view meanwhile."""
    state = CheckProgress(names)
    if not enabled or not names or is_ci():  # is_ci: also when stderr is not a terminal
        yield state.done
        return
    from rich.console import Console
    from rich.live import Live

    console = Console(stderr=True)
    if not console.is_terminal:
        yield state.done
        return
    with Live(get_renderable=state.view, console=console, refresh_per_second=4, transient=True):
        yield state.done
