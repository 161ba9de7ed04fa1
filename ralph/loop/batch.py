"""`ralph batch TASKS.yaml`: many tasks on one repository, each a loop in its own git worktree.

ralph does not schedule work across machines (a CI matrix does that, see docs/ci.md); on one
machine it starts at most `--jobs` loops at once, each as `ralph run TASK --worktree` in a
process of its own, so every loop has its own branch, lock, Ctrl-C handling and resumability —
the `--worktree` machinery of `ralph run`, not a second one. All loops record into this
repository's memory, so the lessons of a loop that finished are there for the loops after it.

The tasks file is YAML: a list of tasks, or `{defaults: {...}, tasks: [...]}`. A task is a
mapping with `task` (the text) and optionally `name` (unique; default: from the task),
`test`, `checks` (names or commands), `actor` and `max_iterations`; a bare string is a task.
Any mistake is one line naming the entry, and nothing starts: every task is checked before the
first loop is launched, including what would stop its process from starting (a NUL character,
a task over `MAX_TASK_CHARS`). A task is redacted (ralph.redact) as it is read, as `ralph run`
redacts its own: the name, loop id and branch derived from it, the loop's command line and
`--json` never carry a token written into the task.

Which loop belongs to which task is kept in `.aiwg/ralph/loops/batches/<file>-<hash>.json`
(local, like loop state), so `--resume` continues the paused and crashed loops of that file and
starts the tasks that never started; finished loops are reported as they are.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import os
import re
import signal
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from ralph import config, process
from ralph.config import load_yaml
from ralph.errors import ConfigError, PreflightError, StoreError
from ralph.escapes import strip_escapes
from ralph.files import atomic_write_json, read_json
from ralph.glyphs import plural
from ralph.ids import new_loop_id
from ralph.loop.assembly import sigterm_as_interrupt
from ralph.loop.parity import batch_needs_probe, probe_batch
from ralph.loop.result import changed_files, files_json
from ralph.memory.store import MemoryStore, parse_state
from ralph.redact import redact
from ralph.workspace.base import name_some
from ralph.workspace.git import GitWorkspace
from ralph.workspace.locate import find_repo_root

if TYPE_CHECKING:
    from ralph.process import Child

TASK_KEYS = ("name", "task", "test", "checks", "actor", "max_iterations", "allow_test_edits")
DEFAULT_KEYS = ("test", "checks", "actor", "max_iterations", "allow_test_edits")
POLL_SECONDS = 0.5
# A task travels as one command-line argument of `ralph run`: Linux refuses one over 128 KiB
# (E2BIG). A task is a paragraph or a page; anything longer belongs in a file the task names.
MAX_TASK_CHARS = 32_000
EXAMPLE = "- {name: parser, task: 'fix the date parser', test: 'pytest -q tests/test_dates.py'}"


class TasksFileError(ConfigError):
    """A tasks file that cannot be run as written."""


@dataclass(frozen=True)
class BatchTask:
    name: str
    task: str
    test: str | None = None
    checks: tuple[str, ...] = ()
    actor: str | None = None
    max_iterations: int | None = None
    allow_test_edits: bool = False  # a task about the tests (loop/protect.py)


# --- the tasks file ----------------------------------------------------------------------------


def load_tasks(path: Path) -> list[BatchTask]:
    """The tasks of `path`, or TasksFileError naming the first entry that is wrong."""
    import yaml

    try:
        data = load_yaml(path.read_text("utf-8"))  # a key given twice: refused
    except OSError as exc:
        raise TasksFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise TasksFileError(f"{path}: cannot read YAML: {first}") from None
    defaults: dict[str, Any] = {}
    if isinstance(data, dict):
        for key in data:
            if key not in ("tasks", "defaults"):
                raise TasksFileError(
                    f"{path}: unknown top-level key {key!r}",
                    hint="a tasks file is a list of tasks, or {defaults: {...}, tasks: [...]}",
                )
        defaults = _fields(path, "defaults", data.get("defaults") or {}, DEFAULT_KEYS)
        data = data.get("tasks")
    if not isinstance(data, list) or not data:
        raise TasksFileError(f"{path}: no tasks", hint=f"a list of tasks, e.g. {EXAMPLE}")
    tasks: list[BatchTask] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(data, start=1):
        entry = {"task": raw} if isinstance(raw, str) else raw
        name = entry.get("name") if isinstance(entry, dict) else None
        label = f"task {number}" + (f" ({name!r})" if isinstance(name, str) else "")
        if not isinstance(entry, dict):
            raise TasksFileError(
                f"{path}: {label}: expected a mapping with a `task`, got {type(raw).__name__}",
                hint=f"e.g. {EXAMPLE}",
            )
        fields = _fields(path, label, entry, TASK_KEYS)
        if "task" not in fields:
            raise TasksFileError(f"{path}: {label}: missing `task`", hint=f"e.g. {EXAMPLE}")
        if len(fields["task"]) > MAX_TASK_CHARS:
            raise TasksFileError(
                f"{path}: {label}: the task is {len(fields['task']):,} characters, over the "
                f"limit of {MAX_TASK_CHARS:,}",
                hint="put the details in a file of the repository and name it in the task",
            )
        fields["task"] = redact(fields["task"])
        fields["name"] = redact(fields["name"]) if "name" in fields else slug(fields["task"])
        if fields["name"] in seen:
            raise TasksFileError(
                f"{path}: {label}: duplicate name {fields['name']!r} "
                f"(task {seen[fields['name']]} has it too)",
                hint="give each task a `name` of its own",
            )
        seen[fields["name"]] = number
        tasks.append(BatchTask(**{**defaults, **fields}))
    return tasks


def _fields(path: Path, label: str, entry: Any, allowed: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise TasksFileError(f"{path}: {label}: expected a mapping, got {type(entry).__name__}")
    fields: dict[str, Any] = {}
    for raw_key, value in entry.items():
        key = str(raw_key).replace("-", "_")
        if key not in allowed:
            close = difflib.get_close_matches(key, allowed, n=1)
            raise TasksFileError(
                f"{path}: {label}: unknown key {raw_key!r}",
                hint=f"did you mean {close[0]!r}?" if close else f"known: {', '.join(allowed)}",
            )
        fields[key] = _checked(path, label, key, value)
    return fields


def _checked(path: Path, label: str, key: str, value: Any) -> Any:
    def wrong(expected: str) -> TasksFileError:
        return TasksFileError(f"{path}: {label}: `{key}` must be {expected}, got {value!r}")

    if key == "max_iterations":
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise wrong("a whole number of at least 1")
        return value
    if key == "allow_test_edits":
        if not isinstance(value, bool):
            raise wrong("true or false")
        return value
    if key == "checks":
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not all(isinstance(i, str) and i.strip() for i in items):
            raise wrong("a check name or command, or a list of them")
        if any("\x00" in i for i in items):
            raise TasksFileError(f"{path}: {label}: `{key}` contains a NUL character")
        return tuple(items)
    if not isinstance(value, str) or not value.strip():
        raise wrong("a non-empty string")
    if "\x00" in value:  # no process can be given it as an argument
        raise TasksFileError(f"{path}: {label}: `{key}` contains a NUL character")
    return value


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40].strip("-") or "task"


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
        argv += ["--test", self.task.test] if self.task.test else []
        argv += ["--actor", self.task.actor] if self.task.actor else []
        for check in self.task.checks:
            argv += ["--check", check]
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
            self.changed_files, self.changes_read = files_json(changed_files(store, state)), True
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
        }


def batch_file(store: MemoryStore, tasks_path: Path) -> Path:
    resolved = tasks_path.resolve()
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:8]
    return store.base / "loops" / "batches" / f"{slug(resolved.stem)}-{digest}.json"


def plan(store: MemoryStore, tasks: list[BatchTask], tasks_path: Path, resume: bool) -> list[Entry]:
    """An entry per task: a new loop, or with `resume` the loop this file started before."""
    record = batch_file(store, tasks_path)
    earlier: dict[str, str] = {}
    if resume:
        if not record.exists():
            raise StoreError(
                f"no earlier batch of {tasks_path} to resume",
                hint=f"start it: `ralph batch {tasks_path}`",
            )
        data = read_json(record)
        earlier = dict(data.get("loops") or {}) if isinstance(data, dict) else {}
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

    def run(self, jobs: int) -> bool:
        """True when interrupted."""
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
                env=entry.env(),
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
    if not resume:  # a resumed batch's new loops check themselves
        check_parity_once(root, tasks, view)
    entries = plan(store, tasks, tasks_path, resume)
    _note_dirty(root, view)
    interrupted = Batch(root, store, entries, view).run(jobs or os.cpu_count() or 1)
    if interrupted:
        saved = sum(1 for e in entries if e.status in ("paused", "crashed", "not started"))
        view.event(
            None,
            f"interrupted: {saved} loops can go on; `ralph batch --resume {tasks_path}` does that",
        )
    return BatchResult(tasks_path, entries, interrupted)


def check_parity_once(root: Path, tasks: list[BatchTask], view: BatchView) -> None:
    """Tests that import in the checkout but not in a fresh worktree stop a batch (or a bench)
    before any loop spends anything (loop/parity.py): all tasks share the repository, so once."""
    settings = [
        config.load(root, {"test": task.test, "checks": list(task.checks) or None})
        for task in tasks
    ]
    if batch_needs_probe(root, settings):
        view.event(None, "checking that the tests import in a fresh worktree as in your checkout")
        probe_batch(root, settings)


def _note_dirty(root: Path, view: BatchView) -> None:
    with contextlib.suppress(Exception):
        dirty = GitWorkspace(root).dirty_files()
        if dirty:
            view.event(
                None,
                "uncommitted changes are not in the loops' worktrees, which start at HEAD: "
                + name_some(dirty, 5),
            )
