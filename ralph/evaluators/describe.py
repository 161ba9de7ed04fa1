"""One check's result in words: the lines the actor's prompt, the reflector's prompt, the
heuristic reflection and `ralph init` all say about a check, so they say it the same way."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ralph.templates import cap

if TYPE_CHECKING:
    from ralph.evaluators.base import CheckOutcome
    from ralph.records import Diagnostic

MESSAGE_CAP = 1200


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
