"""What agents did, over many attempts, for `ralph analyze`: edits vs reads vs commands per
iteration, and whether attempts in which the agent ran the checks itself succeed more often.

Read from each record's `ralph.trace` summary (actors/trace.py), as `facts.trace_facts` keeps
it; records without one (older ralph, or an actor whose work ralph cannot see) are not counted.

- **per iteration**: the mean number of actions of each kind (edit, read, command, search,
  other) over the attempts that have a trace.
- **ran the checks**: among attempts where it is known, the share in which the agent ran one of
  the checks' programs itself; and the share of those attempts that passed, beside the share of
  the others that passed (a correlation, not a cause).
- **used the memory tools**: how many traced attempts called ralph's memory (`ralph mcp`) at
  least once, and how many of those passed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

KINDS = ("edit", "read", "command", "search", "other")


class Traced(Protocol):
    """What these statistics read of an attempt (analyze/facts.py's `IterationFacts`)."""

    @property
    def actions(self) -> dict[str, int] | None: ...
    @property
    def ran_checks(self) -> bool | None: ...
    @property
    def passed(self) -> bool: ...
    @property
    def memory_calls(self) -> int | None: ...


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def action_stats(records: Sequence[Traced]) -> dict[str, Any]:
    """The `--json` object: traced attempts, per-iteration means, checks run and success."""
    traced = [r for r in records if r.actions is not None]
    known = [r for r in traced if r.ran_checks is not None]
    ran = [r for r in known if r.ran_checks]
    not_ran = [r for r in known if not r.ran_checks]
    per_iteration = {
        kind: round(sum((r.actions or {}).get(kind, 0) for r in traced) / len(traced), 2)
        for kind in KINDS
        if traced
    }
    memory = [r for r in traced if r.memory_calls]
    return {
        "traced_attempts": len(traced),
        "memory_tool_attempts": len(memory),
        "passed_when_memory_tools": _share(sum(r.passed for r in memory), len(memory)),
        "per_iteration": per_iteration,
        "ran_checks": len(ran),
        "ran_checks_share": _share(len(ran), len(known)),
        "passed_when_ran_checks": _share(sum(r.passed for r in ran), len(ran)),
        "passed_otherwise": _share(sum(r.passed for r in not_ran), len(not_ran)),
    }


def summary_line(records: Sequence[Traced]) -> str | None:
    """One line under analyze's tables; None when no attempt has a trace."""
    stats = action_stats(records)
    if not stats["traced_attempts"]:
        return None
    means = ", ".join(f"{v:g} {k}" for k, v in stats["per_iteration"].items() if v)
    line = f"agent actions per iteration ({stats['traced_attempts']} traced): {means or 'none'}"
    if stats["ran_checks_share"] is not None:
        line += "; " + _ran_checks_text(stats)
    if stats["memory_tool_attempts"]:
        line += f"; called ralph's memory tools in {stats['memory_tool_attempts']}"
    return line


def _ran_checks_text(stats: dict[str, Any]) -> str:
    """Whether attempts in which the agent ran the checks itself passed more often, said only
    of the groups that have attempts: `ran the checks itself in 50% of attempts; 100% of
    those passed, 0% of the others`."""
    share, ran, others = (
        stats["ran_checks_share"],
        stats["passed_when_ran_checks"],
        stats["passed_otherwise"],
    )
    if ran is None:
        return f"never ran the checks itself; {others:.0%} of its attempts passed"
    if others is None:
        return f"ran the checks itself in every attempt; {ran:.0%} of them passed"
    return (
        f"ran the checks itself in {share:.0%} of attempts; {ran:.0%} of those passed, "
        f"{others:.0%} of the others"
    )
