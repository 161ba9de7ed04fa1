"""`ralph batch TASKS.yaml`: many tasks on one repository, each a loop in its own git worktree.

ralph does not schedule work across machines (a CI matrix does that, see docs/ci.md); on one
machine it starts at most `--jobs` loops at once, each as `ralph run TASK --worktree` in a
process of its own, so every loop has its own branch, lock, Ctrl-C handling and resumability —
the `--worktree` machinery of `ralph run`, not a second one. All loops record into this
repository's memory, so the lessons of a loop that finished are there for the loops after it.

The tasks file and its checks are loop/tasks_file.py's; every task is checked before the first
loop is launched.

Which loop belongs to which task is kept in `.aiwg/ralph/loops/batches/<file>-<hash>.json`
(local, like loop state), so `--resume` continues the paused and crashed loops of that file and
starts the tasks that never started; finished loops are reported as they are.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from ralph import config
from ralph.errors import PreflightError, StoreError
from ralph.escapes import strip_escapes
from ralph.files import atomic_write_json, read_json
from ralph.glyphs import plural
from ralph.ids import new_loop_id
from ralph.loop.task_checks import held_back, loop_env
from ralph.loop.tasks_file import BatchTask, load_tasks, slug
from ralph.memory.store import MemoryStore, parse_state

if TYPE_CHECKING:
    from ralph.memory.state import LoopState
    from ralph.process import Child

POLL_SECONDS = 0.5


# --- the plan ----------------------------------------------------------------------------------


@dataclass
class Entry:
    """One task of the batch and its loop, as the batch last saw it."""

    task: BatchTask
    loop_id: str
    resume: bool = False  # continue the earlier loop instead of starting one
    phase: str = "queued"  # queued, running, done
    status: str = "queued"  # then the loop's own status
    exit_code: int | None = None
    error: str | None = None
    iteration: int = 0
    best_reward: float | None = None
    rewards: list[float] = field(default_factory=list)
    stop_reason: str | None = None
    branch: str | None = None
    worktree: str | None = None
    changed_files: list[dict[str, Any]] | None = None  # read once the loop has finished
    changes_read: bool = False
    # the task's `test` and `checks` for its `ralph run` (loop/task_checks.py), set by Batch
    checks_env: dict[str, str] = field(default_factory=dict)
    held_back: str | None = None  # a failed loop: why, in the task's terms (task_checks)

    def env(self) -> dict[str, str]:
        """Variables the loop's process gets on top of ralph's own environment."""
        return {}

    def argv(self) -> list[str]:
        ralph = [sys.executable, "-m", "ralph"]
        limit = self.task.max_iterations
        extra = ["--max-iterations", str(limit)] if limit else []
        if self.resume:
            return [*ralph, "resume", self.loop_id, "--json", "--quiet", *extra]
        argv = [*ralph, "run", "--worktree", "--loop-id", self.loop_id]
        argv += ["--json", "--quiet", *extra]
        argv += ["--actor", self.task.actor] if self.task.actor else []
        argv += ["--allow-test-edits"] if self.task.allow_test_edits else []
        # last, after `--`: a task like "--help me" is the task, not a flag
        return [*argv, *self.run_flags(), "--", self.task.task]

    def run_flags(self) -> list[str]:
        """More flags for a new loop's `ralph run` (a bench arm's)."""
        return []

    def refresh(self, store: MemoryStore) -> bool:
        """Read the loop's state; True when its iteration moved on."""
        try:
            state = parse_state(store.state_path(self.loop_id))
        except StoreError:
            return False
        moved = state.iteration != self.iteration
        self.iteration, self.best_reward = state.iteration, state.best_reward
        self.rewards, self.stop_reason = list(state.reward_history), state.stop_reason
        self.branch = state.git.branch if state.git else None
        self.worktree = state.git.worktree if state.git else None
        self.status = store.effective_status(state)
        if self.status in ("completed", "failed", "aborted") and not self.changes_read:
            from ralph.loop.result import changed_files, files_json

            self.changed_files, self.changes_read = files_json(changed_files(store, state)), True
            self.held_back = _held_back(store, state, self.task)
        return moved

    def to_json(self) -> dict[str, Any]:
        """Written by hand: its `task` is the task's text, the entry's the whole BatchTask."""
        return {
            "name": self.task.name,
            "task": self.task.task,
            "loop_id": self.loop_id,
            "status": self.status,
            "stop_reason": self.stop_reason,
            "branch": self.branch,
            "worktree": self.worktree,
            "iterations": self.iteration,
            "best_reward": self.best_reward,
            "reward_history": self.rewards,
            "changed_files": self.changed_files,
            "exit_code": self.exit_code,
            "error": self.error,
            "held_back": self.held_back,
        }


def _held_back(store: MemoryStore, state: LoopState, task: BatchTask) -> str | None:
    if state.status != "failed" or not state.best_iteration:
        return None
    try:
        return held_back(store.read_record(state.loop_id, state.best_iteration), task)
    except StoreError:
        return None


def batch_file(store: MemoryStore, tasks_path: Path) -> Path:
    resolved = tasks_path.resolve()
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:8]
    return store.base / "loops" / "batches" / f"{slug(resolved.stem)}-{digest}.json"


def earlier_loops(store: MemoryStore, tasks_path: Path) -> dict[str, str]:
    """The loop of each task name that this tasks file started before (`--resume`)."""
    record = batch_file(store, tasks_path)
    if not record.exists():
        raise StoreError(
            f"no earlier batch of {tasks_path} to resume",
            hint=f"start it: `ralph batch {tasks_path}`",
        )
    data = read_json(record)
    return dict(data.get("loops") or {}) if isinstance(data, dict) else {}


def plan(
    store: MemoryStore, tasks: list[BatchTask], tasks_path: Path, earlier: dict[str, str]
) -> list[Entry]:
    """An entry per task: a new loop, or the loop this file started before (`earlier`)."""
    record = batch_file(store, tasks_path)
    entries = []
    for task in tasks:
        entry = Entry(task, earlier.get(task.name) or new_loop_id(task.name))
        if task.name in earlier and store.state_path(entry.loop_id).exists():
            entry.refresh(store)
            if entry.status in ("paused", "crashed"):
                entry.resume, entry.status = True, "queued"
            else:
                entry.phase = "done"  # finished (or running elsewhere): reported as it is
        elif task.name in earlier:
            entry.loop_id = new_loop_id(task.name)  # never got going: start afresh
        entries.append(entry)
    store.ensure()
    loops = {e.task.name: e.loop_id for e in entries}
    atomic_write_json(record, {"tasks_file": str(tasks_path.resolve()), "loops": loops})
    return entries


# --- running -----------------------------------------------------------------------------------


class BatchView(Protocol):
    def begin(self, entries: list[Entry], jobs: int) -> None: ...
    def event(self, entry: Entry | None, text: str) -> None: ...
    def update(self, entries: list[Entry]) -> None: ...
    def end(self, entries: list[Entry]) -> None: ...


@dataclass
class BatchResult:
    """What `ralph batch --json` prints (`json_fields`, through `rendering.to_data`)."""

    json_fields: ClassVar[tuple[str, ...]] = ("tasks_file", "interrupted", "exit_code", "loops")

    tasks_file: Path
    entries: list[Entry]
    interrupted: bool

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return 130
        return 0 if all(e.status == "completed" for e in self.entries) else 1

    @property
    def loops(self) -> list[dict[str, Any]]:
        return [e.to_json() for e in self.entries]


class Batch:
    """Runs the queued entries, at most `jobs` at once; Ctrl-C saves them all."""

    def __init__(self, root: Path, store: MemoryStore, entries: list[Entry], view: BatchView):
        self.root, self.store, self.entries, self.view = root, store, entries, view
        self.lock = threading.Lock()
        self.stopping = False
        self.running: dict[str, Child] = {}
        # The loops inherit this process's SIGINT: ignored (`ralph batch ... &` in a script),
        # it never reaches them, so they are stopped with SIGTERM, which ralph always handles
        # like Ctrl-C (as `ralph abort` does); otherwise with SIGINT, a Ctrl-C.
        ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        self.stop_signal = signal.SIGTERM if ignored else signal.SIGINT
        configured = config.load(root)
        for entry in entries:
            entry.checks_env = loop_env(entry.task, configured)

    def run(self, jobs: int) -> bool:
        """True when interrupted."""
        from ralph.loop.assembly import sigterm_as_interrupt

        self.view.begin(self.entries, jobs)
        queued = [e for e in self.entries if e.phase == "queued"]
        pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="ralph-batch")
        futures: list[Future[None]] = []
        interrupted = False
        try:
            with sigterm_as_interrupt():
                for entry in queued:
                    futures.append(pool.submit(self._work, entry))
                while not all(f.done() for f in futures):
                    wait(futures, timeout=POLL_SECONDS)
                    self._poll()
        except KeyboardInterrupt:
            interrupted = True
            with _signals_held():
                self._stop_all()
                wait(futures)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        for future in futures:
            future.result()  # a bug in a worker is a bug, not a silent skip
        self._poll()
        self.view.end(self.entries)
        return interrupted

    def _work(self, entry: Entry) -> None:
        from ralph import process

        with self.lock:
            if self.stopping:
                entry.status = "not started"
                return
            entry.phase, entry.status = "running", "running"
        self.view.event(entry, f"{'resumed' if entry.resume else 'started'} {entry.loop_id}")
        try:
            result = process.run(
                entry.argv(),
                cwd=self.root,
                env={**entry.checks_env, **entry.env()},
                on_start=lambda proc: self._started(entry, proc),
            )
        except (OSError, ValueError) as exc:  # validated before: a limit of this machine
            entry.phase, entry.status, entry.error = "done", "error", f"cannot start: {exc}"
            self.view.event(entry, f"error: {entry.error}")
            return
        finally:
            with self.lock:
                self.running.pop(entry.loop_id, None)
        entry.exit_code = result.exit_code
        entry.refresh(self.store)
        if not self.store.state_path(entry.loop_id).exists():
            stopped = result.exit_code in (130, -signal.SIGINT, -signal.SIGTERM)
            entry.status = "not started" if stopped else "error"
        if result.exit_code not in (0, 1, 3, 130):
            lines = [line for line in strip_escapes(result.stderr).splitlines() if line.strip()]
            entry.error = next((ln for ln in lines if ln.startswith("ralph: ")), None) or (
                lines[-1] if lines else f"exited {result.exit_code}"
            )
        entry.phase = "done"
        best = "-" if entry.best_reward is None else f"{entry.best_reward:.2f}"
        self.view.event(
            entry,
            f"{entry.status}"
            + (f" ({entry.stop_reason})" if entry.stop_reason else "")
            + f": {plural(entry.iteration, 'iteration')}, "
            f"best reward {best}, exit {entry.exit_code}"
            + (f" — {entry.error}" if entry.error else ""),
        )

    def _started(self, entry: Entry, proc: Child) -> None:
        with self.lock:
            self.running[entry.loop_id] = proc
            if self.stopping:  # Ctrl-C came while it was starting
                _interrupt(proc, self.stop_signal)

    def _poll(self) -> None:
        for entry in self.entries:
            if entry.phase == "running" and entry.refresh(self.store):
                reward = entry.rewards[-1] if entry.rewards else None
                shown = "-" if reward is None else f"{reward:.2f}"
                self.view.event(entry, f"iteration {entry.iteration}: reward {shown}")
        self.view.update(self.entries)

    def _stop_all(self) -> None:
        """Ctrl-C each loop once (`stop_signal`; each saves itself and exits 130); start no
        more."""
        with self.lock:
            self.stopping = True
            procs = list(self.running.values())
        for proc in procs:
            _interrupt(proc, self.stop_signal)


def _interrupt(proc: Child, stop_signal: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(proc.pid, stop_signal)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """While the loops save themselves, a second Ctrl-C or SIGTERM must not cut that short.

    A handler that does nothing, not SIG_IGN: an ignored SIGINT would be inherited by a loop
    still being started, which then could not be interrupted."""
    held = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(ValueError):  # not the main thread
            held[sig] = signal.signal(sig, lambda *_: None)
    try:
        yield
    finally:
        for sig, previous in held.items():
            signal.signal(sig, previous)


def run_batch(
    tasks_path: Path,
    *,
    jobs: int | None,
    resume: bool,
    view: BatchView,
    cwd: Path | None = None,
) -> BatchResult:
    """Validate the tasks file, then run its loops; nothing starts when the file is wrong."""
    from ralph.loop.batch_preflight import preflight_tasks
    from ralph.workspace.locate import find_repo_root

    tasks = load_tasks(tasks_path)
    here = (cwd or Path.cwd()).resolve()
    top = find_repo_root(here)
    if top is None:
        raise PreflightError(
            "ralph batch needs a git repository: each loop works in a git worktree of its own",
            hint="run it inside the repository the tasks are about",
        )
    root = MemoryStore.discover(top).root
    store = MemoryStore(root)
    earlier = earlier_loops(store, tasks_path) if resume else {}
    preflight_tasks(root, tasks, config.load(root))  # nothing starts unless every task can
    if not resume:  # a resumed batch's new loops check themselves
        check_parity_once(root, tasks, view)
    entries = plan(store, tasks, tasks_path, earlier)
    _note_dirty(root, view)
    _note_unscoped(tasks, view)
    interrupted = Batch(root, store, entries, view).run(jobs or os.cpu_count() or 1)
    if interrupted:
        saved = sum(1 for e in entries if e.status in ("paused", "crashed", "not started"))
        view.event(
            None,
            f"interrupted: {plural(saved, 'loop')} can go on; "
            f"`ralph batch --resume {tasks_path}` does that",
        )
    return BatchResult(tasks_path, entries, interrupted)


def check_parity_once(root: Path, tasks: list[BatchTask], view: BatchView) -> None:
    """Tests that import in the checkout but not in a fresh worktree stop a batch (or a bench)
    before any loop spends anything (loop/parity.py): all tasks share the repository, so once."""
    from ralph.loop.parity import batch_needs_probe, probe_batch
    from ralph.loop.task_checks import task_settings

    configured = config.load(root)
    settings = [task_settings(root, task, configured) for task in tasks]
    if batch_needs_probe(root, settings):
        view.event(None, "checking that the tests import in a fresh worktree as in your checkout")
        probe_batch(root, settings)


def _note_unscoped(tasks: list[BatchTask], view: BatchView) -> None:
    """Several tasks, some judged by the configured checks alone: each of those loops has every
    failing test as its target, the other tasks' bugs too, which a person must be told."""
    unscoped = [task.name for task in tasks if task.test is None and not task.checks]
    if len(tasks) > 1 and unscoped:
        view.event(
            None,
            f"without `test:` or `checks:`: {plural(len(unscoped), 'task')} "
            f"({', '.join(unscoped)}); each such loop must make every failing test pass, the "
            "other tasks' too (a task's `test:` makes its own tests its target, and the "
            "configured checks then guard it)",
        )


def _note_dirty(root: Path, view: BatchView) -> None:
    from ralph.workspace.base import name_some
    from ralph.workspace.git import GitWorkspace

    with contextlib.suppress(Exception):
        dirty = GitWorkspace(root).dirty_files()
        if dirty:
            view.event(
                None,
                "uncommitted changes are not in the loops' worktrees, which start at HEAD: "
                + name_some(dirty, 5),
            )
