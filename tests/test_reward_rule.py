"""The reward rule's properties (evaluators/judging.combine) over generated baselines and
attempts: harm scores below the baseline, progress above it, success exactly 1.0."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from ralph.config import CheckSpec
from ralph.evaluators.base import CheckOutcome
from ralph.evaluators.judging import assign_roles, combine, judge_check, make_baseline
from ralph.records import BEST_FAILING_REWARD, CheckResult, Diagnostic

TESTS = CheckSpec("tests", "pytest", "pytest")
MYPY = CheckSpec("mypy", "mypy .", "mypy")
DOCS = CheckSpec("docs", "make docs", "shell")


def _test_failure(test_id: str) -> Diagnostic:
    return Diagnostic("test_failure", "assert 0 == 1", file="t.py", rule=test_id)


def _finding(n: int) -> Diagnostic:
    return Diagnostic("type_error", f"problem {chr(97 + n % 26)}{n // 26}", file=f"m{n}.py")


@dataclass(frozen=True)
class Scenario:
    """A baseline (failing and passing tests, a mypy guard with old findings, a passing docs
    check) and the weights of the three checks."""

    failing: int
    passing: int
    findings: int  # mypy's findings before the loop; -1: no mypy check
    docs: bool
    weights: tuple[float, float, float]

    def ids(self) -> tuple[list[str], list[str]]:
        names = [f"t.py::test_{n}" for n in range(self.failing + self.passing)]
        return names[: self.failing], names[self.failing :]

    def outcomes(
        self, fixed: int, broken: int, new_findings: int, docs_fail: bool
    ) -> list[CheckOutcome]:
        failing, passing = self.ids()
        fail_now = failing[fixed:] + passing[:broken]
        passed_now = set(failing[:fixed] + passing[broken:])
        errors = [_test_failure(t) for t in fail_now]
        out = [
            CheckOutcome(
                TESTS,
                CheckResult("tests", "fail" if errors else "pass"),
                errors,
                score=0.0 if errors else 1.0,
                passed_tests=passed_now,
            )
        ]
        if self.findings >= 0:
            found = [_finding(n) for n in range(self.findings + new_findings)]
            status = "fail" if found else "pass"
            out.append(CheckOutcome(MYPY, CheckResult("mypy", status), found))
        if self.docs:
            docs = [Diagnostic("other", "boom")] if docs_fail else []
            out.append(CheckOutcome(DOCS, CheckResult("docs", "fail" if docs else "pass"), docs))
        return out

    def reward(self, outcomes: list[CheckOutcome]) -> tuple[bool, float]:
        start = self.outcomes(0, 0, 0, False)
        roles = assign_roles([o.spec for o in start], start, named=set(), success="baseline")
        base = make_baseline(start, roles, "baseline")
        weights = dict(zip(("tests", "mypy", "docs"), self.weights, strict=True))
        return combine(
            [(weights[o.spec.name], judge_check(o, base.checks[o.spec.name])) for o in outcomes]
        )

    def baseline_reward(self) -> float:
        return self.reward(self.outcomes(0, 0, 0, False))[1]


scenarios = st.builds(
    Scenario,
    failing=st.integers(1, 40),
    passing=st.integers(0, 60),
    findings=st.integers(-1, 5),
    docs=st.booleans(),
    weights=st.tuples(*[st.floats(0.1, 2.0)] * 3),  # as configured: no check weighs nothing
)


@settings(max_examples=300, deadline=None)
@given(scenarios, st.data())
def test_a_regression_scores_strictly_below_the_baseline(s: Scenario, data: st.DataObject) -> None:
    fixed = data.draw(st.integers(0, s.failing), label="fixed")
    broken = data.draw(st.integers(0, s.passing), label="broken")
    new = data.draw(st.integers(0, 3), label="new findings") if s.findings >= 0 else 0
    docs_fail = data.draw(st.booleans(), label="docs fail") if s.docs else False
    if not (broken or new or docs_fail):
        return  # nothing broken: the next property's case
    passed, reward = s.reward(s.outcomes(fixed, broken, new, docs_fail))
    assert not passed
    assert reward < s.baseline_reward()


@settings(max_examples=300, deadline=None)
@given(scenarios, st.data())
def test_more_fixed_with_nothing_broken_scores_above_the_baseline(
    s: Scenario, data: st.DataObject
) -> None:
    fixed = data.draw(st.integers(1, s.failing), label="fixed")
    more = s.reward(s.outcomes(fixed, 0, 0, False))
    assert _above(more[1], s.baseline_reward())
    if fixed > 1:  # and one more fixed scores higher still
        assert _above(more[1], s.reward(s.outcomes(fixed - 1, 0, 0, False))[1])


def _above(reward: float, before: float) -> bool:
    """Higher, or both at the cap: a failing attempt shows at most 0.99, so near the top (one
    failing test of 60, lightly weighted) two attempts may both sit there (hypothesis found
    25 vs 24 of 26 fixed, both 0.99)."""
    return reward > before or reward == before == BEST_FAILING_REWARD


@settings(max_examples=200, deadline=None)
@given(scenarios)
def test_success_is_exactly_one_and_failing_at_most_0_99(s: Scenario) -> None:
    assert s.reward(s.outcomes(s.failing, 0, 0, False)) == (True, 1.0)
    assert 0.0 <= s.baseline_reward() <= BEST_FAILING_REWARD


@settings(max_examples=200, deadline=None)
@given(scenarios)
def test_a_baseline_scores_above_zero_exactly_when_it_has_something_to_lose(
    s: Scenario,
) -> None:
    to_lose = s.passing > 0 or s.findings >= 0 or s.docs
    assert (s.baseline_reward() > 0) == to_lose
