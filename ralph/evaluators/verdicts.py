"""What the evaluator seam judges with: the baseline (the untouched tree's verdict, per check)
and one check's verdict against it. They live with the seam (evaluators/base.py) so that the
seam's types need nothing of how judging works (judging.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from ralph.config import Role
    from ralph.memory.state import BaselineSummary
    from ralph.records import Diagnostic

__all__ = ["Baseline", "CheckBaseline", "CheckVerdict", "Kind"]

Kind = Literal["tests", "diagnostics", "command"]


@dataclass(frozen=True)
class CheckBaseline:
    """One check before the loop: its role, why, and what failed (and passed) then."""

    name: str
    kind: Kind
    role: Role
    status: str
    error_count: int
    why: str = ""
    failing: tuple[str, ...] = ()  # failure keys, repeated as often as they occurred
    passing: tuple[str, ...] | None = None  # test ids that passed; None when unknown

    @property
    def judged(self) -> bool:
        """A guard that could not run before the loop has nothing to be compared with."""
        return not (self.role == "guard" and self.status == "error")


@dataclass(frozen=True)
class Baseline:
    """The untouched tree's verdict, against which every attempt is judged."""

    success: str
    checks: dict[str, CheckBaseline]
    passed: bool = False
    reward: float = 0.0
    error_count: int = 0
    fingerprint: str = ""

    def roles(self) -> dict[str, Role]:
        return {name: c.role for name, c in self.checks.items()}

    def named(self, role: Role) -> list[str]:
        return [name for name, c in self.checks.items() if c.role == role]

    def summary(self) -> BaselineSummary:
        """What state.json keeps (small); `to_json` is the whole of it, for baseline.json."""
        # here: `ralph check` imports the seam before its first check starts and never needs
        # the state (about 6 ms of its start on a 2-core machine: `import ralph.memory.state`)
        from ralph.memory.state import BaselineSummary

        return BaselineSummary(
            passed=self.passed,
            reward=self.reward,
            error_count=self.error_count,
            error_fingerprint=self.fingerprint,
            success=self.success,
            roles=self.roles(),
            check_error_counts={n: c.error_count for n, c in self.checks.items()},
        )

    def to_json(self) -> dict[str, Any]:
        checks = []
        for c in self.checks.values():
            item: dict[str, Any] = {
                "name": c.name,
                "kind": c.kind,
                "role": c.role,
                "status": c.status,
                "error_count": c.error_count,
                "why": c.why,
                "failing": list(c.failing),
            }
            if c.passing is not None:
                item["passing"] = list(c.passing)
            checks.append(item)
        return {**self.summary().to_json(), "checks": checks}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Baseline:
        checks: dict[str, CheckBaseline] = {}
        for item in data.get("checks") or []:
            passing = item.get("passing")
            checks[item["name"]] = CheckBaseline(
                name=item["name"],
                kind=item.get("kind", "command"),
                role=item.get("role", "target"),
                status=item.get("status", "fail"),
                error_count=int(item.get("error_count", 0)),
                why=str(item.get("why", "")),
                failing=tuple(item.get("failing") or ()),
                passing=tuple(passing) if passing is not None else None,
            )
        return cls(
            success=str(data.get("success", "strict")),
            checks=checks,
            passed=bool(data.get("passed")),
            reward=float(data.get("reward", 0.0)),
            error_count=int(data.get("error_count", 0)),
            fingerprint=str(data.get("error_fingerprint", "")),
        )

    @classmethod
    def stored(
        cls, data: Mapping[str, Any] | None, summary: BaselineSummary | None
    ) -> Baseline | None:
        """The loop's baseline from its file; a loop from before roles existed is judged
        strictly from the state's summary."""
        if data is not None:
            return cls.from_json(data)
        return cls.legacy(summary) if summary is not None else None

    @classmethod
    def legacy(cls, summary: BaselineSummary) -> Baseline:
        """A loop started before roles existed: every check a target, as it was then."""
        checks = {
            name: CheckBaseline(name, "command", "target", "fail", n)
            for name, n in summary.check_error_counts.items()
        }
        return cls(
            success="strict",
            checks=checks,
            passed=summary.passed,
            reward=summary.reward,
            error_count=summary.error_count,
            fingerprint=summary.error_fingerprint,
        )


@dataclass
class CheckVerdict:
    """What one check says about an attempt, relative to the baseline."""

    role: Role
    ok: bool
    judged: bool = True
    fixed: list[str] = field(default_factory=list)  # target failures of the baseline now gone
    remaining: list[Diagnostic] = field(default_factory=list)  # target failures still there
    regressions: list[Diagnostic] = field(default_factory=list)  # worked before, broken now
    preexisting: int = 0  # a guard's failures that were there before the loop
    progress: float = 0.0  # the target's score in [0, 1]
    # the share of what worked before the loop that still works, in [0, 1] and below 1 exactly
    # when something regressed; None when the check had nothing to lose
    kept: float | None = None
