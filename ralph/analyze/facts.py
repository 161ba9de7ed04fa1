"""The few facts `ralph analyze` uses of a record and of a loop's state, read straight from
the parsed JSON: no schema validation on this path (a file is validated, for its reasons, only
when extraction fails; see cache.py), and a dozen fields of each record rather than all."""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any

from ralph.memory.store import STATUSES
from ralph.records import (
    MAX_COST_USD,
    MAX_PHASE_MS,
    MAX_TOKENS,
    known_sum,
    shown_reward,
)


@dataclass(slots=True)
class IterationFacts:
    """What analyze uses of one record."""

    iteration: int
    timestamp: str
    passed: bool
    reward: float
    error_count: int
    category: str | None
    root_cause: str | None
    cause: str  # root_cause normalised ("" for none): how recurring causes are matched
    reflection: str
    source: str | None
    quality_flags: list[str]
    in_context: list[int]
    tokens: int | None  # None: no count known (a `cmd:` actor's)
    cost_usd: float | None
    duration_ms: int
    task: str | None
    lessons_used: int
    improved: bool | None
    actions: dict[str, int] | None = None  # the agent's actions by kind (trace_facts)
    ran_checks: bool | None = None  # whether the agent ran the checks itself
    regressions: int | None = None  # what worked before the loop and broke in this attempt
    memory_calls: int | None = None  # calls of ralph's memory tools (`ralph mcp`) in the trace


@dataclass(slots=True)
class StateFacts:
    """What analyze uses of a loop's state file: status, stop reason, baseline, task."""

    task: str
    status: str
    stop_reason: str | None
    created_at: str
    baseline_reward: float | None
    baseline_passed: bool | None
    baseline_error_count: int | None
    pid: int | None
    host: str | None


TOKEN_FIELDS = (
    "actor_tokens_in",
    "actor_tokens_out",
    "reflector_tokens_in",
    "reflector_tokens_out",
    "evaluator_tokens_in",
    "evaluator_tokens_out",
)
NO_TOKENS = [None] * len(TOKEN_FIELDS)
RECORD_FIELDS = tuple(IterationFacts.__slots__)
STATE_FIELDS = tuple(StateFacts.__slots__)
# A cache row is the facts' fields as a JSON list, in this order.
record_values = operator.attrgetter(*RECORD_FIELDS)
state_values = operator.attrgetter(*STATE_FIELDS)


@dataclass
class LoopFiles:
    """One loop's extracted records, in iteration order, and its invalid record files."""

    records: list[IterationFacts] = field(default_factory=list)
    invalid: list[tuple[str, str]] = field(default_factory=list)


# `type(x) is` rather than isinstance: json.loads makes exactly these types, and a bool (an int
# subclass) is refused without a second test; these run for every field of every record.
def _number(value: Any, what: str) -> float:
    kind = type(value)
    if kind is not float and kind is not int:
        raise ValueError(f"{what} is not a number")
    return float(value)


def _count(total: Any, stored: int) -> int:
    """`ralph.error_count` (every diagnostic, when the record keeps fewer), else those stored."""
    return total if type(total) is int else stored


def _ints(value: Any, what: str) -> list[int]:
    if value is None:
        return []
    if type(value) is not list:
        raise ValueError(f"{what} is not a list of integers")
    for item in value:
        if type(item) is not int:
            raise ValueError(f"{what} is not a list of integers")
    return value


def trace_facts(summary: Any) -> dict[str, Any]:
    """The record's `ralph.trace` as analyze's facts: actions by kind, ran_checks."""
    if not isinstance(summary, dict):
        return {}
    # here: a run over records without traces skips it
    from ralph.actors.trace import memory_tool, tool_kind

    kinds: dict[str, int] = {}
    memory = 0
    actions = summary.get("actions")
    for tool, count in (actions if isinstance(actions, dict) else {}).items():
        if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
            kind = tool_kind(str(tool))
            kinds[kind] = kinds.get(kind, 0) + count
            memory += count if memory_tool(str(tool)) else 0
    ran = summary.get("ran_checks")
    return {
        "actions": kinds,
        "ran_checks": ran if isinstance(ran, bool) else None,
        "memory_calls": memory,
    }


def normalise_root_cause(text: str) -> str:
    """Lowercase, whitespace collapsed, trailing punctuation stripped: the same cause twice."""
    return " ".join(text.split()).lower().rstrip(".,;:!? ")


def record_facts(data: Any, loop_id: str, iteration: int) -> IterationFacts:
    """The analysed fields of a parsed record; ValueError/KeyError/TypeError when malformed."""
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    if data["loop_id"] != loop_id:
        raise ValueError(f"loop_id {data['loop_id']!r} does not match its folder {loop_id}")
    if data["iteration"] != iteration:
        raise ValueError(f"iteration {data['iteration']!r} does not match its file name")
    if not isinstance(data["actor_output"], dict):
        raise ValueError("actor_output is not an object")
    ev, sr, mm = data["evaluator_output"], data["self_reflection"], data["memory_metadata"]
    if not isinstance(ev["passed"], bool):
        raise ValueError("evaluator_output.passed is not a boolean")
    raw_reward = ev.get("reward_signal")
    reward = 0.0 if raw_reward is None else _number(raw_reward, "reward_signal")
    if not 0.0 <= reward <= 1.0:
        raise ValueError("reward_signal is outside [0, 1]")
    reward = shown_reward(reward, ev["passed"])
    errors = ev.get("errors") or []
    text, credit = sr["reflection_text"], sr.get("credit_assignment") or {}
    if not isinstance(text, str) or not isinstance(credit, dict):
        raise ValueError("self_reflection is malformed")
    in_context = mm.get("reflections_in_context")
    if in_context is None:
        in_context = data.get("previous_reflections_used")
    ext = data.get("ralph") or {}
    usage, flags = ext.get("usage") or {}, ext.get("quality_flags") or []
    if not isinstance(flags, list):
        raise ValueError("ralph.quality_flags is not a list")
    counts = [usage.get(key) for key in TOKEN_FIELDS]
    # TypeError on a non-number: the file is then validated; a saturated sum is no count
    tokens = known_sum(counts) if counts != NO_TOKENS else None
    if tokens is not None and not 0 <= tokens < MAX_TOKENS:
        tokens = None
    cost = usage.get("cost_usd")
    if cost is not None and not 0 <= _number(cost, "cost_usd") <= MAX_COST_USD:
        cost = None
    duration = sum(ms for ms in (ext.get("duration_ms") or {}).values() if 0 <= ms <= MAX_PHASE_MS)
    task = data.get("task_description")
    lessons = ext.get("lessons_used") or []
    improved = (data.get("performance_delta") or {}).get("is_improvement")
    root_cause = credit.get("root_cause") or None
    return IterationFacts(  # positional, in RECORD_FIELDS order: this runs for every record
        iteration,
        str(data["timestamp"]),
        ev["passed"],
        reward,
        _count(ext.get("error_count"), len(errors)),
        credit.get("failure_category"),
        root_cause,
        normalise_root_cause(root_cause) if root_cause else "",
        (text.strip().splitlines() or [""])[0],  # whole: CSV never cuts; a screen clips it
        ext.get("reflection_source"),
        [str(f) for f in flags] if flags else [],
        _ints(in_context, "reflections_in_context"),
        None if tokens is None else int(tokens),
        None if cost is None else _number(cost, "cost_usd"),
        int(duration),
        task if isinstance(task, str) else None,
        len(lessons) if isinstance(lessons, list) else 0,
        improved if isinstance(improved, bool) else None,
        **trace_facts(ext.get("trace")),
        regressions=_regressions(ext.get("regressions")),
    )


def _regressions(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


def state_facts(data: Any) -> StateFacts:
    """The analysed fields of a parsed state file; ValueError/KeyError/TypeError when malformed."""
    if not isinstance(data, dict) or data["status"] not in STATUSES:
        raise ValueError("not a loop state")
    baseline = data.get("baseline") or {}
    reward = baseline.get("reward")
    errors = baseline.get("error_count")
    passed = baseline.get("passed")
    pid, host = data.get("pid"), data.get("host")
    return StateFacts(
        task=str(data["task"]),
        status=data["status"],
        stop_reason=data.get("stop_reason"),
        created_at=str(data["created_at"]),
        baseline_reward=None if reward is None else _number(reward, "baseline.reward"),
        baseline_passed=passed if isinstance(passed, bool) else None,
        baseline_error_count=errors if isinstance(errors, int) else None,
        pid=pid if isinstance(pid, int) else None,
        host=host if isinstance(host, str) else None,
    )
