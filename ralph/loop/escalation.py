"""The escalation exit: an agent that finds the task cannot be done as asked (a test contradicts
the task, a file it needs is missing) may say so instead of gaming the checks.

The prompt offers it (`actor.mustache`, unless `--no-escalate`); the agent ends its final
message (a `cmd:` agent: its output) with a line `RALPH-ESCALATE: <reason>`. The attempt is
judged and remembered like any other, its record keeping the reason (`ralph.escalation`); when
its checks do not pass, the loop stops for a person (`needs_human`, exit 5) with the reason and
the evidence. Only the checks decide success: an escalation never counts as one.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ralph.records import IterationRecord

MARK = "RALPH-ESCALATE:"
# the line as an agent may write it: plain, in backticks or bold, quoted or listed
LINE = re.compile(r"^[\s>*`_-]*RALPH-ESCALATE:[ \t]*(?P<reason>.*?)[\s*`_]*$", re.MULTILINE)
MAX_REASON_CHARS = 500
STATUS = "needs_human"


def escalation_of(message: str | None) -> str | None:
    """The reason of the last `RALPH-ESCALATE:` line of the agent's final message; None when it
    has none (an empty reason is still an escalation)."""
    if not message or MARK not in message:
        return None
    found = list(LINE.finditer(message))
    if not found:
        return None
    reason = " ".join(found[-1].group("reason").split())[:MAX_REASON_CHARS]
    return reason or "no reason given"


def evidence(record: IterationRecord) -> str:
    """What a person looks at first: the attempt, its reward and the checks that still fail."""
    results = record.evaluator_output.results or []
    failing = [f"{r.tool} {r.status}" for r in results if r.status != "pass"]
    checks = f"; {', '.join(failing)}" if failing else ""
    return f"iteration {record.iteration}, reward {record.reward:.2f}{checks}"


def escalated(record: IterationRecord) -> str | None:
    """The stop's reason when `record`'s attempt asked for a person: its reason and evidence."""
    reason = record.ralph.escalation if record.ralph is not None else None
    if reason is None:
        return None
    return f"the agent asks for a person: {reason} (evidence: {evidence(record)})"
