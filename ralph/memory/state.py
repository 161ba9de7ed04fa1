"""The loop's state file, `loops/<id>/state.json` (schemas/loop-state.schema.json), typed.

Its parts are small frozen values: the baseline's summary, the loop branch
(`workspace.base.GitState`), the totals and the settings. They become JSON only here, in
`LoopState.to_json` and `from_json`, so the file keeps the schema's format and files written by
earlier versions still read (a key this version does not know is left out, not an error).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ralph.config import KEYS, ROLES, Role, Settings, from_mapping
from ralph.records import IterationRecord, ModelCall, Usage, known_sum, sum_costs, utc_now
from ralph.workspace.base import GitState

# the seam: what other packages use
__all__ = ["BaselineSummary", "LoopState", "Totals"]


@dataclass(frozen=True)
class BaselineSummary:
    """What the state keeps of the baseline (the whole of it, test ids too, is baseline.json)."""

    passed: bool = False
    reward: float = 0.0
    error_count: int = 0
    error_fingerprint: str = ""
    success: str | None = None  # "baseline" or "strict"; None: a loop from before roles
    roles: Mapping[str, Role] = field(default_factory=dict)
    check_error_counts: Mapping[str, int] = field(default_factory=dict)
    check_rewards: Mapping[str, float] | None = None  # written by loops from before roles

    def named(self, role: Role) -> list[str]:
        return [name for name, r in self.roles.items() if r == role]

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "passed": self.passed,
            "reward": self.reward,
            "error_count": self.error_count,
            "error_fingerprint": self.error_fingerprint,
        }
        if self.success is not None:
            data.update(success=self.success, roles=dict(self.roles))
        if self.check_rewards is not None:
            data["check_rewards"] = dict(self.check_rewards)
        data["check_error_counts"] = dict(self.check_error_counts)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BaselineSummary:
        roles = data.get("roles") or {}
        rewards = data.get("check_rewards")
        success = data.get("success")
        return cls(
            passed=bool(data.get("passed")),
            reward=float(data.get("reward", 0.0)),
            error_count=int(data.get("error_count", 0)),
            error_fingerprint=str(data.get("error_fingerprint", "")),
            success=None if success is None else str(success),
            roles={str(n): r for n, r in roles.items() if r in ROLES},
            check_error_counts={
                str(n): int(c) for n, c in (data.get("check_error_counts") or {}).items()
            },
            check_rewards=None
            if rewards is None
            else {str(n): float(r) for n, r in rewards.items()},
        )


@dataclass(frozen=True)
class Totals:
    """`usage` in the state: what the whole loop used so far.

    Tokens are the counts that were reported, summed; None while none was (a `cmd:` actor's).
    `cost_usd` follows the one rule for money (`records.sum_costs`): unknown (None) as soon as
    one iteration's cost is, and None before anything was counted (nobody reported a cost).
    Every iteration's record is counted, and the checks' model calls outside an iteration
    (`LoopState.count_calls`), which no record holds: `unrecorded_calls` says how many.
    """

    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None
    wall_seconds: float = 0.0
    unrecorded_calls: int = 0

    @property
    def tokens(self) -> int:
        """The known tokens (what a token budget can count)."""
        return (self.tokens_in or 0) + (self.tokens_out or 0)

    def plus(self, usage: Usage, *, first: bool) -> Totals:
        """These totals and one more `usage` (an iteration's, or calls outside one); `first`:
        nothing counted before."""
        tokens_in, tokens_out = usage.tokens_in_out()
        return dataclasses.replace(
            self,
            tokens_in=known_sum((self.tokens_in, tokens_in)),
            tokens_out=known_sum((self.tokens_out, tokens_out)),
            cost_usd=sum_costs(usage.cost_usd)
            if first
            else sum_costs(self.cost_usd, usage.cost_usd),
        )

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "cost_usd": self.cost_usd,
            "wall_seconds": self.wall_seconds,
        }
        if self.unrecorded_calls:
            data["unrecorded_calls"] = self.unrecorded_calls
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Totals:
        cost, tokens_in, tokens_out = (data.get(k) for k in ("cost_usd", "tokens_in", "tokens_out"))
        return cls(
            tokens_in=None if tokens_in is None else int(tokens_in),
            tokens_out=None if tokens_out is None else int(tokens_out),
            cost_usd=None if cost is None else float(cost),
            wall_seconds=float(data.get("wall_seconds", 0.0)),
            unrecorded_calls=int(data.get("unrecorded_calls", 0)),
        )


SETTINGS_KEYS = frozenset((*KEYS, "named_checks"))


@dataclass
class LoopState:
    """`loops/<id>/state.json`: where a loop is, what it started from, what it used."""

    loop_id: str
    task: str
    status: str = "running"
    created_at: str = field(default_factory=utc_now)
    updated_at: str = field(default_factory=utc_now)
    iteration: int = 0
    best_iteration: int | None = None
    best_reward: float | None = None
    reward_history: list[float] = field(default_factory=list)
    baseline: BaselineSummary | None = None
    settings: Settings = field(default_factory=Settings)
    git: GitState | None = None
    usage: Totals = field(default_factory=Totals)
    stop_reason: str | None = None
    pid: int | None = None
    host: str | None = None
    schema_version: str = "1.0"
    # waiting out a usage limit (loop/limits.py): until when (ISO time), and the CLI's words
    waiting_until: str | None = None
    waiting_for: str | None = None

    def count(self, record: IterationRecord) -> None:
        """Count a finished iteration: its number, reward, the best so far and what it used."""
        usage = record.ralph.usage if record.ralph else Usage()
        self.usage = self.usage.plus(usage, first=self._nothing_counted())
        self.iteration = record.iteration
        self.reward_history.append(record.reward)
        if self.best_reward is None or record.reward > self.best_reward:
            self.best_reward, self.best_iteration = record.reward, record.iteration

    def count_calls(self, calls: Sequence[ModelCall]) -> None:
        """Count the checks' model calls made outside an iteration: a judge's at the baseline
        (a tree dirty at the start) and when the loop evaluates a tree again (resume, a
        rollback after resume). They count in the totals, so the budgets see them; no record
        holds them (a record is one attempt's), so `ralph analyze` does not."""
        if not calls:
            return
        usage = Usage(
            cost_usd=sum_costs(*(call.cost_usd for call in calls)),
            evaluator_tokens_in=known_sum(call.tokens_in for call in calls),
            evaluator_tokens_out=known_sum(call.tokens_out for call in calls),
        )
        made = self.usage.unrecorded_calls + len(calls)
        self.usage = self.usage.plus(usage, first=self._nothing_counted())
        self.usage = dataclasses.replace(self.usage, unrecorded_calls=made)

    def _nothing_counted(self) -> bool:
        """No iteration and no call counted yet: a cost of None means none so far, not
        unknown."""
        return self.iteration == 0 and not self.usage.unrecorded_calls

    def to_json(self) -> dict[str, Any]:
        """The file's object; None-valued optional fields are left out, as always."""
        data: dict[str, Any] = {
            "loop_id": self.loop_id,
            "task": self.task,
            "status": self.status,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "iteration": self.iteration,
            "best_iteration": self.best_iteration,
            "best_reward": self.best_reward,
            "reward_history": list(self.reward_history),
            "baseline": self.baseline.to_json() if self.baseline is not None else None,
            "settings": self.settings.snapshot(),
            "git": self.git.to_json() if self.git is not None else None,
            "usage": self.usage.to_json(),
            "stop_reason": self.stop_reason,
            "pid": self.pid,
            "host": self.host,
            "schema_version": self.schema_version,
            "waiting_until": self.waiting_until,
            "waiting_for": self.waiting_for,
        }
        return {key: value for key, value in data.items() if value is not None}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LoopState:
        """From a file the schema accepted; raises ValueError, TypeError or ConfigError when a
        part cannot be read (`store.parse_state` turns them into one StoreError)."""
        baseline, git = data.get("baseline"), data.get("git")
        settings = data.get("settings") or {}
        best = data.get("best_reward")
        return cls(
            loop_id=str(data["loop_id"]),
            task=str(data["task"]),
            status=str(data["status"]),
            created_at=str(data["created_at"]),
            updated_at=str(data["updated_at"]),
            iteration=int(data["iteration"]),
            best_iteration=data.get("best_iteration"),
            best_reward=None if best is None else float(best),
            reward_history=[float(r) for r in data.get("reward_history") or []],
            baseline=BaselineSummary.from_json(baseline) if baseline else None,
            settings=from_mapping({k: v for k, v in settings.items() if k in SETTINGS_KEYS}),
            git=GitState.from_json(git) if git is not None else None,
            usage=Totals.from_json(data.get("usage") or {}),
            stop_reason=data.get("stop_reason"),
            pid=data.get("pid"),
            host=data.get("host"),
            schema_version=str(data.get("schema_version", "1.0")),
            waiting_until=data.get("waiting_until"),
            waiting_for=data.get("waiting_for"),
        )
