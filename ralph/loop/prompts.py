"""Prompt rendering: pystache templates, user overrides, and the actor prompt's context.

Templates live in the packaged `prompts/` folder; a file of the same name in
`.aiwg/ralph/prompts/` under the project root replaces it, so teams tune wording without forking.
Prompts are plain text, so HTML escaping is off and a missing key renders as nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ralph import schemas
from ralph.errors import ConfigError
from ralph.records import FAILURE_CATEGORIES, ActorOutput, Diagnostic, IterationRecord

if TYPE_CHECKING:
    from ralph.evaluators.base import CheckOutcome, Evaluation

TEMPLATE_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")
OVERRIDE_DIR = Path(".aiwg") / "ralph" / "prompts"
DIAGNOSTICS_PER_CHECK = 8
MESSAGE_CAP = 1200
EARLIER_IN_PROMPT = 3  # earlier reflections the reflector sees
DIAGNOSTICS_IN_PROMPT = 20  # diagnostics the reflector sees


def template_source(name: str, *, project_root: Path | None) -> Traversable:
    """The user override in `.aiwg/ralph/prompts/` if present, else the packaged template."""
    if not TEMPLATE_NAME.fullmatch(name or ""):
        raise ConfigError(
            f"invalid prompt template name {name!r}",
            hint="template names are lowercase letters, digits, '-' and '_' (e.g. actor)",
        )
    if project_root is not None:
        override = project_root / OVERRIDE_DIR / f"{name}.mustache"
        if override.is_file():
            return override
    return schemas.package_data("prompts").joinpath(f"{name}.mustache")


def load_template(name: str, *, project_root: Path | None) -> str:
    source = template_source(name, project_root=project_root)
    if not source.is_file():
        raise ConfigError(
            f"no prompt template named {name!r}",
            hint="packaged templates: actor, reflection, repair",
        )
    try:
        return source.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"cannot read prompt template {source}: {exc}",
            hint="fix or delete the override to use the packaged template",
        ) from None


def render(name: str, context: Mapping[str, Any], *, project_root: Path | None = None) -> str:
    """Render template `name` with `context`; ConfigError for a bad name or a broken template."""
    import pystache

    text = load_template(name, project_root=project_root)
    # partials={} keeps `{{> x}}` from reading files relative to the working directory.
    renderer = pystache.Renderer(escape=lambda s: s, missing_tags="ignore", partials={})
    try:
        rendered: str = renderer.render(text, dict(context))
    except Exception as exc:  # pystache raises its own ParsingError and plain errors
        where = template_source(name, project_root=project_root)
        raise ConfigError(
            f"prompt template {where} cannot be rendered: {exc}",
            hint="check the template's mustache tags ({{#x}} ... {{/x}} must pair up)",
        ) from None
    return rendered


# --- the actor prompt's context (DESIGN.md section 8) ------------------------------------------


def actor_prompt_context(
    *,
    task: str,
    iteration: int,
    max_iterations: int,
    evaluation: Evaluation | None,
    reflections: Sequence[IterationRecord],
    lessons: Sequence[Mapping[str, Any]],
    pivot: bool,
    unmatched_edits: Sequence[str],
    reverted: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Everything actor.mustache reads; strings only (no None), so nothing renders as 'None'."""
    failing = failing_checks(evaluation) if evaluation is not None else []
    preexisting = preexisting_lines(evaluation) if evaluation is not None else []
    window = [reflection_view(r) for r in sorted(reflections, key=lambda r: r.iteration)]
    lesson_views = [
        {"text": str(item.get("text", "")), "source": str(item.get("source", ""))}
        for item in lessons
        if str(item.get("text", "")).strip()
    ]
    edits = [e for e in unmatched_edits if e.strip()]
    return {
        "task": task.strip(),
        "iteration": iteration,
        "max_iterations": max_iterations,
        "failing": failing,
        "has_failing": bool(failing or preexisting),
        "preexisting": preexisting,
        "has_preexisting": bool(preexisting),
        "reverted": dict(reverted) if reverted else False,
        "reflections": window,
        "has_reflections": bool(window),
        "lessons": lesson_views,
        "has_lessons": bool(lesson_views),
        "pivot": bool(pivot),
        "unmatched_edits": edits,
        "has_unmatched_edits": bool(edits),
    }


def failing_checks(evaluation: Evaluation, per_check: int = DIAGNOSTICS_PER_CHECK) -> list[Any]:
    """What the agent must work on: the targets that fail (their failures, located ones first,
    then what the attempt broke), then the guards that got worse (only the new failures).
    What a guard already failed before the loop is never itemised (`preexisting_lines`)."""
    targets: list[dict[str, Any]] = []
    guards: list[dict[str, Any]] = []
    checks = evaluation.baseline.checks if evaluation.baseline else {}
    for outcome in failing_outcomes(evaluation):
        v = outcome.verdict
        base = checks.get(outcome.spec.name)
        before = set(base.passing or ()) if base is not None else set()
        if v is None:
            targets.append(_failing_entry(outcome, outcome.errors, [], check_summary(outcome)))
        elif v.role == "target":
            summary = check_summary(outcome)
            if v.fixed:
                summary += f"; {len(v.fixed)} fixed since the start"
            entry = _failing_entry(outcome, v.remaining, v.regressions, summary, before, per_check)
            targets.append(entry)
        else:
            n = len(v.regressions)
            summary = f"{n} new failure{'s' if n != 1 else ''} your change caused"
            guards.append(_failing_entry(outcome, [], v.regressions, summary, before, per_check))
    return targets + guards


def _failing_entry(
    outcome: CheckOutcome,
    remaining: Sequence[Diagnostic],
    regressions: Sequence[Diagnostic],
    summary: str,
    passed_before: set[str] | None = None,
    per_check: int = DIAGNOSTICS_PER_CHECK,
) -> dict[str, Any]:
    passed_before = passed_before or set()
    views = [diagnostic_view(d) for d in located_first(remaining)]
    for d in located_first(regressions):
        note = "this passed before your change" if d.rule in passed_before else (
            "new: not there before your change"
        )  # fmt: skip
        views.append({**diagnostic_view(d), "note": note})
    shown = views[:per_check]
    hidden = len(views) - len(shown)
    return {
        "name": outcome.spec.name,
        "status": outcome.result.status,
        "role": outcome.verdict.role if outcome.verdict else "",
        "summary": summary,
        "diagnostics": shown,
        "has_diagnostics": bool(shown),
        "more": f"... and {hidden} more" if hidden else "",
    }


def preexisting_lines(evaluation: Evaluation) -> list[str]:
    """One line per guard that failed before the loop: a count, never the items."""
    lines = []
    for outcome in evaluation.outcomes:
        v = outcome.verdict
        if v is None or v.role != "guard":
            continue
        name = outcome.spec.name
        if not v.judged:
            lines.append(f"{name}: could not run before the loop, so it is not judged")
        elif v.preexisting:
            n = v.preexisting
            what = "failing tests" if outcome.spec.parser == "pytest" else "errors"
            if n == 1:
                what = what.removesuffix("s").replace("tests", "test")
            lines.append(
                f"{name}: {n} {what} that were already there before the loop; not your task"
            )
    return lines


def judgement_line(outcome: CheckOutcome) -> str:
    """What one check said of the attempt, relative to the baseline, for the reflector."""
    v = outcome.verdict
    if v is None:
        return "" if outcome.passed else check_summary(outcome)
    parts: list[str] = [v.role]
    if v.fixed:
        parts.append(f"fixed {len(v.fixed)} ({', '.join(v.fixed[:3])})")
    if v.role == "target" and v.remaining:
        parts.append(f"{len(v.remaining)} still failing")
    if v.regressions:
        first = v.regressions[0]
        where = first.location() or first.rule or first.type
        parts.append(f"{len(v.regressions)} newly broken (first: {where})")
    if v.role == "guard" and v.preexisting:
        parts.append(f"{v.preexisting} from before the loop, not the task")
    if v.ok and len(parts) == 1:
        parts.append("ok")
    return "; ".join(parts)


def reverted_view(iteration: int, where: str, evaluation: Evaluation | None) -> dict[str, Any]:
    """The prompt's note on an attempt that was rolled back: what it caused, now undone."""
    caused: list[Diagnostic] = []
    if evaluation is not None:
        broken = [d for o in evaluation.outcomes if o.verdict for d in o.verdict.regressions]
        caused = broken or located_first(evaluation.relevant_errors())
    views = [diagnostic_view(d) for d in caused[:DIAGNOSTICS_PER_CHECK]]
    return {"iteration": iteration, "where": where, "caused": views, "has_caused": bool(views)}


def located_first(errors: Sequence[Diagnostic]) -> list[Diagnostic]:
    """Diagnostics with a file first (stable), since a file:line is where work starts."""
    return sorted(errors, key=lambda d: 0 if d.file else 1)


def diagnostic_view(d: Diagnostic) -> dict[str, str]:
    return {
        "note": "",
        "location": d.location(),
        # continuation lines indented so a multi-line message stays inside its bullet
        "message": cap(d.message.strip(), MESSAGE_CAP).replace("\n", "\n  "),
        "rule": d.rule or "",
        "type": d.type,
    }


def check_summary(outcome: CheckOutcome) -> str:
    """One line a person would say about a failing check: counts, else the exit code."""
    m = outcome.metrics
    if m.tests_total:
        failed = m.tests_failed if m.tests_failed is not None else outcome.error_count
        return f"{failed} of {m.tests_total} tests failed"
    if outcome.result.status == "error" and not outcome.errors:
        code = outcome.result.exit_code
        return "the check itself errored" + (f" (exit code {code})" if code is not None else "")
    n = outcome.error_count
    if n:
        return f"{n} error{'s' if n != 1 else ''}"
    code = outcome.result.exit_code
    return f"exit code {code}" if code is not None else "failed"


def reflection_view(record: IterationRecord) -> dict[str, Any]:
    """One Ω-window entry; text fields verbatim (a tested contract) and never None."""
    sr = record.self_reflection
    ca = sr.credit_assignment
    insights = [s for s in sr.actionable_insights or [] if s.strip()]
    lessons = [s for s in sr.lessons_learned or [] if s.strip()]
    return {
        "iteration": record.iteration,
        "reward": f"{record.reward:.2f}",
        "reflection_text": sr.reflection_text,
        "root_cause": (ca.root_cause or "") if ca else "",
        "failure_category": (ca.failure_category or "") if ca else "",
        "insights": insights,
        "has_insights": bool(insights),
        "lessons": lessons,
        "has_lessons": bool(lessons),
    }


def cap(text: str, limit: int) -> str:
    """Keep head and tail of a long text; the middle is elided with a marker."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    return f"{text[:head]}\n[... {len(text) - limit} characters elided ...]\n{text[-tail:]}"


# --- the reflector's prompts ----------------------------------------------------------------------


def reflection_prompt_context(
    *,
    task: str,
    iteration: int,
    actor_output: ActorOutput,
    evaluation: Evaluation,
    earlier: Sequence[IterationRecord],
    diff_summary: str = "",
    trajectory: str = "",
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
    errors = located_first(all_diagnostics(evaluation))
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
        "reward": f"{evaluation.reward:.2f}",
        "checks": [
            {"name": o.spec.name, "status": o.result.status, "summary": judgement_line(o)}
            for o in evaluation.outcomes
        ],
        "diagnostics": diagnostics,
        "has_diagnostics": bool(diagnostics),
        "more_diagnostics": f"... and {hidden} more errors" if hidden > 0 else "",
        "outputs": [
            {"name": o.spec.name, "output": _tail(o)}
            for o in failing_outcomes(evaluation)
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


def repair_context(previous_answer: str, problems: list[str]) -> dict[str, Any]:
    return {
        "previous_answer": cap(previous_answer.strip(), 4000) or "(empty answer)",
        "errors": problems[:10],
        "fields": ", ".join(schemas.load(schemas.RECORD)["$defs"]["self_reflection"]["properties"]),
        "categories": ", ".join(FAILURE_CATEGORIES),
    }


def _earlier_view(record: IterationRecord) -> dict[str, Any]:
    insights = [s for s in record.self_reflection.actionable_insights or [] if s.strip()]
    return {
        "iteration": record.iteration,
        "reward": f"{record.reward:.2f}",
        "reflection_text": record.self_reflection.reflection_text,
        "insights": insights,
        "has_insights": bool(insights),
    }


def _indent(text: str) -> str:
    return text.replace("\n", "\n  ")


def _tail(outcome: CheckOutcome, limit: int = 1500) -> str:
    text = (outcome.result.stderr or "").strip() or (outcome.result.stdout or "").strip()
    return text[-limit:]


def failing_outcomes(evaluation: Evaluation) -> list[CheckOutcome]:
    """Checks that hold the attempt back: failing targets and guards that got worse."""
    return [
        o
        for o in evaluation.outcomes
        if o.result.status != "skip" and not (o.verdict.ok if o.verdict else o.passed)
    ]


def all_diagnostics(evaluation: Evaluation) -> list[Diagnostic]:
    """The diagnostics that matter to the task (never a guard's failures from before)."""
    return evaluation.relevant_errors()


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
