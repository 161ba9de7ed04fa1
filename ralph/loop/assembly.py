"""Assembling a loop from settings: the actor, checks, reflector and workspace `ralph run` uses.

The CLI commands `run`, `resume`, `abort` and `check` are a few lines over these.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import signal
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ralph import config
from ralph.config import Settings
from ralph.errors import EXIT_ABORTED, ConfigError, PreflightError, RalphError, StoreError
from ralph.evaluators.base import JudgeContext
from ralph.files import ACTOR_PYCACHE, atomic_write_text, bytecode_env, read_json
from ralph.ids import new_loop_id, validate_loop_id
from ralph.loop.holdout import held_out
from ralph.loop.lifecycle import save_state
from ralph.loop.result import ABORTED_MESSAGE, LoopResult, way_back_of
from ralph.loop.runner import LoopRunner
from ralph.loop.steps import Parts, Reporter
from ralph.memory.locks import same_process
from ralph.memory.store import LoopState, MemoryStore
from ralph.redact import redact
from ralph.workspace import open_workspace
from ralph.workspace.base import GitState, name_some
from ralph.workspace.held import Limits

if TYPE_CHECKING:
    from ralph.evaluators.suite import CheckSuite
    from ralph.reflection.reflector import ModelReflector


def project_root(start: Path | None = None) -> Path:
    """The git work tree's root if there is one, else the directory ralph was started in."""
    from ralph.workspace.locate import find_repo_root

    here = (start or Path.cwd()).resolve()
    return find_repo_root(here) or here


def make_evaluator(settings: Settings, judging: JudgeContext | None = None) -> CheckSuite:
    """The settings' checks; a judge among them given `judging` (a loop's task and model)."""
    from ralph.evaluators.suite import CheckSuite

    return CheckSuite.from_settings(settings, judging)


def make_reflector(
    settings: Settings, actor: Any, root: Path, environ: Mapping[str, str]
) -> ModelReflector:
    """--reflector PROVIDER:MODEL, `heuristic`, or by default the actor's own model."""
    from ralph.actors.registry import NO_DEADLINE, reflector_client
    from ralph.providers.registry import make_client
    from ralph.reflection.reflector import ModelReflector

    spec, timeout = settings.reflector, settings.reflector_timeout  # --reflector-timeout
    if spec == "heuristic":
        return ModelReflector(None, project_root=root)
    if spec:
        client = make_client(spec, environ=environ, deadline=timeout or NO_DEADLINE)
        return ModelReflector(client, project_root=root)
    own = reflector_client(actor, environ=environ, timeout=timeout)
    return ModelReflector(own, project_root=root)


def build_parts(
    settings: Settings,
    root: Path,
    environ: Mapping[str, str] | None = None,
    *,
    task: str = "",
    base_commit: str | None = None,
    reporter: Reporter | None = None,
) -> Parts:
    """The loop's collaborators, each given what it needs when it is built: a judge check the
    task, the reflector's model and the commit the work began at (None: HEAD at the baseline;
    a resumed loop's base commit); the actor and the checks their sandbox (`--sandbox`)."""
    from ralph.actors.agents import offer_memory_tools
    from ralph.actors.confine import confine, policy_of
    from ralph.actors.registry import make_actor
    from ralph.workspace.locate import memory_root
    from ralph.workspace.worktree import import_path

    env = os.environ if environ is None else environ
    # in a linked worktree, the worktree's own code first (an editable install imports the
    # main tree's): for the checks, and for an agent that runs the tests itself
    imports = {} if settings.no_git else import_path(root, env)
    # an agent's own test runs keep their bytecode out of the tree too, in a folder of their own
    bytecode = bytecode_env(memory_root(root), env, ACTOR_PYCACHE, make=False)
    actor = make_actor(
        settings.actor,
        actor_args=settings.actor_args,
        model=settings.model,
        environ={**env, **imports, **bytecode},
        base_dir=root,
    )
    reflector = make_reflector(settings, actor, root, env)
    evaluator = make_evaluator(settings, JudgeContext(task, reflector.client, base_commit))
    evaluator.use_environment(imports)
    policy = policy_of(settings, root, env, reporter.note if reporter is not None else None)
    evaluator.use_sandbox(checks := confine(actor, policy, env))
    return Parts(
        actor=actor,
        evaluator=evaluator,
        reflector=reflector,
        workspace=open_workspace(root, use_git=not settings.no_git, limits=Limits.of(settings)),
        memory_tools=settings.memory_tools and offer_memory_tools(actor, root),
        holdout=held_out(settings, root, imports, checks, reporter.note if reporter else None),
    )


SAVING_SIGNALS = ("SIGTERM", "SIGHUP")


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """A CI cancel (SIGTERM) or a closed terminal or ssh session (SIGHUP) saves the loop like
    Ctrl-C does. After a hangup the terminal is gone: what ralph would print there is dropped
    (output to files and pipes stays), so saving the loop cannot fail on a dead terminal."""

    def handler(signum: int, frame: Any) -> None:
        if signum == getattr(signal, "SIGHUP", None):
            _drop_terminal_output()
        raise KeyboardInterrupt

    previous: dict[int, Any] = {}
    try:
        for name in SAVING_SIGNALS:
            number = getattr(signal, name, None)
            if number is not None:
                previous[number] = signal.signal(number, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        for number, old in previous.items():
            signal.signal(number, old)


def _drop_terminal_output() -> None:
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        for fd in (1, 2):
            if os.isatty(fd):
                os.dup2(devnull, fd)
        os.close(devnull)


def _guard_abort(store: MemoryStore, loop_id: str, reporter: Reporter, run: Any) -> LoopResult:
    """Run the loop; `ralph abort` arriving before the loop's own handler is in place (during
    the baseline) still ends it as aborted, not as interrupted."""
    try:
        with sigterm_as_interrupt():
            result: LoopResult = run()
            return result
    except KeyboardInterrupt:
        if not store.abort_requested(loop_id) or not store.state_path(loop_id).exists():
            raise
        state = store.read_state(loop_id)
        state.status, state.stop_reason = "aborted", "aborted by user"
        save_state(store, state)
        result = LoopResult.of(
            state,
            EXIT_ABORTED,
            ABORTED_MESSAGE,
            reflections_dir=str(store.reflections_dir(loop_id)),
            store=store,
        )
        reporter.loop_finished(result)
        return result
    except RalphError as error:  # paused once its branch exists: resume, and the way back
        error.after = error.after or way_back_of(store, loop_id)
        raise


def intake(task: str, flags: dict[str, Any], cwd: Path | None) -> tuple[str, Path, Path, Settings]:
    """What `run` and `run --dry-run` start from: the task (refused when empty), the project's
    root, where its memory lives and the settings."""
    from ralph.actors.command import anchored_spec

    if not task.strip():
        raise ConfigError("the task is empty", hint='ralph run "fix the failing date tests"')
    # the one redaction rule: a token in the task is kept out of the state, the records, the
    # prompts and the terminal like any other secret (README: Guarantees)
    task = redact(task)
    root = project_root(cwd)
    home = MemoryStore.discover(root).root
    settings = config.load(home, flags)
    # the state keeps `cmd:./agent.sh` as the absolute path it names here: `resume` from
    # another directory runs the same program
    actor = anchored_spec(settings.actor, Path.cwd())
    if actor != settings.actor:
        settings = dataclasses.replace(settings, actor=actor)
    return task, root, home, settings


def run_task(
    task: str,
    flags: dict[str, Any],
    reporter: Reporter,
    *,
    loop_id: str | None = None,
    cwd: Path | None = None,
    parts: Parts | None = None,
) -> LoopResult:
    task, root, home, settings = intake(task, flags, cwd)
    loop_id = validate_loop_id(loop_id) if loop_id else new_loop_id(task)
    store = MemoryStore(home)
    if store.state_path(loop_id).exists():
        raise StoreError(f"loop {loop_id} exists already", hint=f"`ralph resume {loop_id}`")
    if not settings.worktree:
        parts = parts or build_parts(settings, root, task=task, reporter=reporter)
        runner = LoopRunner(settings, store, parts, reporter)
        return _guard_abort(store, loop_id, reporter, lambda: runner.start(task, loop_id))
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
    from ralph.workspace.parity import worktree_misses
    from ralph.workspace.worktree import add_worktree, import_path, remove_worktree

    if settings.no_git:
        raise ConfigError("--worktree needs git", hint="drop --no-git or --worktree")
    workdir = add_worktree(root, loop_id)
    reporter.note(f"working in the git worktree {workdir}")
    imports = import_path(workdir, os.environ)
    for name, value in imports.items():  # the worktree's path is said above: shorter here
        shown = value.replace(str(workdir), "<worktree>", 1)
        reporter.note(f"the checks and the agent import the worktree's code first: {name}={shown}")
    if warning := worktree_misses(root):
        reporter.note(warning)
    keep = False
    try:
        prepare_worktree(settings, root, workdir, {**os.environ, **imports}, reporter)
        parts = parts or build_parts(settings, workdir, task=task, reporter=reporter)
        runner = LoopRunner(settings, store, parts, reporter)
        result = _guard_abort(store, loop_id, reporter, lambda: runner.start(task, loop_id))
        keep = result.stop_reason != "already_green"
        return result
    except BaseException:
        keep = store.state_path(loop_id).exists()  # `resume` continues it in this worktree
        raise
    finally:
        if not keep:  # refused or already green: only a fresh checkout to throw away
            remove_worktree(workdir, force=True)
            _forget_worktree(store, loop_id)


def prepare_worktree(
    settings: Settings,
    root: Path,
    workdir: Path,
    environ: Mapping[str, str],
    reporter: Reporter,
) -> None:
    """Before the baseline: `.worktreeinclude`'s files, `worktree_setup`, then the parity
    preflight (tests that import in the checkout must import here too)."""
    from ralph.loop.parity import check_parity
    from ralph.workspace.parity import (
        INCLUDE_FILE,
        copy_included,
        editable_install_warning,
        run_setup,
    )

    included = copy_included(root, workdir)
    if included.copied:
        reporter.note(f"copied from {INCLUDE_FILE}: " + name_some(included.copied, 5))
    if included.skipped:
        reporter.note(f"not copied from {INCLUDE_FILE}: " + name_some(included.skipped, 5))
    if settings.worktree_setup:
        reporter.note(f"worktree_setup: {settings.worktree_setup}")
        if warning := editable_install_warning(settings.worktree_setup):
            reporter.note(f"warning: {warning}")
        took = run_setup(
            settings.worktree_setup,
            workdir,
            root,
            env=environ,
            timeout=settings.check_timeout,
            on_output=reporter.output,
        )
        reporter.note(f"worktree_setup done in {took / 1000:.1f}s")
    check_parity(settings, root, workdir, environ)


def _forget_worktree(store: MemoryStore, loop_id: str) -> None:
    """An already-green loop's state no longer names the worktree just removed."""
    with contextlib.suppress(StoreError):
        state = store.read_state(loop_id)
        if state.git is not None and state.git == GitState(worktree=state.git.worktree):
            state.git = None
            save_state(store, state)


def resume_task(
    loop_id: str | None,
    flags: dict[str, Any],
    reporter: Reporter,
    *,
    cwd: Path | None = None,
    parts: Parts | None = None,
) -> LoopResult:
    home = MemoryStore.discover(project_root(cwd)).root
    store = MemoryStore(home)
    store.require()
    state = store.read_state(validate_loop_id(loop_id) if loop_id else _resumable(store))
    if (  # aborted, then died before it could say so
        store.abort_requested(state.loop_id)
        and state.status not in ("completed", "aborted")
        and store.effective_status(state) != "running"
    ):
        state.status, state.stop_reason = "aborted", "aborted by user"
        save_state(store, state)
    snapshot = state.settings.snapshot()
    snapshot.update({k: v for k, v in flags.items() if v is not None})
    settings = config.from_mapping(snapshot)
    workdir = loop_workdir(state, home)
    if store.effective_status(state) in (*RESUMABLE, "failed"):  # else refused below
        for note in keep_newer_records_apart(store, state):
            reporter.note(note)
    base = state.git.base_commit if state.git else None
    parts = parts or build_parts(
        settings, workdir, task=state.task, base_commit=base, reporter=reporter
    )
    runner = LoopRunner(settings, store, parts, reporter)
    return _guard_abort(store, state.loop_id, reporter, lambda: runner.resume(state))


def keep_newer_records_apart(store: MemoryStore, state: LoopState) -> list[str]:
    """`resume` does an iteration past the state's last again and writes its record anew: right
    for this machine's interrupted attempt, whose prompt.md the record names by its hash; a
    record from elsewhere (`ralph reflections import` into a paused loop) is moved to
    `conflicts/<loop>/` first, never overwritten unseen. Returns what was moved, one note each."""
    from ralph.memory.transfer import CONFLICTS_DIR

    notes = []
    for number, path in store.record_paths(state.loop_id):
        if number <= state.iteration or _own_attempt(store, state.loop_id, number, path):
            continue
        try:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
            target = store.base / CONFLICTS_DIR / state.loop_id / f"{number:03d}-{digest}.json"
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, target)
        except OSError as exc:
            raise StoreError(
                f"record {number} is newer than the state of {state.loop_id} and cannot be "
                f"moved aside: {exc.strerror or exc}",
                hint=f"move {path} away yourself, then resume again",
            ) from None
        notes.append(
            f"record {number} is newer than the loop's state (imported?), so iteration {number} "
            f"is done again: that record is kept as {os.path.relpath(target, store.root)}"
        )
    return notes


def _own_attempt(store: MemoryStore, loop_id: str, number: int, path: Path) -> bool:
    """The record was written by an attempt of this loop here: its prompt is this machine's."""
    prompt = store.artifacts_dir(loop_id, number) / "prompt.md"
    try:
        data = read_json(path)
        sha = hashlib.sha256(prompt.read_bytes()).hexdigest()
    except (StoreError, OSError):
        return False
    extension = data.get("ralph") if isinstance(data, dict) else None
    return isinstance(extension, dict) and extension.get("prompt_sha256") == sha


def loop_workdir(state: LoopState, home: Path) -> Path:
    """The working tree a loop works in: its worktree if it has one, else the main tree."""
    worktree = state.git.worktree if state.git else None
    if not worktree:
        return home
    path = Path(worktree)
    if not path.is_dir():
        raise PreflightError(
            f"the worktree of loop {state.loop_id} is gone: {path}",
            hint=f"`git worktree prune`; its commits are on branch ralph/{state.loop_id}",
        )
    return path


RESUMABLE = ("paused", "crashed", "needs_human")  # what `ralph resume` without a loop takes


def _resumable(store: MemoryStore) -> str:
    running, states = store.running_loops(), [item.state for item in store.list_loops()]
    found = [s for s in states if s and store.effective_status(s, running) in RESUMABLE]
    if not found:  # `ralph status` shows one loop; the list is this
        raise StoreError(
            "no paused, crashed or needs_human loop to resume", hint="see `ralph reflections list`"
        )
    return found[-1].loop_id


ABORT_WAIT = 60.0  # seconds `ralph abort` waits for a running loop to save itself and stop


def abort_loop(loop_id: str, cwd: Path | None = None) -> tuple[LoopState, bool]:
    """End a loop as aborted: (its state, whether it has stopped).

    A running loop (its lock is held) is asked to end: a request file it reads between
    attempts, and SIGTERM when the lock names a process this host can verify is still that
    process (same pid namespace and start time), so a reused pid is never signalled. The loop
    then kills its attempt, saves itself as aborted and exits with code 4.
    """
    store = MemoryStore.discover(cwd)
    store.require()
    state = store.read_state(validate_loop_id(loop_id))
    if state.status in ("completed", "aborted"):
        raise StoreError(f"loop {loop_id} is already {state.status}")
    holder = store.running_loops().get(loop_id)
    if holder is not None:
        atomic_write_text(store.abort_path(loop_id), "requested by `ralph abort`\n")
        if same_process(holder) and holder.get("pid") != os.getpid():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                # SIGTERM, not SIGINT: ralph handles it always, while a loop started in the
                # background of a script inherits SIGINT ignored
                os.kill(int(holder["pid"]), signal.SIGTERM)
        if not _wait_until_stopped(store, loop_id):
            return store.read_state(loop_id), False
        state = store.read_state(loop_id)  # what the loop saved while stopping
    if state.status != "aborted":
        state.status, state.stop_reason = "aborted", "aborted by user"
        save_state(store, state)
    return state, True


def _wait_until_stopped(store: MemoryStore, loop_id: str) -> bool:
    deadline = time.monotonic() + ABORT_WAIT
    while loop_id in store.running_loops():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True
