"""What an iteration's commit says, so `git log` of a loop branch reads as the loop went.

Subject: `ralph(<short id>): iteration N — <first check status>`, and what the attempt broke
(`3 → 12 failing, 9 new`); body: the reflection's root cause (what the attempt got wrong, or
that it passed) and the reward with its change from the attempt before (the baseline for the
first), negative when worse, wrapped for git.
"""

from __future__ import annotations

import textwrap

from ralph.ids import short_id
from ralph.records import IterationRecord

BODY_WIDTH = 72
ROOT_CAUSE_CHARS = 600


def checks_status(record: IterationRecord) -> str:
    """`tests pass`, `tests fail`, `tests fail (+1 more failing)`: the first failing check, a
    target before a guard (the first check when none fails), and how many others fail."""
    results = record.evaluator_output.results or []
    roles = (record.ralph.check_roles if record.ralph else None) or {}
    failing = [r for r in results if r.status != "pass"]
    failing.sort(key=lambda r: roles.get(r.tool) != "target")
    if record.evaluator_output.passed:
        if failing:  # guards that failed before the loop, and still only as much
            return "targets pass"
        return f"{results[0].tool} pass" if len(results) == 1 else "checks pass"
    if not failing:
        return "failed"
    first = failing[0]
    more = f" (+{len(failing) - 1} more failing)" if len(failing) > 1 else ""
    return f"{first.tool} {first.status}{more}"


def harm_text(before: int, now: int, new: int) -> str:
    """What an attempt broke, in the words every screen uses: `3 → 12 failing, 9 new`."""
    return f"{before} → {now} failing, {new} new"


def record_harm(record: IterationRecord, baseline_errors: int | None) -> str | None:
    """`harm_text` of a record against the baseline's error count; None when it broke
    nothing."""
    new = record.ralph.regressions if record.ralph else None
    if not new or baseline_errors is None:
        return None
    return harm_text(baseline_errors, record.error_count, new)


def iteration_message(record: IterationRecord, baseline_errors: int | None = None) -> str:
    """The commit message of `record`; with the baseline's error count, what it broke."""
    status = checks_status(record)
    harm = record_harm(record, baseline_errors)
    if harm:
        status = f"{status}: {harm}"
    subject = f"ralph({short_id(record.loop_id)}): iteration {record.iteration} — {status}"
    credit = record.self_reflection.credit_assignment
    cause = credit.root_cause if credit and credit.root_cause else None
    paragraphs = []
    if cause:
        paragraphs.append(_paragraph(f"Root cause: {cause}"))
    elif record.self_reflection.reflection_text.strip():  # a success's note, or no root cause
        paragraphs.append(_paragraph(record.self_reflection.reflection_text))
    delta = record.performance_delta
    change = ""
    if delta is not None and delta.reward_change is not None:
        before = record.reward - delta.reward_change
        was = "the baseline" if record.iteration == 1 else f"iteration {record.iteration - 1}"
        change = f" ({delta.reward_change:+.2f} from {was}'s {before:.2f})"
    paragraphs.append(f"Reward: {record.reward:.2f}{change}\nLoop: {record.loop_id}")
    return subject + "\n\n" + "\n\n".join(paragraphs)


def _paragraph(text: str) -> str:
    flat = " ".join(text.split())
    if len(flat) > ROOT_CAUSE_CHARS:
        flat = flat[: ROOT_CAUSE_CHARS - 1].rsplit(" ", 1)[0] + "…"
    return textwrap.fill(flat, BODY_WIDTH)
