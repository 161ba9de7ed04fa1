"""`ralph doctor`: can a loop start here? One table of what `ralph run` would use and find.

The settings and where they come from, the actor and the reflector (built and preflighted as
`ralph run` does), every check (installed? what does it say on the untouched tree, and with
which role?), git and the memory folder; then, for choosing, every agent CLI (version, and
credentials to run unattended: actors/readiness.py) and every provider (key, and whether its
endpoint answers: providers/registry.py). Exit 0 when a loop can start, 1 when not.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ralph.cli.common import ConfigOpt, show
from ralph.cli.diagnosis import Diagnosis, Row
from ralph.cli.loops import CheckOpt, ModelOpt, RunActorOpt, RunReflectorOpt, TestOpt, run_flags
from ralph.errors import PreflightError, RalphError, StoreError
from ralph.glyphs import plural

if TYPE_CHECKING:
    from ralph.memory.state import LoopState
    from ralph.memory.store import MemoryStore


def doctor_command(
    actor: RunActorOpt = None,
    model: ModelOpt = None,
    reflector: RunReflectorOpt = None,
    test: TestOpt = None,
    check: CheckOpt = None,
    config_file: ConfigOpt = None,
    no_run: Annotated[
        bool,
        typer.Option("--no-run", help="Do not run the checks; only see that their tools exist."),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object: ok and every finding.")
    ] = False,
) -> None:
    """Can a loop start here? Settings, actor, reflector, checks, git, memory, agent CLIs and
    providers in one table; exit 0 when a loop can start, 1 when not."""
    working_directory()
    flags = run_flags(
        actor=actor, model=model, reflector=reflector, test=test, check=check, config=config_file
    )
    diagnosis = Diagnosis.of(diagnose(flags, run_checks=not no_run, show_progress=not as_json))
    show(diagnosis, as_json=as_json)
    raise typer.Exit(0 if diagnosis.ok else 1)


def working_directory() -> Path:
    """The directory doctor examines; one that was deleted under the shell is bad input, said in
    one line (exit 2), not an internal error from deep inside the first check."""
    try:
        return Path(os.getcwd())
    except FileNotFoundError:
        raise PreflightError(
            "the current directory no longer exists (deleted or moved away)",
            hint="cd into your project and run `ralph doctor` again",
        ) from None


def diagnose(flags: dict[str, Any], *, run_checks: bool, show_progress: bool) -> list[Row]:
    """Every finding, in the order a loop meets them."""
    from ralph import config
    from ralph.actors.registry import probe_agents
    from ralph.loop.assembly import project_root
    from ralph.memory.store import MemoryStore
    from ralph.providers.registry import probe_providers

    root = project_root()
    store = MemoryStore.discover(root)
    environ = dict(os.environ)
    rows: list[Row] = []
    try:
        settings = config.load(store.root, flags)
        where = config.sources(store.root, flags) or ["defaults"]
        rows.append(Row("settings", "sources", "ok", "; ".join(where)))
    except RalphError as error:
        settings = config.from_mapping({})
        rows.append(Row("settings", "sources", "invalid", error.message, False, error.hint))
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2, thread_name_prefix="ralph-doctor") as pool:
        agents_job = pool.submit(probe_agents, environ, root, actor_args=settings.actor_args)
        providers_job = pool.submit(probe_providers, environ)
        actor_rows, used = _actor_rows(settings, root, environ)
        rows += actor_rows
        rows += _check_rows(settings, root, run=run_checks, show_progress=show_progress)
        agents, providers = agents_job.result(), providers_job.result()
    rows = [_reached(row, agents) for row in rows]
    rows += _git_rows(settings, root, store)
    rows.append(_memory_row(store))
    rows.append(_sandbox_row(settings.sandbox))
    for probe in agents:
        rows.append(_agent_row(probe))
    for found in providers:  # the actor's and the reflector's model: a loop needs it to answer
        rows.append(_provider_row(found, needed=found.name in used))
    return rows


def _reached(row: Row, agents: list[Any]) -> Row:
    """The actor's row, once its CLI's own auth check (actors/reach.py) said it cannot reach
    its model: then no loop can start, whatever its credentials looked like."""
    name = row.name.removesuffix(" (auto)")
    probe = next((p for p in agents if p.name == name), None)
    if row.area != "actor" or row.ok is not True or probe is None or probe.reaches is not False:
        return row
    return Row("actor", row.name, "cannot reach its model", probe.reach_detail, False,
               probe.reach_hint)  # fmt: skip


def _actor_rows(settings: Any, root: Path, environ: dict[str, str]) -> tuple[list[Row], set[str]]:
    """The actor's and the reflector's rows, and the providers whose models they call (auto
    resolved): a provider that does not answer then stops a loop."""
    rows, used = _actor_and_reflector(settings, root, environ)
    return rows, {str(getattr(client, "provider", "")) for client in used}


def _actor_and_reflector(
    settings: Any, root: Path, environ: dict[str, str]
) -> tuple[list[Row], list[Any]]:
    from ralph.actors.registry import describe_actor, make_actor
    from ralph.loop.assembly import make_reflector

    try:
        actor = make_actor(
            settings.actor,
            actor_args=settings.actor_args,
            model=settings.model,
            environ=environ,
            base_dir=root,
        )
        actor.preflight()
    except RalphError as error:
        return [Row("actor", settings.actor, "cannot run", error.message, False, error.hint)], []
    chosen = f"{actor.name} (auto)" if settings.actor == "auto" else actor.name
    rows = [Row("actor", chosen, "ok", describe_actor(actor))]
    used = [getattr(actor, "client", None)]
    timeout = settings.reflector_timeout
    limit = "no time limit" if not timeout else f"at most {timeout:g}s"
    try:
        reflector = make_reflector(settings, actor, root, environ)
    except RalphError as error:
        spec = settings.reflector or "default"
        failed = Row("reflector", spec, "cannot run", error.message, False, error.hint)
        return [*rows, failed], used
    client = getattr(reflector, "client", None)
    if client is None:
        detail = "a heuristic reflection from the diagnostics (no model)"
        name = "heuristic"
    else:
        name = settings.reflector or f"{actor.name}'s model"
        detail = f"{getattr(client, 'model', '?')}, {limit} per reflection"
    return [*rows, Row("reflector", name, "ok", detail)], [*used, client]


def _check_rows(settings: Any, root: Path, *, run: bool, show_progress: bool) -> list[Row]:
    from ralph.cli.progress import check_progress
    from ralph.evaluators.describe import check_summary, why_not_run
    from ralph.evaluators.suite import CheckSuite
    from ralph.evaluators.tools import runnable_checks
    from ralph.loop.announce import NAME_WHAT_MUST_CHANGE
    from ralph.loop.assembly import make_evaluator

    try:
        suite = make_evaluator(settings)
    except RalphError as error:
        return [Row("check", "-", "invalid", error.message, False, error.hint)]
    if not suite.checks:
        hint = "run `ralph init` to detect them, or pass --test CMD / --check NAME|CMD"
        return [Row("check", "-", "none", "no checks configured", False, hint)]
    rows: dict[str, Row] = {}
    runnable, missing = runnable_checks(suite.checks)
    for item, (message, package) in missing:
        rows[item.spec.name] = Row(
            "check", item.spec.name, "missing", message, False, f"pip install {package}"
        )
    if runnable and not run:
        for item in runnable:
            rows[item.spec.name] = Row("check", item.spec.name, "found", item.spec.command)
    elif runnable:
        names = [c.spec.name for c in runnable]
        with check_progress(names, enabled=show_progress) as done:
            evaluation = CheckSuite.from_checks(runnable).evaluate_baseline(
                root, named=settings.named(), success=settings.success, on_done=done
            )
        roles = evaluation.baseline.checks if evaluation.baseline else {}
        for outcome in evaluation.outcomes:
            base = roles.get(outcome.spec.name)
            role = base.role if base else "-"
            status = outcome.result.status
            seconds = (outcome.result.duration_ms or 0) / 1000
            summary = "passes" if status == "pass" else check_summary(outcome)
            if status == "error":  # the row's status says it cannot run; the detail says why
                summary = why_not_run(outcome)
            detail = f"{summary} ({seconds:.1f}s); {outcome.spec.command}"
            ok = status != "error"  # a loop needs every check able to judge
            why = "it could not run on the untouched tree; see `ralph check`"
            if outcome.changed_files:  # put back already (evaluators/suite.blame_writers)
                why = "it changed files in the tree (put back); a check must only look"
            rows[outcome.spec.name] = Row(
                "check",
                outcome.spec.name,
                f"{'cannot run' if status == 'error' else status}, {role}",
                detail,
                ok,
                why if ok is False else None,
            )
        if evaluation.passed:
            rows["(all)"] = Row(
                "check",
                "(all)",
                "green",
                "no target fails: a loop would end at once (already_green)",
                None,
                NAME_WHAT_MUST_CHANGE,
            )
    return [rows[c.spec.name] for c in suite.checks] + ([rows["(all)"]] if "(all)" in rows else [])


def _git_rows(settings: Any, root: Path, store: MemoryStore) -> list[Row]:
    from ralph import process
    from ralph.workspace.base import DIRTY_HINT, name_some
    from ralph.workspace.git import GitWorkspace
    from ralph.workspace.locate import find_repo_root

    if settings.no_git:
        return [Row("git", "-", "off", "--no-git: no branch, commits or rollback")]
    if find_repo_root(root) is None:
        return [
            Row(
                "git",
                "repository",
                "none",
                "the loop runs without branch, commits or rollback",
                None,
                "`git init` and commit, to get a branch per loop and rollback",
            )
        ]
    workspace = GitWorkspace(root)
    head = workspace.current_commit()
    if head is None:
        hint = "commit something first (git commit --allow-empty -m init), or use --no-git"
        return [Row("git", "repository", "no commits", f"{root} has no commits", False, hint)]
    branch = process.run(["git", "rev-parse", "--abbrev-ref", "HEAD"], cwd=root).stdout.strip()
    on_loop = _loop_branch_row(store, branch)
    after = [on_loop] if on_loop else []
    # untracked files never stop a loop (they stay yours, never committed); a worktree loop
    # starts from a fresh checkout of HEAD, so tracked edits only warn there
    dirty = workspace.dirty_files(untracked=False)
    untracked = len(workspace.dirty_files()) - len(dirty)
    yours = f"; kept out of the loop: {plural(untracked, 'untracked file')}" if untracked else ""
    where = f"{branch or 'HEAD'} at {head[:12]}"
    if dirty and settings.worktree:
        missed = plural(len(dirty), "uncommitted edit")
        detail = f"{where}; the worktree starts without {missed} (--worktree)"
        return [Row("git", "repository", "ok", f"{detail}; {root}"), *after]
    if dirty and not settings.allow_dirty:
        detail = f"{where}; uncommitted: {name_some(dirty, 5)}{yours}"
        return [Row("git", "repository", "dirty", detail, False, DIRTY_HINT), *after]
    state = f"{len(dirty)} uncommitted (--allow-dirty)" if dirty else "clean"
    return [Row("git", "repository", "ok", f"{where}, {state}{yours}; {root}"), *after]


def _loop_of_branch(store: MemoryStore, branch: str) -> LoopState | None:
    """The state of the loop whose branch this is (`ids.loop_branch`, or `ralph/<loop-id>` of
    loops started before), or None."""
    from ralph.ids import LOOP_ID_PATTERN

    rest = branch.removeprefix("ralph/")
    for loop_id in (f"ralph-{rest}", rest) if rest != branch else ():
        if LOOP_ID_PATTERN.fullmatch(loop_id) and store.state_path(loop_id).exists():
            with contextlib.suppress(StoreError):
                state = store.read_state(loop_id)
                if state.git is not None and state.git.branch == branch:
                    return state
    return None


def _start_of(store: MemoryStore, state: LoopState) -> tuple[str, str]:
    """Where the work of `state`'s loop began and the command that goes back there: its
    starting branch, past the branches of loops it was started on (a loop on a loop)."""
    git = state.git
    for _ in range(20):  # each step is an earlier loop; a chain this long is no one's
        earlier = (
            _loop_of_branch(store, git.original_branch) if git and git.original_branch else None
        )
        if earlier is None:
            break
        git = earlier.git
    if git and git.original_branch:
        return git.original_branch, f"git switch {git.original_branch}"
    commit = ((git.original_commit or git.base_commit) if git else None) or ""
    if commit:  # it started on a detached HEAD
        return commit[:12], f"git switch --detach {commit[:12]}"
    return "an unknown branch", "git switch <your branch>"


def _loop_branch_row(store: MemoryStore, branch: str) -> Row | None:
    """The tree left on an earlier loop's branch (a loop without --worktree stays there): a new
    loop would start from that loop's work, not from your branch. `ralph run` allows it (its
    preflight refuses a dirty tree and an existing branch of the same id), so a warning; but a
    loop still running in this tree holds the tree's lock, and no other starts here."""
    state = _loop_of_branch(store, branch)
    if state is None:
        if re.fullmatch(r"ralph/[a-z0-9-]+-[0-9a-f]{8}", branch):
            detail = f"{branch}: a ralph loop branch; this memory has no loop for it"
            return Row("git", "branch", "loop branch", detail, None, "git switch <your branch>")
        return None
    status = store.effective_status(state)
    if status == "running":
        detail = f"{branch}: loop {state.loop_id} is running in this tree"
        hint = f"wait for it, `ralph abort {state.loop_id}`, or start another loop with --worktree"
        return Row("git", "branch", "loop running", detail, False, hint)
    start, switch = _start_of(store, state)
    detail = (
        f"{branch}, left by loop {state.loop_id} ({status}) from {start}: a new loop here would"
        " start from that loop's work"
    )
    resume = f" (or `ralph resume {state.loop_id}`)" if status in ("paused", "crashed") else ""
    return Row("git", "branch", "loop branch", detail, None, switch + resume)


def _memory_row(store: Any) -> Row:
    base: Path = store.base
    existing = next((p for p in (base, *base.parents) if p.exists()), None)
    if existing is None or not os.access(existing, os.W_OK):
        hint = "make the project folder writable for this user"
        return Row("memory", ".aiwg/ralph", "read-only", f"cannot write {base}", False, hint)
    if not base.is_dir():
        return Row("memory", ".aiwg/ralph", "ok", f"{base}, made by the first loop")
    loops = store.loop_ids()
    running = sorted(store.running_loops())
    now = f"; running: {', '.join(running)}" if running else ""
    return Row("memory", ".aiwg/ralph", "ok", f"{base}: {plural(len(loops), 'loop')}{now}")


def _sandbox_row(mode: str) -> Row:
    """Whether the agent and the checks can run in bubblewrap here, which one, or why not
    and the fix; only `--sandbox bwrap` where it cannot run stops a loop."""
    from ralph.sandbox import find

    if mode == "none":
        return Row("sandbox", mode, "off", "--sandbox none: the agent and the checks run as ralph")
    found = find()
    if found.works:
        return Row("sandbox", mode, "ok", found.line())
    status = "cannot run" if mode == "bwrap" else "off"
    return Row("sandbox", mode, status, found.line(), False if mode == "bwrap" else None, found.fix)


def _agent_row(probe: Any) -> Row:
    from ralph.actors.reach import newer_than_verified

    if probe.path is None:
        return Row("agent", probe.name, "not installed", probe.install, None, command=True)
    version = probe.version or "version unknown"
    if verified := newer_than_verified(probe.name, probe.version):
        version += f" (newer than {verified}, the version ralph was verified with)"
    credentials = probe.credentials
    if credentials.ok and probe.reaches is False:
        detail = f"{version}; {credentials.source}; {probe.reach_detail}"
        return Row("agent", probe.name, "cannot reach its model", detail, None, probe.reach_hint)
    if credentials.ok:
        return Row("agent", probe.name, "ready", f"{version}; {credentials.source}", None)
    detail = f"{version}; {credentials.source}"
    return Row("agent", probe.name, "no credentials", detail, None, credentials.hint)


def _provider_row(found: Any, *, needed: bool) -> Row:
    failed = False if needed else None  # a provider the actor or reflector does not use: info
    if not found.configured:
        return Row("provider", found.name, "not configured", found.detail, failed)
    if found.ok:
        return Row("provider", found.name, "reachable", f"{found.url}: {found.detail}", True)
    status = "key refused" if found.status in (401, 403) else "unreachable"
    if found.status is not None and status == "unreachable":
        status = "answers badly"
    hint = "check the key and the base URL variable" if needed or found.key else None
    return Row("provider", found.name, status, f"{found.url}: {found.detail}", failed, hint)
