"""`ralph check` starts its checks before the CLI that asks for them is loaded.

`ralph check`'s floor is its slowest check alone, and loading the CLI (typer, rich) and
validating the config against its JSON schema came before a check could start. So the console
script (cli/entry.py), seeing `ralph check` with no option that could change which checks run
(only `--json` may follow), starts the checks at once from the settings every other source
gives, in a background thread: measured with bench/evaluator.py (its probe): launch -> first
check running 211 -> 102 ms, of a `ralph check` of about 1.6 s (busy 2-core machine).
The command, once parsed and validated, `claim`s that evaluation only if its own checks are the
same ones, on the same tree; otherwise the early checks are stopped and nothing of them is
reported. Whatever goes wrong early is left for the command to find and report.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ralph.evaluators.base import CheckOutcome, Evaluation
    from ralph.evaluators.suite import CheckSuite

OPTIONS_THAT_KEEP_THE_CHECKS = frozenset({"--json"})


def wanted(args: Sequence[str]) -> bool:
    """`ralph check` whose checks the command line cannot change (`args`: after `ralph`)."""
    return args[:1] == ["check"] and all(a in OPTIONS_THAT_KEEP_THE_CHECKS for a in args[1:])


class EarlyEvaluation:
    """The checks of `suite` running on `cwd` in a thread, until a command claims them."""

    def __init__(self, suite: CheckSuite, cwd: Path) -> None:
        self.suite = suite
        self.cwd = cwd
        self._lock = threading.Lock()
        self._finished: list[CheckOutcome] = []
        self._listener: Callable[[CheckOutcome], None] | None = None
        self._outcomes: list[CheckOutcome] = []
        self._error: BaseException | None = None
        self._running = len(suite.checks)
        self._changed = threading.Condition(self._lock)
        self._done = threading.Event()  # waited on, not the thread: see CheckSuite.run_checks
        self._started = threading.Event()  # the tree's fingerprint taken, the checks started
        self._thread = threading.Thread(target=self._run, name="ralph-early-check", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._outcomes = self.suite.run_checks(
                self.cwd, on_done=self._one_done, on_started=self._started.set
            )
        except BaseException as error:  # handed to the thread that claims the result
            self._error = error
        finally:
            self._done.set()

    def _one_done(self, outcome: CheckOutcome) -> None:
        with self._lock:
            self._finished.append(outcome)
            self._running -= 1
            self._changed.notify_all()
            listener = self._listener
        if listener is not None:
            listener(outcome)

    def wait_for_a_free_core(self, cores: int, limit: float) -> None:
        """Until fewer checks run than there are cores, at most `limit` seconds: loading the
        CLI while every core runs a check slows the slowest check by as much, where a moment
        later (the quick checks done) it costs the checks nothing; measured with bench/ab.py on
        bench/evaluator.py's project: `ralph check` 1.80 -> 1.69 s (12 rounds, busy 2 cores).
        First of all until the checks have started: the tree's fingerprint, taken before them
        (workspace/fingerprint.py), is a few git processes that the CLI's import, holding the
        GIL, would slow by tens of milliseconds."""
        deadline = time.monotonic() + limit
        while not self._started.is_set() and not self._done.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self._started.wait(timeout=min(left, 0.25))  # short: Ctrl-C reaches this thread
        with self._changed:
            while self._running >= cores and not self._done.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._changed.wait(timeout=min(left, 0.25))  # short: Ctrl-C reaches this thread

    def same_checks(self, suite: CheckSuite, cwd: Path) -> bool:
        return cwd == self.cwd and _signature(suite) == _signature(self.suite)

    def result(
        self, suite: CheckSuite, on_done: Callable[[CheckOutcome], None] | None = None
    ) -> Evaluation:
        """Wait for the checks (Ctrl-C stops them), then judge them as `suite` would; `on_done`
        hears of the checks already finished at once, of the others as they finish."""
        from ralph.evaluators.command import kill_running_checks

        if on_done is not None:
            with self._lock:
                self._listener = on_done
                finished = list(self._finished)
            for outcome in finished:
                on_done(outcome)
        try:
            while not self._done.wait(timeout=0.25):  # short waits: Ctrl-C reaches this thread
                pass
        except BaseException:
            kill_running_checks()
            self._done.wait()  # the killed checks' threads are done with them
            raise
        if self._error is not None:
            raise self._error
        return suite.judge(self._outcomes, None)

    def stop(self) -> None:
        """Stop the checks, unreported; a check that starts while stopping is stopped too."""
        from ralph.evaluators.command import kill_running_checks

        while not self._done.is_set():
            kill_running_checks()
            self._done.wait(timeout=0.1)


def _signature(suite: CheckSuite) -> list[tuple[Any, ...]]:
    return [
        (type(c), c.spec, getattr(c, "timeout", None), getattr(c, "cap", None))
        for c in suite.checks
    ]


_pending: EarlyEvaluation | None = None


def start(cwd: Path | None = None) -> None:
    """Start the checks the settings name (no LLM judge: that spends money), if ralph can."""
    global _pending
    try:
        from ralph import config
        from ralph.evaluators.suite import CheckSuite
        from ralph.workspace.locate import find_repo_root, memory_root

        here = (cwd or Path.cwd()).resolve()
        root = find_repo_root(here) or here
        settings = config.load(memory_root(root), {}, schema=False)
        suite = CheckSuite.from_settings(settings)
        if any(c.spec.parser == "judge" for c in suite.checks):
            return
        suite.preflight()
    except Exception:  # the command meets the same problem and reports it properly
        return
    _pending = EarlyEvaluation(suite, root)


CLI_WAIT_LIMIT = 1.0  # seconds the CLI waits for a free core before it loads anyway


def make_room() -> None:
    """Let the early checks have the cores for a moment (`wait_for_a_free_core`)."""
    if _pending is not None:
        _pending.wait_for_a_free_core(_usable_cores(), CLI_WAIT_LIMIT)


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def claim(suite: CheckSuite, cwd: Path) -> EarlyEvaluation | None:
    """The early evaluation if it runs exactly `suite`'s checks on `cwd`; else it is stopped."""
    global _pending
    pending, _pending = _pending, None
    if pending is None:
        return None
    if pending.same_checks(suite, cwd):
        return pending
    pending.stop()
    return None


def cancel() -> None:
    """Stop an early evaluation nobody claimed (the command failed before it got there)."""
    global _pending
    pending, _pending = _pending, None
    if pending is not None:
        pending.stop()
