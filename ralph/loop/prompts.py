"""The actor prompt's context: what `actor.mustache` reads (docs/architecture.md, Prompts).

What fails is listed target failures first, then only what the attempt broke in a guard, then one
line per guard for what it already failed before the loop. A check's list is cut at
`DIAGNOSTICS_PER_CHECK`; when it is, the failures whose file or test name shares a word with the
task or with a failing module (a file outside the tests that a failure points at) come first,
so the most direct unit test is not the one left out; otherwise the order stays."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ralph.evaluators.describe import check_summary, diagnostic_view, located_first
from ralph.glyphs import plural
from ralph.records import Diagnostic, IterationRecord
from ralph.templates import cap, fence

if TYPE_CHECKING:
    from ralph.evaluators.base import CheckOutcome, Evaluation

DIAGNOSTICS_PER_CHECK = 8
REVERTED_DIFF_TOKENS = 1500  # the reverted attempt's diff in the next prompt
CHARS_PER_TOKEN = 4  # as templates.estimate_tokens counts
WORD = re.compile(r"[a-z0-9]+")
# words every test file, test id or task has: sharing them says nothing
COMMON_WORDS = frozenset(
    {"test", "tests", "testing", "py", "src", "lib", "init", "main", "the", "and", "for", "with"}
    | {"fix", "fixes", "failing", "fails", "failed", "failure", "make", "pass", "passes", "error"}
)


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
    protected_edits: Sequence[str] = (),
    memory_tools: bool = False,
    escalate: bool = False,
) -> dict[str, Any]:
    """Everything actor.mustache reads; strings only (no None), so nothing renders as 'None'."""
    topic = topic_words(task, evaluation) if evaluation is not None else frozenset()
    failing = failing_checks(evaluation, topic=topic) if evaluation is not None else []
    preexisting = preexisting_lines(evaluation) if evaluation is not None else []
    window = [reflection_view(r) for r in sorted(reflections, key=lambda r: r.iteration)]
    lesson_views = [
        {
            "text": str(item.get("text", "")),
            "source": str(item.get("source", "")),
            "failure": str(item.get("failure", "")),  # which current failure it is for
        }
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
        "lessons_fence": fence(
            *(v[key] for v in lesson_views for key in ("text", "source", "failure"))
        ),
        "has_lessons": bool(lesson_views),
        "pivot": bool(pivot),
        "unmatched_edits": edits,
        "has_unmatched_edits": bool(edits),
        # the last attempt's edits of the tests, put back before the checks (loop/protect.py)
        "protected_edits": list(protected_edits),
        "has_protected_edits": bool(protected_edits),
        # the agent can call ralph's memory itself (`ralph mcp`, wired by assembly.build_parts)
        "memory_tools": bool(memory_tools),
        # the escalation exit is offered (loop/escalation.py; off with --no-escalate)
        "escalate": bool(escalate),
    }


def failing_checks(
    evaluation: Evaluation,
    per_check: int = DIAGNOSTICS_PER_CHECK,
    *,
    topic: frozenset[str] = frozenset(),
) -> list[Any]:
    """What the agent must work on: the targets that fail (their failures, located ones first,
    then what the attempt broke), then the guards that got worse (only the new failures).
    What a guard already failed before the loop is never itemised (`preexisting_lines`).
    A list cut at `per_check` shows the failures about `topic` (`topic_words`) first."""
    targets: list[dict[str, Any]] = []
    guards: list[dict[str, Any]] = []
    checks = evaluation.baseline.checks if evaluation.baseline else {}
    for outcome in evaluation.failing():
        v = outcome.verdict
        base = checks.get(outcome.spec.name)
        before = set(base.passing or ()) if base is not None else set()
        if v is None:
            summary = check_summary(outcome)
            entry = _failing_entry(outcome, outcome.errors, [], summary, None, per_check, topic)
            targets.append(entry)
        elif v.role == "target":
            summary = check_summary(outcome)
            if v.fixed:
                summary += f"; {len(v.fixed)} fixed since the start"
            entry = _failing_entry(
                outcome, v.remaining, v.regressions, summary, before, per_check, topic
            )
            targets.append(entry)
        else:
            n = len(v.regressions)
            summary = f"{plural(n, 'new failure')} your change caused"
            guards.append(
                _failing_entry(outcome, [], v.regressions, summary, before, per_check, topic)
            )
    return targets + guards


def _failing_entry(
    outcome: CheckOutcome,
    remaining: Sequence[Diagnostic],
    regressions: Sequence[Diagnostic],
    summary: str,
    passed_before: set[str] | None = None,
    per_check: int = DIAGNOSTICS_PER_CHECK,
    topic: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    passed_before = passed_before or set()
    listed = [(d, "") for d in located_first(remaining)]
    for d in located_first(regressions):
        note = "this passed before your change" if d.rule in passed_before else (
            "new: not there before your change"
        )  # fmt: skip
        listed.append((d, note))
    if len(listed) > per_check and topic:  # stable: about the topic first, else as they were
        listed.sort(key=lambda item: not topic & _words(item[0].file, item[0].rule))
    views = [{**diagnostic_view(d), "note": note} for d, note in listed]
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


def topic_words(task: str, evaluation: Evaluation) -> frozenset[str]:
    """What the attempt is about, as words: the task's, and the names of the failing modules
    (the files outside the tests that the failures point at: `src/pkg/keys.py` gives `keys`)."""
    modules = [
        Path(d.file).stem
        for outcome in evaluation.failing()
        for d in _to_fix(outcome)
        if d.file and not _is_test_file(d.file)
    ]
    return _words(task, *modules)


def _to_fix(outcome: CheckOutcome) -> Sequence[Diagnostic]:
    """A failing check's failures the prompt lists: never what a guard had before the loop."""
    v = outcome.verdict
    if v is None:
        return outcome.errors
    return [*v.remaining, *v.regressions] if v.role == "target" else v.regressions


def _words(*texts: str | None) -> frozenset[str]:
    found = (WORD.findall(text.lower()) for text in texts if text)
    return frozenset(w for words in found for w in words if len(w) > 2) - COMMON_WORDS


def _is_test_file(path: str) -> bool:
    name, parts = Path(path).name, Path(path).parts[:-1]
    return name.startswith("test") or name.endswith("_test.py") or "tests" in parts


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
            what = plural(n, "failing test" if outcome.spec.parser == "pytest" else "error")
            were = "was" if n == 1 else "were"  # the verb agrees with the count
            lines.append(f"{name}: {what} that {were} already there before the loop; not your task")
    return lines


def reverted_view(
    iteration: int,
    where: str,
    evaluation: Evaluation | None,
    record: IterationRecord | None = None,
) -> dict[str, Any]:
    """The prompt's note on an attempt that was rolled back: what it caused, now undone, and
    the change itself (its record's diffs, bounded), so the next attempt does not repeat it."""
    caused: list[Diagnostic] = []
    if evaluation is not None:
        broken = [d for o in evaluation.outcomes if o.verdict for d in o.verdict.regressions]
        caused = broken or located_first(evaluation.relevant_errors())
    views = [diagnostic_view(d) for d in caused[:DIAGNOSTICS_PER_CHECK]]
    diff = reverted_diff(record) if record is not None else ""
    return {
        "iteration": iteration,
        "where": where,
        "caused": views,
        "has_caused": bool(views),
        "diff": diff,
        "has_diff": bool(diff),
    }


def reverted_diff(record: IterationRecord) -> str:
    """The reverted attempt's diff, from its record (already redacted and capped per file),
    cut to `REVERTED_DIFF_TOKENS` so one large change cannot crowd out the rest of the prompt."""
    actions = record.actor_output.actions
    diffs = [a.changes.diff.strip("\n") for a in actions if a.changes and a.changes.diff]
    return cap("\n".join(d for d in diffs if d), REVERTED_DIFF_TOKENS * CHARS_PER_TOKEN)


def reflection_view(record: IterationRecord) -> dict[str, Any]:
    """One Ω-window entry; text fields verbatim (a tested contract) and never None."""
    sr = record.self_reflection
    ca = sr.credit_assignment
    insights = [s for s in sr.actionable_insights or [] if s.strip()]
    lessons = [s for s in sr.lessons_learned or [] if s.strip()]
    root_cause = (ca.root_cause or "") if ca else ""
    return {
        "iteration": record.iteration,
        "reward": f"{record.reward:.2f}",
        # notes from a past attempt are quoted: no line of theirs can end the quote
        "fence": fence(sr.reflection_text, root_cause, *insights, *lessons),
        "reflection_text": sr.reflection_text,
        "root_cause": root_cause,
        "failure_category": (ca.failure_category or "") if ca else "",
        "insights": insights,
        "has_insights": bool(insights),
        "lessons": lessons,
        "has_lessons": bool(lessons),
    }
