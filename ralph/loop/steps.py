"""The cycle's steps over the seams: compose -> act -> evaluate -> reflect (then the runner
remembers). Each takes the loop's `Parts` and `Reporter` and returns one value of iteration.py.

compose: the task, what fails now (file:line), the Ω window of this loop's reflections
(window.py), lessons of other loops' failures like this one, the pivot instruction when the
loop is about to stall, and what a rollback undid; kept as `NNN/prompt.md`. act: a fresh actor
process on the tree, whose changes the workspace reads (never the agent's word). protect: the
baseline's test files the attempt edited put back (protect.py). evaluate: the checks, judged
against the baseline, their logs kept. reflect: the agent's trajectory kept, then
a success note or the reflector's reflection.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ralph.config import lessons_cutoff
from ralph.errors import RalphError
from ralph.evaluators.base import EvaluationRequest
from ralph.files import atomic_write_text
from ralph.loop import prompts
from ralph.loop import window as memory
from ralph.loop.escalation import escalation_of
from ralph.loop.iteration import Acted, Evaluated, Prompt, Reflected, ms_since
from ralph.loop.protect import ProtectedTests, note, put_back
from ralph.templates import render
from ralph.usage_limits import UsageLimited
from ralph.workspace.base import shown

if TYPE_CHECKING:
    from ralph.actors.base import Actor
    from ralph.config import Settings
    from ralph.evaluators.base import Baseline, Evaluation, Evaluator
    from ralph.loop.policy import Decision
    from ralph.loop.result import LoopResult
    from ralph.memory.lessons import Lesson
    from ralph.memory.state import LoopState
    from ralph.memory.store import MemoryStore
    from ralph.records import IterationRecord
    from ralph.reflection.base import Reflector
    from ralph.workspace.base import Workspace

# the seam: what other packages use
__all__ = ["Parts", "Reporter"]


class Reporter(Protocol):
    """Receives the loop's events; cli/live.py has the rich, plain and silent ones."""

    def loop_started(self, state: LoopState, resumed: bool) -> None: ...
    def phase(self, iteration: int, name: str) -> None: ...
    def output(self, stream: str, text: str) -> None: ...
    def evaluated(self, iteration: int, evaluation: Evaluation) -> None: ...
    def iteration_done(self, record: IterationRecord, decision: Decision) -> None: ...
    def note(self, message: str) -> None: ...
    def waiting(self, state: LoopState, until: float, limit: str) -> None: ...
    def loop_finished(self, result: LoopResult) -> None: ...


@dataclass
class Parts:
    """The collaborators of one loop: built by `assembly.build_parts`, fakes in the tests
    (`ralph.testing`)."""

    actor: Actor
    evaluator: Evaluator
    reflector: Reflector
    workspace: Workspace
    memory_tools: bool = False  # the actor can call `ralph mcp` (the prompt says so)
    holdout: Evaluator | None = None  # held-out tests, run before a success (loop/holdout.py)


# compose -------------------------------------------------------------------------------------


def window(records: list[IterationRecord], settings: Settings) -> tuple[list[IterationRecord], int]:
    """The reflections for the prompt and Ω, sized by the last attempt's verification type."""
    last = records[-1] if records else None
    verification = last.evaluator_output.verification_type if last else "combined"
    omega = memory.omega_for(verification, settings.omega)
    selected = memory.select_window(
        records,
        omega=omega,
        policy=settings.window_policy,
        token_budget=settings.memory_tokens,
        current_fingerprint=last.ralph.error_fingerprint if last and last.ralph else None,
        current_errors=list(last.evaluator_output.errors or []) if last else [],
    )
    return selected, omega


def lessons(
    store: MemoryStore,
    loop_id: str,
    last: Evaluation | None,
    limit: int,
    note: Callable[[str], None],
    before: str | None = None,
    *,
    retire_after: int = 3,
) -> list[Lesson]:
    """Lessons of other loops' failures like the last evaluation's (`--lessons`, 0 = none).

    Learning from other loops is a bonus: a memory it cannot read costs a note, not the loop.
    The first attempt gets them too: the last evaluation is then the baseline.
    """
    if limit < 1 or last is None or last.passed:
        return []
    if all(other == loop_id for other in store.loop_ids()):
        return []  # no other loop to learn from: skip opening the index
    import sqlite3

    from ralph.memory.retrieval import retrieve_lessons

    try:
        return retrieve_lessons(
            store,
            exclude_loop=loop_id,
            current_errors=last.relevant_errors(),
            fingerprint=last.fingerprint,
            limit=limit,
            before=lessons_cutoff(before) if before else None,
            retire_after=retire_after,
        )
    except (RalphError, OSError, sqlite3.Error) as exc:
        note(f"lessons from other loops skipped: {exc}")
        return []


def prompt(
    store: MemoryStore,
    state: LoopState,
    number: int,
    *,
    max_iterations: int,
    evaluation: Evaluation | None,
    reflections: tuple[list[IterationRecord], int],
    lessons: list[Lesson],
    pivot: bool,
    unmatched_edits: list[str],
    reverted: dict[str, Any] | None,
    protected_edits: list[str] | None = None,
    memory_tools: bool = False,
    escalate: bool = False,
) -> Prompt:
    """Render the actor prompt of attempt `number` and keep it in the attempt's folder."""
    window, omega = reflections
    context = prompts.actor_prompt_context(
        task=state.task,
        iteration=number,
        max_iterations=max_iterations,
        evaluation=evaluation,
        reflections=window,
        lessons=[lesson.view() for lesson in lessons],
        pivot=pivot,
        unmatched_edits=unmatched_edits,
        reverted=reverted,
        protected_edits=protected_edits or (),
        memory_tools=memory_tools,
        escalate=escalate,
    )
    text = render("actor", context, project_root=store.root)
    artifacts = store.artifacts_dir(state.loop_id, number)
    atomic_write_text(artifacts / "prompt.md", text, durable=False)
    ids = [lesson.id for lesson in lessons]
    return Prompt(number, text, window, omega, ids, artifacts, escalate)


# act, evaluate, reflect ----------------------------------------------------------------------


def act(
    parts: Parts,
    reporter: Reporter,
    prompt: Prompt,
    *,
    loop_id: str,
    iteration_timeout: float | None,
    idle_timeout: float | None,
) -> Acted:
    """A fresh attempt by the actor; what it changed, as the workspace sees it."""
    from ralph.actors.base import ActorContext

    reporter.phase(prompt.iteration, "act")
    parts.workspace.begin_iteration()
    clock, started = time.monotonic(), time.time_ns() - 20_000_000  # a ctime tick earlier
    ctx = ActorContext(
        loop_id=loop_id,
        iteration=prompt.iteration,
        workdir=parts.workspace.root,
        artifacts_dir=prompt.artifacts,
        iteration_timeout=iteration_timeout,
        idle_timeout=idle_timeout,
        on_output=reporter.output,
    )
    try:
        result = parts.actor.act(prompt.text, ctx)
    except UsageLimited:  # the attempt does not count: the tree as it found it (loop/limits.py)
        parts.workspace.put_back([change.path for change in parts.workspace.changes().files])
        raise
    duration = ms_since(clock)
    escalation = escalation_of(result.summary) if prompt.escalate else None
    if escalation is not None:
        reporter.note(f"iteration {prompt.iteration}: the agent asks for a person: {escalation}")
    set_aside_bytecode(reporter, prompt, parts.workspace.root, started)
    return Acted(result, parts.workspace.changes(), duration, escalation=escalation)


def protect(
    parts: Parts, reporter: Reporter, prompt: Prompt, acted: Acted, baseline: Baseline | None
) -> Acted:
    """Between act and evaluate: the baseline's test files the attempt edited are put back
    (loop/protect.py; of a tox.ini, setup.cfg or pyproject.toml only the pytest section), the
    diff of what was undone kept as `NNN/test-edits.diff`; `acted` then reads the tree that is
    judged, and committed, without those edits."""
    rule = ProtectedTests.of(baseline)
    if not rule or not acted.changes.files:
        return acted
    workspace, prefix = parts.workspace, acted.changes.prefix
    edits = rule.edits(acted.changes.files, prefix, workspace.original, workspace.root)
    if not edits:
        return acted
    diff = put_back(edits, prefix, workspace)
    atomic_write_text(prompt.artifacts / "test-edits.diff", diff, durable=False)
    changes = workspace.changes()
    changes.git_moves, changes.held_back = acted.changes.git_moves, acted.changes.held_back
    names = [shown(change.path.removeprefix(prefix)) for change in edits]
    reporter.note(f"iteration {prompt.iteration}: {note(names)}")
    return replace(acted, changes=changes, protected=tuple(names))


def set_aside_bytecode(reporter: Reporter, prompt: Prompt, root: Path, since_ns: int) -> None:
    """After the attempt: bytecode it wrote in the tree (a sourceless `calc/__init__.pyc`
    shadows `calc.py`) moved to `NNN/bytecode/` (workspace/bytecode.py), so the checks import
    the code from its source, whatever `--allow-test-edits` says; said in a note."""
    from ralph.workspace import bytecode  # after the first attempt: not on `run`'s path to it

    moved = bytecode.set_aside(root, since_ns, prompt.artifacts / "bytecode")
    if moved:
        more = f" and {len(moved) - 5} more" if len(moved) > 5 else ""
        shown_paths = ", ".join(moved[:5]) + more
        reporter.note(
            f"iteration {prompt.iteration}: set aside bytecode the attempt left in the tree "
            f"({shown_paths}): the checks import the code from its source"
        )


def evaluate(
    parts: Parts, reporter: Reporter, prompt: Prompt, baseline: Baseline | None
) -> Evaluated:
    """The checks on the attempt's tree, judged against `baseline`; a log per check kept."""
    reporter.phase(prompt.iteration, "evaluate")
    clock = time.monotonic()
    request = EvaluationRequest(parts.workspace.root, baseline, on_output=reporter.output)
    evaluation = parts.evaluator.handle(request)
    duration = ms_since(clock)
    reporter.evaluated(prompt.iteration, evaluation)
    for name, text in evaluation.logs().items():
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in name)
        atomic_write_text(prompt.artifacts / f"check-{safe}.log", text, durable=False)
    return Evaluated(evaluation, duration)


def reflect(
    parts: Parts,
    reporter: Reporter,
    prompt: Prompt,
    acted: Acted,
    evaluation: Evaluation,
    *,
    task: str,
    earlier: list[IterationRecord],
) -> Reflected:
    """The agent's trajectory kept, then a success note, or the reflector's reflection."""
    from ralph.actors import tracing
    from ralph.reflection.heuristic import success_reflection
    from ralph.reflection.quality import gated, quality_flags

    checks = [o.spec.command for o in evaluation.outcomes]
    traced, steps = tracing.store_attempt(
        prompt.artifacts, acted.result, parts.actor.name, checks, parts.workspace.root
    )
    changed = bool(acted.output.files_modified or acted.protected)
    if evaluation.passed:
        reflection = gated(success_reflection(evaluation, acted.output), changed_files=changed)
        return Reflected(reflection, "success", [], trace=traced)
    reporter.phase(prompt.iteration, "reflect")
    clock = time.monotonic()
    outcome = parts.reflector.reflect(
        task=task,
        iteration=prompt.iteration,
        actor_output=acted.output,
        evaluation=evaluation,
        earlier=earlier,
        diff_summary=acted.changes.summary(),
        trajectory=steps,
        protected_edits=acted.protected,
    )
    duration = ms_since(clock)
    if outcome.error:
        reporter.note(f"reflector: {outcome.error}; used a heuristic reflection")
    return Reflected(
        gated(outcome.reflection, changed_files=changed),
        outcome.source,
        outcome.quality_flags or quality_flags(outcome.reflection, evaluation),
        trace=traced,
        tokens_in=outcome.tokens_in,
        tokens_out=outcome.tokens_out,
        cost_usd=outcome.cost_usd,
        calls=outcome.calls,
        duration_ms=duration,
    )
