"""`ralph run --dry-run`: what a loop does before its first attempt, and nothing after.

The settings, the actor and reflector (with their preflights), the checks' preflight, the git
preflight and the baseline run exactly as `ralph run` runs them; then the first prompt is
composed as the runner composes it (the same context, template and lessons) and shown as the
actor would receive it. No actor runs; no branch, lock, state or record is made.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ralph.actors.registry import describe_actor, prompt_as_sent
from ralph.evaluators.base import BaselineRules, EvaluationRequest
from ralph.ids import new_loop_id
from ralph.loop import prompts, steps
from ralph.loop.announce import green_message
from ralph.loop.assembly import build_parts, intake
from ralph.memory.store import MemoryStore
from ralph.rendering import Wrapped, whole
from ralph.sandbox import state_line
from ralph.templates import render
from ralph.workspace.parity import worktree_misses

if TYPE_CHECKING:
    from collections.abc import Callable

    from rich.console import Console, ConsoleOptions, RenderResult

    from ralph.evaluators.base import CheckOutcome, Evaluation


@dataclass
class Preview:
    """What the first attempt would be. On a terminal it draws what was looked at (actor,
    command, checks, notes); the prompt itself goes to stdout apart, so `> prompt.md` keeps
    just the prompt. Its JSON form (`json_fields`) has all of it."""

    json_fields: ClassVar[tuple[str, ...]] = (
        "task",
        "actor",
        "command",
        "checks",
        "already_green",
        "prompt",
        "notes",
        "sandbox",
    )

    task: str
    actor: str  # the actor's name (`auto` resolved)
    command: str  # how an attempt runs, in one line
    prompt: str | None  # as the actor gets it; None when the baseline is already green
    evaluation: Evaluation
    notes: list[str] = field(default_factory=list)
    sandbox: str = ""  # on (which bubblewrap) or off, and why: `sandbox.state_line`

    @property
    def checks(self) -> list[dict[str, Any]]:
        """Each check: its command, what it said on the untouched tree and its role."""
        baseline = self.evaluation.baseline
        rows = []
        for outcome in self.evaluation.outcomes:
            base = baseline.checks.get(outcome.spec.name) if baseline else None
            rows.append(
                {
                    "name": outcome.spec.name,
                    "command": outcome.spec.command,
                    "parser": outcome.spec.parser,
                    "status": outcome.result.status,
                    "role": base.role if base else None,
                    "why": base.why if base else "",
                }
            )
        return rows

    @property
    def already_green(self) -> bool:
        return self.prompt is None

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield whole(f"actor    {self.actor}")
        yield whole(f"command  {self.command}")
        if self.sandbox:
            yield Wrapped(f"sandbox  {self.sandbox}", hang=9)
        yield whole("checks (baseline on the untouched tree):")
        rows = self.checks
        width = max((len(row["name"]) for row in rows), default=0)
        for row in rows:
            role = row["role"] or "-"
            yield whole(
                f"  {row['name']:<{width}}  {row['status']:<5}  {role:<6}  {row['command']}"
            )
        for note in self.notes:
            yield whole(f"note: {note}")
        if self.already_green:
            yield whole(
                f"nothing to do: {green_message(self.evaluation)} (the loop would end at once, "
                "exit 0, already_green)"
            )
        else:
            yield whole(
                "dry run: the first prompt follows; no actor ran, no branch or record was made"
            )


def preview_run(
    task: str,
    flags: dict[str, Any],
    *,
    cwd: Path | None = None,
    on_done: Callable[[CheckOutcome], None] | None = None,
) -> Preview:
    """The first prompt of `ralph run TASK` with `flags`; `on_done(outcome)` per baseline check."""

    task, root, home, settings = intake(task, flags, cwd)
    parts = build_parts(settings, root, task=task)  # a judge's model, as the loop's
    parts.evaluator.preflight()
    parts.actor.preflight()
    loop_id = new_loop_id(task)
    notes = []
    # a worktree loop starts from a fresh checkout of HEAD: what is uncommitted here is no bar
    parts.workspace.preflight_loop(loop_id, allow_dirty=settings.allow_dirty or settings.worktree)
    if settings.worktree:
        notes.append("--worktree: the loop would work in a new worktree at HEAD")
        if not settings.no_git and (warning := worktree_misses(root)):
            notes.append(warning)
    rules = BaselineRules(settings.named(), settings.success)
    evaluation = parts.evaluator.handle(EvaluationRequest(root, establish=rules, on_done=on_done))
    command = describe_actor(parts.actor)
    sandbox = state_line(settings.sandbox, settings.sandbox_network)
    if evaluation.passed:
        return Preview(task, parts.actor.name, command, None, evaluation, notes, sandbox)
    # the runner's own lookup, not a copy
    lessons = steps.lessons(
        MemoryStore(home),
        loop_id,
        evaluation,
        settings.lessons,
        notes.append,
        settings.lessons_before,
        retire_after=settings.lesson_retire_after,
    )
    context = prompts.actor_prompt_context(
        task=task,
        iteration=1,
        max_iterations=settings.max_iterations,
        evaluation=evaluation,
        reflections=[],
        lessons=[lesson.view() for lesson in lessons],
        pivot=False,
        unmatched_edits=[],
        memory_tools=parts.memory_tools,
        escalate=settings.escalate,
    )
    prompt = render("actor", context, project_root=home)
    shown = prompt_as_sent(parts.actor, prompt, root)
    return Preview(task, parts.actor.name, command, shown, evaluation, notes, sandbox)
