"""The iteration record as dataclasses with a lossless JSON round-trip (the files: README,
Memory on disk; docs/architecture.md, Files on disk).

Field names are the JSON keys, so the aiwg reflection-memory fields stay exactly as specified;
ralph's own additions live in `RalphExtension` under the `ralph` key. Optional fields are None
and are left out of the JSON, so a record read and written again is byte-for-byte the same data.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
import types
import typing
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, NamedTuple, TypeVar

from ralph.glyphs import plural

SCHEMA_VERSION = "1.0"

ActionType = Literal[
    "code_modification",
    "file_creation",
    "file_deletion",
    "test_execution",
    "command_execution",
    "api_call",
    "other",
]
VerificationType = Literal[
    "unit_tests",
    "integration_tests",
    "type_check",
    "lint",
    "compilation",
    "heuristic",
    "external_api",
    "manual_review",
    "combined",
]
CheckStatus = Literal["pass", "fail", "error", "skip"]
ErrorType = Literal[
    "syntax_error",
    "type_error",
    "test_failure",
    "lint_error",
    "runtime_error",
    "logic_error",
    "timeout",
    "other",
]
Severity = Literal["error", "warning", "info"]
FailureCategory = Literal[
    "hallucination",
    "inefficient_planning",
    "incorrect_assumption",
    "incomplete_implementation",
    "edge_case_miss",
    "integration_error",
    "configuration_error",
    "logic_error",
    "other",
]
WindowPolicy = Literal["fifo", "recency", "relevance_weighted"]
ReflectionSource = Literal["llm", "repaired", "heuristic", "success"]

IMPORT_FAILURE = re.compile(r"\s*(?:ModuleNotFoundError|ImportError)\b")
FAILURE_CATEGORIES: tuple[str, ...] = typing.get_args(FailureCategory)
ERROR_TYPES: tuple[str, ...] = typing.get_args(ErrorType)


BEST_FAILING_REWARD = 0.99  # anything that is not success scores (and shows) at most this
DIAGNOSTICS_PER_CHECK = 50  # diagnostics a record keeps per check (338 mypy errors: 110 KB)
# What a reader believes of a record (the schema bounds none of these): beyond, a value is a
# corrupt or forged record's, read as unknown so that no sum, chart or date is driven by it.
MAX_PHASE_MS = 366 * 24 * 3600 * 1000  # a phase of an attempt that took more than a year
MAX_COST_USD = 1e9
MAX_TOKENS = 10**15


# A record's rationale when the actor gave no account of its own (`loop/iteration.rationale`):
# the schema needs one, but it says nothing an agent did, so no lesson and no commit quotes it.
NO_SUMMARY = re.compile(r"^The actor .* without a summary of its own\.$")


def no_summary(status: str, duration_ms: int) -> str:
    """The stand-in rationale: `status` is "exited 0" or "timed out"."""
    return f"The actor {status} after {duration_ms} ms without a summary of its own."


def actor_said(rationale: str | None) -> str:
    """A rationale as the actor's own words; "" for the stand-in (also of older records)."""
    text = (rationale or "").strip()
    return "" if NO_SUMMARY.match(text) else text


# a line that only announces what follows: "Summary of this attempt:", "## Changes", "**Done**"
_HEADER = re.compile(r"^(#+\s.*|\*\*[^*]+\*\*:?|[^.!?]{0,80}:)$")
_BULLET = re.compile(r"^(?:[-*+•]|\d+[.)])\s+")


def gist(said: str) -> str:
    """An agent's account as one line: its first line of content, headers skipped ("Summary of
    this attempt:" says nothing), or, where the content opens with a list, the list's items
    joined with "; "; so a lesson, a success note and a commit body quote what it did, not
    how it titled it. "" when nothing but headers is there."""
    lines = [line.strip() for line in said.splitlines() if line.strip()]
    content = [line for line in lines if not _HEADER.match(line)]
    if not content or not _BULLET.match(content[0]):
        return content[0] if content else ""
    items = itertools.takewhile(lambda line: _BULLET.match(line) is not None, content)
    return "; ".join(_BULLET.sub("", line).rstrip(";. ") for line in items)


def utc_now() -> str:
    """An RFC 3339 timestamp, the format the schema's date-time expects."""
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass
class Changes:
    additions: int | None = None
    deletions: int | None = None
    diff: str | None = None


@dataclass
class Action:
    type: ActionType
    description: str
    file_path: str | None = None
    changes: Changes | None = None
    command: str | None = None
    timestamp: str | None = None


@dataclass
class TotalChanges:
    files_changed: int = 0
    lines_added: int = 0
    lines_deleted: int = 0


@dataclass
class ActorOutput:
    actions: list[Action]
    rationale: str
    strategy: str | None = None
    files_modified: list[str] | None = None
    total_changes: TotalChanges | None = None


@dataclass
class CheckResult:
    tool: str
    status: CheckStatus
    exit_code: int | None = None
    stdout: str | None = None
    stderr: str | None = None
    duration_ms: int | None = None


@dataclass
class Diagnostic:
    """One structured error found by a check (the schema's `errors` item)."""

    type: ErrorType
    message: str
    file: str | None = None
    line: int | None = None
    column: int | None = None
    stack_trace: str | None = None
    severity: Severity | None = None
    rule: str | None = None

    def location(self) -> str:
        """`file:line` (or what of it is known), the form editors and people both jump to."""
        if not self.file:
            return ""
        return f"{self.file}:{self.line}" if self.line is not None else self.file

    def is_import_failure(self) -> bool:
        """A test module or conftest that could not even be imported (`ModuleNotFoundError`,
        `ImportError` while collecting): usually the environment (a generated file, a package
        not installed), not the code a task is about. A test that fails is never one."""
        return (
            self.type == "runtime_error"
            and not self.rule
            and bool(IMPORT_FAILURE.match(self.message))
        )


@dataclass
class Metrics:
    tests_passed: int | None = None
    tests_failed: int | None = None
    tests_total: int | None = None
    coverage_percentage: float | None = None
    lint_errors: int | None = None
    lint_warnings: int | None = None
    type_errors: int | None = None


@dataclass
class EvaluatorOutput:
    passed: bool
    verification_type: VerificationType
    results: list[CheckResult] | None = None
    errors: list[Diagnostic] | None = None
    reward_signal: float | None = None
    metrics: Metrics | None = None


@dataclass
class CreditAssignment:
    failing_action_indices: list[int] | None = None
    root_cause: str | None = None
    failure_category: FailureCategory | None = None


@dataclass
class SelfReflection:
    reflection_text: str
    credit_assignment: CreditAssignment | None = None
    causal_reasoning: str | None = None
    actionable_insights: list[str] | None = None
    lessons_learned: list[str] | None = None
    confidence: float | None = None
    related_reflections: list[int] | None = None


@dataclass
class MemoryMetadata:
    omega_capacity: int
    current_memory_size: int
    reflections_in_context: list[int] | None = None
    window_policy: WindowPolicy | None = None
    total_reflections_generated: int | None = None


@dataclass
class PerformanceDelta:
    reward_change: float | None = None
    error_count_change: int | None = None
    is_improvement: bool | None = None


@dataclass
class Usage:
    """Tokens and money; None when unknown (a `cmd:` actor's tokens, an unpriced model's
    cost), never 0 for unknown. The actor's tokens and the cost are written as null then."""

    actor_tokens_in: int | None = field(default=None, metadata={"nullable": True})
    actor_tokens_out: int | None = field(default=None, metadata={"nullable": True})
    reflector_tokens_in: int | None = None
    reflector_tokens_out: int | None = None
    cost_usd: float | None = field(default=None, metadata={"nullable": True})
    # the checks' model calls (a judge's) in this iteration's evaluation; their cost is in
    # `cost_usd`; left out when no call reported tokens
    evaluator_tokens_in: int | None = None
    evaluator_tokens_out: int | None = None

    def tokens(self) -> int | None:
        """The known counts summed; None when none is known."""
        return known_sum(self.tokens_in_out())

    def tokens_in_out(self) -> tuple[int | None, int | None]:
        """Tokens in and out over the actor, the checks and the reflector (`known_sum`)."""
        ins = (self.actor_tokens_in, self.reflector_tokens_in, self.evaluator_tokens_in)
        outs = (self.actor_tokens_out, self.reflector_tokens_out, self.evaluator_tokens_out)
        return known_sum(ins), known_sum(outs)


class ModelCall(NamedTuple):
    """What one model call used, as its provider reported it (None: not reported): a judge's
    calls travel with its check's outcome (evaluators/base.CheckOutcome.calls)."""

    tokens_in: int | None
    tokens_out: int | None
    cost_usd: float | None


MAX_TOKENS = 10**15  # a token sum saturates here: no model reads a quadrillion tokens
MAX_COST_USD = 1e9  # a money sum saturates here: past any budget, far from float overflow


def known_sum(counts: Iterable[int | None]) -> int | None:
    """Token counts summed where reported; None when none was (unknown stays unknown, never 0).
    The sum saturates at `MAX_TOKENS`, so an absurd count cannot grow without bound."""
    known = [n for n in counts if n is not None]
    return min(sum(known), MAX_TOKENS) if known else None


def sum_costs(*parts: float | None) -> float | None:
    """The one rule for adding money: a sum with an unknown part (None) is unknown, never the
    sum of the known parts and never 0 (README). A call that was never made is no part.

    A part that is not a finite amount >= 0 is unknown too; the sum saturates at
    `MAX_COST_USD` (an agent reporting $1.7e308 twice must not make the loop's total infinite,
    which no state file can hold): such a loop has spent more than any budget, and stops."""
    known = [part for part in parts if part is not None and math.isfinite(part) and part >= 0]
    if len(known) != len(parts):
        return None
    return round(min(sum(min(part, MAX_COST_USD) for part in known), MAX_COST_USD), 6)


@dataclass
class TraceSummary:
    """What the agent did in the attempt, from its trajectory (NNN/trace.jsonl, ralph/trace.py)."""

    steps: int = 0
    dropped: int = 0
    unparsed: int = 0
    actions: dict[str, int] = field(default_factory=dict)  # tool -> calls
    files_read: list[str] = field(default_factory=list)
    files_edited: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    ran_checks: bool | None = None  # did the agent run one of the checks itself; None: unknown


@dataclass
class CheckTally:  # a check's verdict in numbers, for `reflections show`: a guard held if none new
    errors: int = 0  # its diagnostics, of which the record keeps DIAGNOSTICS_PER_CHECK
    new: int = 0  # failing now, not before the loop (the rest are old)
    fixed: int = 0  # target failures of the baseline gone


@dataclass
class FailureScope:
    """One failure an attempt had to work on (a target's remaining failure or a regression), the
    failure its lessons are for: the check, the test id or rule (else a fingerprint of the
    message, `m:` and 12 hex digits), and the file."""

    check: str
    id: str
    file: str | None = None

    @classmethod
    def of(cls, check: str, d: Diagnostic) -> FailureScope:
        return cls(check, d.rule or message_id(d.message), d.file)

    @property
    def key(self) -> str:
        """What two loops' failures are compared by: the id and the file (a check's name is
        the user's choice, and the same test failing under two names is the same failure)."""
        return scope_key(self.id, self.file)

    def label(self) -> str:
        """How a prompt or a listing names it: `tests: tests/t.py::test_x`."""
        where = self.id if not self.id.startswith("m:") else (self.file or self.id)
        return f"{self.check}: {where}"


def scope_key(failure_id: str, file: str | None) -> str:
    return f"{failure_id}|{file or ''}"


def message_id(message: str) -> str:
    """A fingerprint of a message without a rule or test id: its first line, numbers and
    addresses masked, so the same failure on another run has the same id."""
    import hashlib  # here, not at import: `ralph check` starts its checks before this is needed

    first = (message.strip().splitlines() or [""])[0].lower()[:300]
    masked = re.sub(r"0x[0-9a-f]+|\d+", "0", first)
    return "m:" + hashlib.sha256(masked.encode("utf-8", "replace")).hexdigest()[:12]


@dataclass
class RalphExtension:
    schema_version: str = SCHEMA_VERSION
    reflection_source: ReflectionSource = "heuristic"
    quality_flags: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    duration_ms: dict[str, int] = field(default_factory=dict)
    prompt_sha256: str | None = None
    git_commit: str | None = None
    lessons_used: list[str] = field(default_factory=list)
    error_fingerprint: str | None = None
    check_roles: dict[str, str] | None = None  # target or guard, per check (judging.py)
    check_verdicts: dict[str, CheckTally] | None = None  # each check's verdict, in numbers
    fixed: int | None = None  # target failures of the baseline gone in this attempt's tree
    remaining: int | None = None  # target failures left
    regressions: int | None = None  # what worked before the loop and fails now
    obsolete: bool | None = None  # marked by `ralph reflections obsolete`: never injected again
    trace: TraceSummary | None = None  # the agent's trajectory in short (ralph/trace.py)
    # every diagnostic the checks found, when `evaluator_output.errors` keeps fewer (at most
    # DIAGNOSTICS_PER_CHECK per check, so records stay small enough to commit)
    error_count: int | None = None
    # test files (and pytest configuration) the attempt edited, put back before the checks ran
    # (loop/protect.py): the edit did not count; the diff is in NNN/test-edits.diff
    protected_test_edits: list[str] | None = None
    # the agent's `RALPH-ESCALATE: <reason>` (loop/escalation.py): it asked for a person
    escalation: str | None = None
    # the failures this attempt had to work on (never a guard's failures from before the loop):
    # what its lessons are for (memory/lessons.scope_of)
    failures: list[FailureScope] | None = None


@dataclass
class IterationRecord:
    loop_id: str
    iteration: int
    timestamp: str
    actor_output: ActorOutput
    evaluator_output: EvaluatorOutput
    self_reflection: SelfReflection
    memory_metadata: MemoryMetadata
    task_description: str | None = None
    context_injected: bool | None = None
    previous_reflections_used: list[int] | None = None
    performance_delta: PerformanceDelta | None = None
    notes: str | None = None
    ralph: RalphExtension | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = to_json(self)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> IterationRecord:
        return from_json(cls, data)

    @property
    def error_count(self) -> int:
        """Diagnostics the checks found: all of them, also those the record left out."""
        stored = len(self.evaluator_output.errors or [])
        total = self.ralph.error_count if self.ralph else None
        return stored if total is None else total

    @property
    def reward(self) -> float:
        """The reward; never 1.0 for an attempt that did not pass (older records stored
        0.9987 for one failing test in a thousand, which showed as 1.00)."""
        return shown_reward(
            self.evaluator_output.reward_signal or 0.0, self.evaluator_output.passed
        )


def shown_reward(reward: float, passed: bool) -> float:
    """The one reward cap: what did not pass scores at most `BEST_FAILING_REWARD`, so a
    failing attempt never reads as 1.00 (the record model and `ralph analyze` both use it)."""
    return reward if passed else min(reward, BEST_FAILING_REWARD)


T = TypeVar("T")


def to_json(obj: Any) -> Any:
    """Dataclass tree -> JSON-ready dict, leaving out None-valued optional fields."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out: dict[str, Any] = {}
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if value is not None or f.metadata.get("nullable"):
                out[f.name] = to_json(value)
        return out
    if isinstance(obj, list):
        return [to_json(v) for v in obj]
    if isinstance(obj, dict):
        return {k: to_json(v) for k, v in obj.items()}
    return obj


def from_json(cls: type[T], data: Any) -> T:
    """JSON dict -> dataclass tree, guided by the type hints; unknown keys are an error."""
    return typing.cast(T, _convert(cls, data))


_HINTS: dict[type, dict[str, Any]] = {}


def _convert(tp: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        return _convert(inner[0], value)
    if origin is list:
        (item,) = typing.get_args(tp)
        return [_convert(item, v) for v in value]
    if origin is dict:
        _, val = typing.get_args(tp)
        return {k: _convert(val, v) for k, v in value.items()}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise TypeError(f"{tp.__name__}: expected an object, got {type(value).__name__}")
        hints = _HINTS.get(tp)
        if hints is None:
            hints = _HINTS[tp] = typing.get_type_hints(tp)
        unknown = set(value) - set(hints)
        if unknown:
            names = ", ".join(sorted(unknown))
            raise TypeError(f"{tp.__name__}: {plural(len(unknown), 'unknown field')}: {names}")
        return tp(**{k: _convert(hints[k], v) for k, v in value.items()})
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def annotate(record: IterationRecord, notes: list[str], *, flag: str | None = None) -> None:
    """Add `notes` to the record's `notes` (one per line, after what is there) and, when there
    are any, `flag` to its quality flags: what ralph ignored or undid in this iteration."""
    if not notes:
        return
    record.notes = "\n".join([*([record.notes] if record.notes else []), *notes])
    if flag is not None and record.ralph is not None and flag not in record.ralph.quality_flags:
        record.ralph.quality_flags.append(flag)
