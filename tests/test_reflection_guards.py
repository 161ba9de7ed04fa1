"""The heuristic reflection points at what holds the attempt back: a guard's new finding, never
one of the findings it had before the loop (python-dateutil: 18 mypy errors before the loop, one
new; the advice named an old one, which the same prompt calls "not your task")."""

from __future__ import annotations

from ralph.evaluators.suite import CheckSuite
from ralph.records import ActorOutput
from ralph.reflection.heuristic import heuristic_reflection

from .test_judging import MYPY, PYTEST, baseline_of, failing_test, finding, outcome

OLD = [finding("src/old.py", 21, "Incompatible return value", "return-value")]
OLD.append(finding("src/older.py", 5, "Argument 1 has incompatible type"))
NEW = finding("src/utils.py", 73, "Name 'x' is not defined", "name-defined")


def test_the_advice_names_the_guards_new_finding_not_an_old_one() -> None:
    base = baseline_of(
        outcome(PYTEST, [failing_test("t.py::a")], passed_tests={"t.py::b"}), outcome(MYPY, OLD)
    )
    attempt = [outcome(PYTEST, passed_tests={"t.py::a", "t.py::b"}), outcome(MYPY, [*OLD, NEW])]
    evaluation = CheckSuite.from_checks([]).judge(attempt, base)
    assert not evaluation.passed
    edited = ActorOutput(actions=[], files_modified=["src/utils.py"], rationale="fixed a")
    reflection = heuristic_reflection(evaluation, edited, [])
    advice = " ".join(reflection.actionable_insights)
    assert "src/utils.py:73" in advice, advice
    assert "src/old.py" not in advice and "src/older.py" not in advice, advice
