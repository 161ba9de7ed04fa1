"""Assembling a loop from settings: the actor, checks, reflector and workspace `ralph run` uses.

The CLI commands `run`, `resume`, `status`, `abort` and `check` are a few lines over these.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ralph import config
from ralph.config import Settings
from ralph.errors import ConfigError, PreflightError, StoreError
from ralph.loop import LoopResult, LoopRunner, Parts, Reporter
from ralph.redact import redact
from ralph.store import LoopState, MemoryStore, new_loop_id, validate_loop_id


def project_root(start: Path | None = None) -> Path:
    """The git work tree's root if there is one, else the directory ralph was started in."""
    from ralph.gitops import find_repo_root

    here = (start or Path.cwd()).resolve()
    return find_repo_root(here) or here


def memory_root(root: Path) -> Path:
    """Where `.aiwg/ralph/` lives: the main working tree, also for a loop in a linked worktree."""
    from ralph.gitops import main_worktree

    return main_worktree(root) or root


def make_evaluator(settings: Settings) -> Any:
    from ralph.evaluators.suite import CheckSuite

    return CheckSuite(
        settings.all_checks(),
        settings.weights,
        check_timeout=settings.check_timeout,
        cap=settings.output_cap,
    )


def make_reflector(settings: Settings, actor: Any, root: Path, environ: Mapping[str, str]) -> Any:
    """--reflector PROVIDER:MODEL, `heuristic`, or by default the actor's own model."""
    from ralph.reflection import Reflector

    spec = settings.reflector
    if spec == "heuristic":
        return Reflector(None, project_root=root)
    if spec:
        from ralph.providers.registry import make_client

        return Reflector(make_client(spec, environ=environ), project_root=root)
    return Reflector(actor.chat_client(), project_root=root)


def build_parts(settings: Settings, root: Path, environ: Mapping[str, str] | None = None) -> Parts:
    from ralph.actors.registry import make_actor
    from ralph.gitops import open_workspace

    env = os.environ if environ is None else environ
    actor = make_actor(settings.actor, actor_args=settings.actor_args, environ=env, base_dir=root)
    return Parts(
        actor=actor,
        evaluator=make_evaluator(settings),
        reflector=make_reflector(settings, actor, root, env),
        workspace=open_workspace(root, use_git=not settings.no_git),
    )


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """A CI cancel (SIGTERM) saves the loop like Ctrl-C does."""

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_task(
    task: str,
    flags: dict[str, Any],
    reporter: Reporter,
    *,
    loop_id: str | None = None,
    cwd: Path | None = None,
    parts: Parts | None = None,
) -> LoopResult:
    if not task.strip():
        raise ConfigError("the task is empty", hint='ralph run "fix the failing date tests"')
    # the one redaction rule: a token in the task is kept out of the state, the records, the
    # prompts and the terminal like any other secret (README: Guarantees)
    task = redact(task)
    root = project_root(cwd)
    home = memory_root(root)
    settings = config.load(home, flags)
    loop_id = validate_loop_id(loop_id) if loop_id else new_loop_id(task)
    store = MemoryStore(home)
    if store.state_path(loop_id).exists():
        raise StoreError(f"loop {loop_id} exists already", hint=f"`ralph resume {loop_id}`")
    if not settings.worktree:
        runner = LoopRunner(settings, store, parts or build_parts(settings, root), reporter)
        with sigterm_as_interrupt():
            return runner.start(task, loop_id)
    return _run_in_worktree(task, loop_id, settings, store, root, reporter, parts)


def _run_in_worktree(
    task: str,
    loop_id: str,
    settings: Settings,
    store: MemoryStore,
    root: Path,
    reporter: Reporter,
    parts: Parts | None,
) -> LoopResult:
    """`--worktree`: the loop works in its own worktree; its memory stays in `store`."""
    from ralph.gitops import GitWorkspace, add_worktree, name_some, remove_worktree

    if settings.no_git:
        raise ConfigError("--worktree needs git", hint="drop --no-git or --worktree")
    workdir = add_worktree(root, loop_id)
    reporter.note(f"working in the git worktree {workdir}")
    dirty = GitWorkspace(root).dirty_files()
    if dirty:
        reporter.note(
            f"uncommitted changes in {root} are not in the worktree, which starts at HEAD: "
            + name_some(dirty, 5)
        )
    keep = False
    try:
        runner = LoopRunner(settings, store, parts or build_parts(settings, workdir), reporter)
        with sigterm_as_interrupt():
            result = runner.start(task, loop_id)
        keep = result.stop_reason != "already_green"
        return result
    except BaseException:
        keep = _has_branch(store, loop_id)
        raise
    finally:
        if not keep:  # refused or already green: only a fresh checkout to throw away
            remove_worktree(workdir, force=True)


def _has_branch(store: MemoryStore, loop_id: str) -> bool:
    """Whether the loop got as far as its branch (then its worktree holds its work)."""
    try:
        return bool(store.read_state(loop_id).git)
    except StoreError:
        return False


def resume_task(
    loop_id: str | None,
    flags: dict[str, Any],
    reporter: Reporter,
    *,
    cwd: Path | None = None,
    parts: Parts | None = None,
) -> LoopResult:
    home = memory_root(project_root(cwd))
    store = MemoryStore(home)
    store.require()
    state = store.read_state(validate_loop_id(loop_id) if loop_id else _resumable(store))
    snapshot = dict(state.settings)
    snapshot.update({k: v for k, v in flags.items() if v is not None})
    settings = config.from_mapping(snapshot)
    workdir = loop_workdir(state, home)
    runner = LoopRunner(settings, store, parts or build_parts(settings, workdir), reporter)
    with sigterm_as_interrupt():
        return runner.resume(state)


def loop_workdir(state: LoopState, home: Path) -> Path:
    """The working tree a loop works in: its worktree if it has one, else the main tree."""
    worktree = (state.git or {}).get("worktree")
    if not worktree:
        return home
    path = Path(worktree)
    if not path.is_dir():
        raise PreflightError(
            f"the worktree of loop {state.loop_id} is gone: {path}",
            hint=f"`git worktree prune`; its commits are on branch ralph/{state.loop_id}",
        )
    return path


def _resumable(store: MemoryStore) -> str:
    candidates = [
        item.state
        for item in store.list_loops()
        if item.state and item.state.effective_status() in ("paused", "crashed")
    ]
    if not candidates:
        raise StoreError("no paused or crashed loop to resume", hint="`ralph status` lists loops")
    return candidates[-1].loop_id


def store_for(cwd: Path | None = None) -> MemoryStore:
    """The memory of the project `cwd` is in; from a linked worktree, the main tree's."""
    from ralph.gitops import main_worktree

    here = (cwd or Path.cwd()).resolve()
    main = main_worktree(here)
    return MemoryStore(main) if main is not None else MemoryStore.discover(here)


def abort_loop(loop_id: str, cwd: Path | None = None) -> LoopState:
    store = store_for(cwd)
    store.require()
    state = store.read_state(validate_loop_id(loop_id))
    if state.status in ("completed", "aborted"):
        raise StoreError(f"loop {loop_id} is already {state.status}")
    if state.effective_status() == "running" and state.pid and state.pid != os.getpid():
        _interrupt_and_wait(state.pid)
        state = store.read_state(loop_id)  # what the loop saved while stopping
    state.status, state.stop_reason = "aborted", "aborted by user"
    store.write_state(state)
    return state


def _interrupt_and_wait(pid: int, seconds: float = 15.0) -> None:
    """Ctrl-C the running loop (it kills its attempt and saves itself), then wait for it."""
    import time

    from ralph.store import pid_alive

    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGINT)
    deadline = time.monotonic() + seconds
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)


def loop_status(loop_id: str | None, cwd: Path | None = None) -> dict[str, Any]:
    store = store_for(cwd)
    store.require()
    state = store.read_state(validate_loop_id(loop_id) if loop_id else store.latest_loop())
    return {
        "loop_id": state.loop_id,
        "task": state.task,
        "status": state.effective_status(),
        "stop_reason": state.stop_reason,
        "iteration": state.iteration,
        "max_iterations": state.settings.get("max_iterations"),
        "best_iteration": state.best_iteration,
        "best_reward": state.best_reward,
        "baseline_reward": (state.baseline or {}).get("reward"),
        "reward_history": state.reward_history,
        "usage": state.usage,
        "branch": (state.git or {}).get("branch"),
        "worktree": (state.git or {}).get("worktree"),
        "created_at": state.created_at,
        "updated_at": state.updated_at,
    }
