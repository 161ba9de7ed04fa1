"""The Check protocol and what a check and the whole evaluation produce."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ralph.config import CheckSpec
from ralph.evaluators.verdicts import Baseline, CheckVerdict
from ralph.records import (
    DIAGNOSTICS_PER_CHECK,
    CheckResult,
    Diagnostic,
    EvaluatorOutput,
    FailureScope,
    Metrics,
    ModelCall,
)

MAX_SCOPE = 50  # failures a record names as its lessons' scope

if TYPE_CHECKING:
    from ralph.providers.base import ChatClient

__all__ = [
    "Baseline",
    "BaselineRules",
    "Check",
    "CheckOutcome",
    "CheckVerdict",
    "Evaluation",
    "EvaluationRequest",
    "Evaluator",
    "JudgeContext",
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
    log: str | None = None  # the check's whole log (command, output); None: stdout + stderr

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

    def preflight(self) -> None:
        """Raise PreflightError for what else it needs (a judge: its model), before any
        agent is paid for."""
        ...

    def run(
        self,
        cwd: Path,
        *,
        baseline_errors: int | None = None,
        on_output: OutputCallback | None = None,
    ) -> CheckOutcome:
        """Run once on `cwd`; `baseline_errors` scales mypy/ruff scores (None: 0 when failing).
        The outcome carries what the loop keeps of the run: its `log` and a judge's `calls`."""
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

    def scope(self) -> list[FailureScope]:
        """The failures of `relevant_errors`, each with its check: what a lesson learned on
        this evaluation is for (a guard's failures from before the loop never are)."""
        if not any(o.verdict for o in self.outcomes):
            return []
        found = [
            FailureScope.of(o.spec.name, d)
            for o in self.outcomes
            if o.verdict
            for d in [*o.verdict.remaining, *o.verdict.regressions]
        ]
        return list({f.key: f for f in reversed(found)}.values())[::-1][:MAX_SCOPE]

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

    def logs(self) -> dict[str, str]:
        """Each check's log, as `NNN/check-NAME.log` keeps it: its own, else its output."""
        return {
            o.spec.name: o.log
            if o.log is not None
            else (o.result.stdout or "") + (o.result.stderr or "")
            for o in self.outcomes
        }

    def roles(self) -> dict[str, str]:
        return {o.spec.name: o.verdict.role for o in self.outcomes if o.verdict is not None}


@dataclass(frozen=True)
class JudgeContext:
    """What a judge check is given when a loop builds it: the task, the model to ask unless
    the check names its own (the reflector's), and the commit the loop's work began at (None:
    HEAD when the judge first runs, the baseline's tree)."""

    task: str
    client: ChatClient | None
    base_commit: str | None = None


@dataclass(frozen=True)
class BaselineRules:
    """How the untouched tree gives the checks their roles: `named` are the checks the user
    named (--test, --check), which are targets; `success` is "baseline" (targets and guards)
    or "strict" (every check a target)."""

    named: Collection[str] = ()
    success: str = "baseline"


@dataclass(frozen=True)
class EvaluationRequest:
    """What the evaluator is asked: judge the tree at `cwd` against `baseline` (None: every
    check must pass, as `ralph check` judges), or, with `establish`, judge the untouched tree
    by the roles it gives the checks and return it as the `Evaluation.baseline`."""

    cwd: Path
    baseline: Baseline | None = None
    establish: BaselineRules | None = None
    on_output: OutputCallback | None = None  # (check name, output chunk), from worker threads
    on_done: Callable[[CheckOutcome], None] | None = None  # each check's outcome as it ends


class Evaluator(Protocol):
    """The seam between the loop and the checks: one typed call, a request in and an
    `Evaluation` out that carries everything the loop keeps (the checks' logs, the model
    calls a judge made). Whatever a check needs beyond the tree (a judge's task and model)
    it is given when it is built."""

    def preflight(self) -> None:
        """Raise PreflightError naming a missing tool and how to install it or drop the check."""
        ...

    def handle(self, request: EvaluationRequest) -> Evaluation:
        """Run every check on `request.cwd` and judge the result (see `EvaluationRequest`)."""
        ...
