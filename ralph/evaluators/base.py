"""The Check protocol and what a check and the whole evaluation produce."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ralph.config import CheckSpec
from ralph.records import CheckResult, Diagnostic, EvaluatorOutput, Metrics

OutputCallback = Callable[[str, str], None]


@dataclass
class CheckOutcome:
    """One check's verdict: the record's `results` item, its diagnostics, metrics and score."""

    spec: CheckSpec
    result: CheckResult
    errors: list[Diagnostic] = field(default_factory=list)
    metrics: Metrics = field(default_factory=Metrics)
    score: float = 0.0

    @property
    def passed(self) -> bool:
        return self.result.status == "pass"

    @property
    def error_count(self) -> int:
        return len(self.errors)


class Check(Protocol):
    spec: CheckSpec

    def tool(self) -> str:
        """The executable this check needs on PATH (named in the preflight error)."""
        ...

    def run(
        self,
        cwd: Path,
        *,
        baseline_errors: int | None = None,
        on_output: OutputCallback | None = None,
    ) -> CheckOutcome:
        """Run once on `cwd`; `baseline_errors` scales mypy/ruff scores (None: 0 when failing)."""
        ...


@dataclass
class Evaluation:
    """The evaluator's verdict on the working tree."""

    output: EvaluatorOutput
    outcomes: list[CheckOutcome]
    fingerprint: str

    @property
    def passed(self) -> bool:
        return self.output.passed

    @property
    def reward(self) -> float:
        return self.output.reward_signal or 0.0

    @property
    def error_count(self) -> int:
        return len(self.output.errors or [])

    def summary(self) -> dict[str, Any]:
        """What state.json keeps of the baseline, and what later scores are relative to."""
        return {
            "passed": self.passed,
            "reward": self.reward,
            "error_count": self.error_count,
            "error_fingerprint": self.fingerprint,
            "check_rewards": {o.spec.name: o.score for o in self.outcomes},
            "check_error_counts": {o.spec.name: o.error_count for o in self.outcomes},
        }


class Evaluator(Protocol):
    def preflight(self) -> None:
        """Raise PreflightError naming a missing tool and how to install it or drop the check."""
        ...

    def evaluate(
        self,
        cwd: Path,
        *,
        baseline: dict[str, Any] | None = None,
        on_output: OutputCallback | None = None,
    ) -> Evaluation:
        """Run every check (in parallel) on `cwd`; `baseline` is `Evaluation.summary()`."""
        ...
