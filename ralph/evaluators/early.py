"""`ralph check` starts its checks before the CLI is loaded; the CLI then adopts them.

Before a check can start, the CLI imports typer (and pydantic), jsonschema, GitPython and rich:
about 0.3 s that every `ralph check` added to its slowest check. The console script
(`ralph.entry`) instead reads the config as plain data, finds the project by its `.git`
directory and starts the evaluation in a thread; only then does it load the CLI, which does
everything as before (schema validation, the git root, preflight) while the checks run, and
adopts the evaluation only if it would have started exactly the same checks in the same place.
On any difference or error the early run is stopped, its processes killed, and never used.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ralph import process
from ralph.config import Settings
from ralph.evaluators.base import Evaluation
from ralph.evaluators.shell import kill_running_checks, running_checks

SPAWN_WAIT = 0.25  # seconds the checks get to start their processes before the CLI's imports
GIT_VARIABLES = ("GIT_DIR", "GIT_WORK_TREE", "GIT_CEILING_DIRECTORIES", "GIT_COMMON_DIR")


@dataclass
class EarlyRun:
    root: Path
    settings: Settings
    thread: threading.Thread | None = None
    results: list[Evaluation] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)

    def evaluate(self, suite: Any) -> None:
        try:
            self.results.append(suite.evaluate(self.root))
        except BaseException as exc:  # handed to the CLI's thread by `adopt`
            self.errors.append(exc)


_pending: EarlyRun | None = None
_lock = threading.Lock()


def start(args: list[str], cwd: Path | None = None) -> bool:
    """Start the evaluation `ralph check ARGS` will need, when ARGS and the project are plain.

    False (nothing started) for anything the CLI should judge first: other options, `--help`,
    a linked worktree, GIT_DIR and friends, a config that does not even read.
    """
    global _pending
    flags = parse_args(args)
    root = find_root(cwd or Path.cwd())
    if flags is None or root is None:
        return False
    try:
        from ralph import config
        from ralph.evaluators.suite import CheckSuite

        settings = config.load(root, flags, validate=False)
        suite = CheckSuite.from_settings(settings)
    except Exception:  # the CLI reports it properly; nothing was started
        return False
    if not suite.checks:
        return False
    run = EarlyRun(root, settings)
    run.thread = threading.Thread(
        target=run.evaluate, args=(suite,), name="ralph-early-check", daemon=True
    )
    with _lock:
        _pending = run
    run.thread.start()
    # Let the checks' processes start before this thread takes the GIL for its imports.
    deadline = time.monotonic() + SPAWN_WAIT
    while running_checks() < len(suite.checks) and run.thread.is_alive():
        if time.monotonic() > deadline:
            break
        time.sleep(0.002)
    return True


def adopt(root: Path, settings: Settings) -> Evaluation | None:
    """The early evaluation when it runs what `settings` would run on `root`; else None.

    A mismatch stops the early run first, so the caller's own evaluation runs alone.
    """
    run = _take()
    if run is None:
        return None
    if run.root != root or _suite_inputs(run.settings) != _suite_inputs(settings):
        _stop(run)
        return None
    try:
        while run.thread is not None and run.thread.is_alive():
            run.thread.join(0.25)  # in slices, so Ctrl-C reaches this thread
    except BaseException:
        _stop(run)
        raise
    if run.errors:
        raise run.errors[0]
    return run.results[0]


def confirmed_root() -> Path | None:
    """The early run's project root when git agrees: it is where `ralph check` runs (git's top
    level, or the current folder outside git) and its own main worktree (where the config was
    read). One `git rev-parse`, while the CLI's way imports GitPython and asks three times, all
    of it on the cores the checks are using. None: ask the CLI's way.
    """
    with _lock:
        run = _pending
    if run is None:
        return None
    here = Path.cwd().resolve()
    argv = ["git", "rev-parse", "--path-format=absolute", "--show-toplevel", "--git-common-dir"]
    try:
        res = process.run(argv, cwd=here, wall_timeout=30, cap=10_000)
    except OSError:  # no git at all: the CLI then treats the folder as no repository
        return run.root if run.root == here else None
    lines = res.stdout.splitlines()
    if res.exit_code != 0 or len(lines) != 2:
        return run.root if run.root == here else None
    top, common = Path(lines[0]), Path(lines[1])
    return run.root if top == run.root and common == run.root / ".git" else None


def discard() -> None:
    """Stop an early run nobody adopted (the CLI failed, or was interrupted, before)."""
    run = _take()
    if run is not None:
        _stop(run)


def parse_args(args: list[str]) -> dict[str, Any] | None:
    """`--test CMD`, `--check CMD` (repeatable), `--json` as config flags; None for the rest."""
    flags: dict[str, Any] = {}
    checks: list[str] = []
    i = 0
    while i < len(args):
        name, has_value, value = args[i].partition("=")
        if args[i] == "--json":
            i += 1
            continue
        if name not in ("--test", "--check"):
            return None
        if not has_value:
            if i + 1 >= len(args):
                return None
            value = args[i + 1]
            i += 1
        i += 1
        if name == "--test":
            flags["test"] = value
        else:
            checks.append(value)
    if checks:
        flags["checks"] = checks
    return flags


def find_root(cwd: Path) -> Path | None:
    """The folder holding `.git/` at or above `cwd`, else `cwd`; None when git might disagree."""
    if any(name in os.environ for name in GIT_VARIABLES):
        return None
    here = cwd.resolve()
    for folder in (here, *here.parents):
        marker = folder / ".git"
        if marker.is_dir():
            return folder
        if marker.exists():  # a `.git` file: a linked worktree or a submodule
            return None
    return here


def _suite_inputs(settings: Settings) -> tuple[Any, ...]:
    return (settings.all_checks(), settings.weights, settings.check_timeout, settings.output_cap)


def _take() -> EarlyRun | None:
    global _pending
    with _lock:
        run, _pending = _pending, None
    return run


def _stop(run: EarlyRun) -> None:
    """Kill its checks, again until its thread ends: one may start its process meanwhile."""
    while run.thread is not None and run.thread.is_alive():
        kill_running_checks()
        run.thread.join(0.05)
