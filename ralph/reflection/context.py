"""What the reflector reads: the attempt, the checks' verdict against the baseline, and the
earlier failed reflections, as the context of `reflection.mustache`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ralph.evaluators.describe import judgement_line, located_first
from ralph.glyphs import plural
from ralph.records import FAILURE_CATEGORIES, ActorOutput, IterationRecord
from ralph.templates import cap, fence

if TYPE_CHECKING:
    from ralph.evaluators.base import CheckOutcome, Evaluation

EARLIER_IN_PROMPT = 3  # earlier reflections the reflector sees
DIAGNOSTICS_IN_PROMPT = 20  # diagnostics the reflector sees


def reflection_prompt_context(
    *,
    task: str,
    iteration: int,
    actor_output: ActorOutput,
    evaluation: Evaluation,
    earlier: Sequence[IterationRecord],
    diff_summary: str = "",
    trajectory: str = "",
    protected_edits: Sequence[str] = (),
) -> dict[str, Any]:
    """What reflection.mustache reads: the attempt, the checks' verdict, earlier reflections."""
    actions = []
    for i, action in enumerate(actor_output.actions[:40]):
        ch = action.changes
        changes = f"+{ch.additions or 0} -{ch.deletions or 0}" if ch is not None else ""
        actions.append(
            {
                "index": i,
                "type": action.type,
                "description": cap(action.description.strip(), 300),
                "file_path": action.file_path or "",
                "changes": changes,
            }
        )
    errors = located_first(evaluation.relevant_errors())
    diagnostics = [
        {
            "type": d.type,
            "location": d.location(),
            "rule": d.rule or "",
            "message": _indent(cap(d.message.strip(), 600)),
            "stack_trace": _indent(cap(d.stack_trace.strip(), 800)) if d.stack_trace else "",
        }
        for d in errors[:DIAGNOSTICS_IN_PROMPT]
    ]
    hidden = len(errors) - len(diagnostics)
    repeats = repeated_iterations(evaluation, earlier)
    failed_before = [r for r in earlier if not r.evaluator_output.passed]
    return {
        "task": task.strip(),
        "iteration": iteration,
        "actions": actions,
        "has_actions": bool(actions),
        "rationale": cap(actor_output.rationale.strip(), 2000),
        "diff_summary": cap(diff_summary.strip(), 6000),
        "trajectory": cap(trajectory.strip(), 2000),
        # test files I edited that ralph put back before the checks (loop/protect.py)
        "protected_edits": list(protected_edits),
        "has_protected_edits": bool(protected_edits),
        "reward": f"{evaluation.reward:.2f}",
        "checks": [
            {"name": o.spec.name, "status": o.result.status, "summary": judgement_line(o)}
            for o in evaluation.outcomes
        ],
        "diagnostics": diagnostics,
        "has_diagnostics": bool(diagnostics),
        "more_diagnostics": f"... and {plural(hidden, 'more error')}" if hidden > 0 else "",
        "outputs": [
            {"name": o.spec.name, "output": _tail(o)}
            for o in evaluation.failing()
            if not o.errors and _tail(o)
        ],
        "repeated": (
            f"iteration {', '.join(map(str, repeats))} failed with exactly these errors too, "
            "so that approach does not work."
            if repeats
            else ""
        ),
        "earlier": [_earlier_view(r) for r in failed_before[-EARLIER_IN_PROMPT:]],
        "has_earlier": bool(failed_before),
        "categories": ", ".join(FAILURE_CATEGORIES),
    }


def _earlier_view(record: IterationRecord) -> dict[str, Any]:
    insights = [s for s in record.self_reflection.actionable_insights or [] if s.strip()]
    return {
        "iteration": record.iteration,
        "reward": f"{record.reward:.2f}",
        "fence": fence(record.self_reflection.reflection_text, *insights),
        "reflection_text": record.self_reflection.reflection_text,
        "insights": insights,
        "has_insights": bool(insights),
    }


def _indent(text: str) -> str:
    return text.replace("\n", "\n  ")


def _tail(outcome: CheckOutcome, limit: int = 1500) -> str:
    text = (outcome.result.stderr or "").strip() or (outcome.result.stdout or "").strip()
    return text[-limit:]


# A reflection names at most as many earlier ones as a prompt can hold (the largest Ω): a loop
# stuck on one failure for 200 iterations must not grow every record and prompt with it.
MAX_RELATED = 10


def repeated_iterations(evaluation: Evaluation, earlier: Sequence[IterationRecord]) -> list[int]:
    """The latest MAX_RELATED earlier failed iterations with this one's error fingerprint."""
    if not evaluation.fingerprint:
        return []
    return [
        r.iteration
        for r in earlier
        if not r.evaluator_output.passed
        and r.ralph is not None
        and r.ralph.error_fingerprint == evaluation.fingerprint
    ][-MAX_RELATED:]
