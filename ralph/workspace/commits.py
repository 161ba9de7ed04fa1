"""What an iteration's commit says, so `git log` of a loop branch reads as the loop went.

Subject: `ralph(<short id>): iteration N — <first check holding it back>`, and what the
attempt broke (`broke what worked (pytest: 3 → 12 failing, 9 new)`); body: the reflection's
root cause (what the attempt got wrong, or that it passed) and the reward with its change from
the attempt before (the baseline for the first), negative when worse, wrapped for git.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from ralph.ids import short_id
from ralph.records import IterationRecord

BODY_WIDTH = 72
ROOT_CAUSE_CHARS = 600


def checks_status(record: IterationRecord, holding: Sequence[str]) -> str:
    """`tests pass`, `tests fail`, `tests fail (+1 more failing)`: the first check that holds
    the attempt back (`holding`: failing targets and guards that got worse, as
    `Evaluation.failing` names them), a target before a guard, and how many others do. A guard
    that failed before the loop and is no worse is not one of them."""
    results = record.evaluator_output.results or []
    roles = (record.ralph.check_roles if record.ralph else None) or {}
    if record.evaluator_output.passed:
        if any(r.status != "pass" for r in results):  # guards no worse than before the loop
            return "targets pass"
        return f"{results[0].tool} pass" if len(results) == 1 else "checks pass"
    failing = [r for r in results if r.tool in holding]
    failing.sort(key=lambda r: roles.get(r.tool) != "target")
    if not failing:
        return "failed"
    first = failing[0]
    more = f" (+{len(failing) - 1} more failing)" if len(failing) > 1 else ""
    return f"{first.tool} {first.status}{more}"


def iteration_message(
    record: IterationRecord, *, holding: Sequence[str], harm: str | None = None
) -> str:
    """The commit message of `record`: `holding` names the checks that hold it back, `harm`
    says what it broke (`evaluators/describe.harm_text`), None when nothing."""
    status = checks_status(record, holding)
    if harm:
        status = f"{status}, {harm}"
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
