"""The Check protocol and what a check and the whole evaluation produce."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ralph.config import CheckSpec
from ralph.records import (
    DIAGNOSTICS_PER_CHECK,
    CheckResult,
    Diagnostic,
    EvaluatorOutput,
    Metrics,
    ModelCall,
)

if TYPE_CHECKING:
    from ralph.evaluators.judging import Baseline, CheckVerdict

__all__ = [
    "Check",
    "CheckOutcome",
    "Evaluation",
    "Evaluator",
    "OutputCallback",
]  # the seam: what other packages use

OutputCallback = Callable[[str, str], None]


@dataclass
class CheckOutcome:
    """One check's verdict: the record's `results` item, its diagnostics, metrics and score."""

    spec: CheckSpec
    result: CheckResult
    errors: list[Diagnostic] = field(default_factory=list)
    metrics: Metrics = field(default_factory=Metrics)
    score: float = 0.0
    passed_tests: set[str] | None = None  # test ids that passed, where the tool names them
    verdict: CheckVerdict | None = None  # set by the suite: the check judged against the baseline
    calls: list[ModelCall] = field(default_factory=list)  # the model calls of this run (a judge's)
    changed_files: list[str] | None = None  # files in the tree this check may have written

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
    baseline: Baseline | None = None  # what it was judged against (None: every check must pass)

    @property
    def passed(self) -> bool:
        return self.output.passed

    @property
    def reward(self) -> float:
        return self.output.reward_signal or 0.0

    @property
    def error_count(self) -> int:
        return len(self.output.errors or [])

    def failing(self) -> list[CheckOutcome]:
        """Checks that hold the attempt back: failing targets and guards that got worse."""
        return [
            o
            for o in self.outcomes
            if o.result.status != "skip" and not (o.verdict.ok if o.verdict else o.passed)
        ]

    def relevant_errors(self) -> list[Diagnostic]:
        """What the agent has to work on: target failures, then regressions; never the
        failures a guard already had before the loop."""
        targets = [d for o in self.outcomes if o.verdict for d in o.verdict.remaining]
        broken = [d for o in self.outcomes if o.verdict for d in o.verdict.regressions]
        if not any(o.verdict for o in self.outcomes):
            return list(self.output.errors or [])
        return targets + broken

    def counts(self) -> dict[str, int]:
        """Target failures fixed since the baseline, target failures remaining, regressions."""
        verdicts = [o.verdict for o in self.outcomes if o.verdict is not None]
        return {
            "fixed": sum(len(v.fixed) for v in verdicts),
            "remaining": sum(len(v.remaining) for v in verdicts if v.role == "target"),
            "regressions": sum(len(v.regressions) for v in verdicts),
        }

    def recorded_output(
        self, cap: int = DIAGNOSTICS_PER_CHECK
    ) -> tuple[EvaluatorOutput, int | None]:
        """The output as a record keeps it: at most `cap` diagnostics per check, those the agent
        must work on (a target's remaining, a guard's regressions) first; and the total when
        some were left out. Judging, prompts and reflections use the whole `output`."""
        kept: list[Diagnostic] = []
        for o in self.outcomes:
            first = [*o.verdict.remaining, *o.verdict.regressions] if o.verdict else []
            chosen: set[int] = set()
            for d in [*first, *o.errors]:  # the verdict's lists hold the outcome's objects
                if len(chosen) == cap:
                    break
                chosen.add(id(d))
            kept += [d for d in o.errors if id(d) in chosen]
        if len(kept) == self.error_count:
            return self.output, None
        return replace(self.output, errors=kept), self.error_count

    def calls(self) -> list[ModelCall]:
        """The model calls the checks made (a judge's): the evaluation's tokens and cost."""
        return [call for o in self.outcomes for call in o.calls]

    def roles(self) -> dict[str, str]:
        return {o.spec.name: o.verdict.role for o in self.outcomes if o.verdict is not None}


class Evaluator(Protocol):
    def preflight(self) -> None:
        """Raise PreflightError naming a missing tool and how to install it or drop the check."""
        ...

    def evaluate(
        self,
        cwd: Path,
        *,
        baseline: Baseline | None = None,
        on_output: OutputCallback | None = None,
    ) -> Evaluation:
        """Run every check (in parallel) on `cwd` and judge the result against `baseline`
        (None: every check must pass, as `ralph check` judges)."""
        ...

    def evaluate_baseline(
        self,
        cwd: Path,
        *,
        named: Collection[str] = (),
        success: str = "baseline",
        on_output: OutputCallback | None = None,
    ) -> Evaluation:
        """The untouched tree, judged by the roles it gives the checks; `.baseline` is set.

        `named`: checks the user named (--test, --check), which are targets; `success`:
        "baseline" (targets and guards) or "strict" (every check a target).
        """
        ...
