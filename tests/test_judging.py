"""Judging against the baseline: roles, verdicts and rewards, unit by unit (fake outcomes)."""

from __future__ import annotations

import pytest

from ralph import glyphs
from ralph.config import CheckSpec, Settings, load
from ralph.errors import ConfigError
from ralph.evaluators.base import CheckOutcome
from ralph.evaluators.describe import broke_text
from ralph.evaluators.judging import (
    KEPT_SHARE,
    Baseline,
    assign_roles,
    combine,
    failure_key,
    judge_check,
    make_baseline,
)
from ralph.memory.state import BaselineSummary
from ralph.records import CheckResult, CheckStatus, Diagnostic, EvaluatorOutput, IterationRecord

PYTEST = CheckSpec("tests", "pytest", "pytest")
MYPY = CheckSpec("mypy", "mypy .", "mypy")
SHELL = CheckSpec("docs", "make docs", "shell")


def failing_test(test_id: str) -> Diagnostic:
    return Diagnostic("test_failure", "assert 0 == 1", file=test_id.split("::")[0], rule=test_id)


def finding(file: str, line: int, message: str, code: str = "arg-type") -> Diagnostic:
    return Diagnostic("type_error", message, file=file, line=line, rule=code)


def outcome(
    spec: CheckSpec,
    errors: list[Diagnostic] | None = None,
    *,
    status: CheckStatus | None = None,
    passed_tests: set[str] | None = None,
    score: float | None = None,
) -> CheckOutcome:
    errors = errors or []
    status = status or ("fail" if errors else "pass")
    default = 1.0 if status == "pass" else 0.0
    return CheckOutcome(
        spec,
        CheckResult(spec.name, status),
        errors,
        score=default if score is None else score,
        passed_tests=passed_tests,
    )


def baseline_of(
    *outcomes: CheckOutcome, named: set[str] | None = None, success: str = "baseline"
) -> Baseline:
    specs = [o.spec for o in outcomes]
    roles = assign_roles(specs, outcomes, named=named or set(), success=success)
    return make_baseline(outcomes, roles, success)


def test_failing_tests_are_targets_and_passing_tests_are_guarded() -> None:
    base = baseline_of(
        outcome(PYTEST, [failing_test("t.py::a")], passed_tests={"t.py::b", "t.py::c"})
    )
    assert base.checks["tests"].role == "target"
    fixed_but_broke_b = outcome(
        PYTEST, [failing_test("t.py::b")], passed_tests={"t.py::a", "t.py::c"}
    )
    verdict = judge_check(fixed_but_broke_b, base.checks["tests"])
    assert not verdict.ok
    assert verdict.fixed == ["t.py::a"]
    assert [d.rule for d in verdict.regressions] == ["t.py::b"]
    assert verdict.progress == pytest.approx(1 / 2)
    green = outcome(PYTEST, passed_tests={"t.py::a", "t.py::b", "t.py::c"})
    assert judge_check(green, base.checks["tests"]).ok


def test_deleting_a_failing_test_does_not_fix_it() -> None:
    base = baseline_of(outcome(PYTEST, [failing_test("t.py::a")], passed_tests={"t.py::b"}))
    deleted = outcome(PYTEST, passed_tests={"t.py::b"})
    verdict = judge_check(deleted, base.checks["tests"])
    assert not verdict.ok and verdict.fixed == []


def test_a_failing_diagnostics_check_is_a_guard_and_moved_findings_are_not_new() -> None:
    old = [finding("docs/conf.py", 78, "Name 'x' is not defined"), finding("a.py", 3, "bad arg")]
    base = baseline_of(outcome(MYPY, old))
    check = base.checks["mypy"]
    assert check.role == "guard" and "2 findings" in check.why
    moved = [finding("docs/conf.py", 80, "Name 'x' is not defined"), finding("a.py", 9, "bad arg")]
    verdict = judge_check(outcome(MYPY, moved), check)
    assert verdict.ok and verdict.regressions == [] and verdict.preexisting == 2
    new = finding("calc.py", 1, 'Incompatible return value type (got "str", expected "int")')
    worse = judge_check(outcome(MYPY, [*moved, new]), check)
    assert not worse.ok and worse.regressions == [new] and worse.preexisting == 2


def test_a_duplicate_of_an_old_finding_counts_as_new() -> None:
    base = baseline_of(outcome(MYPY, [finding("a.py", 3, "bad arg")]))
    twice = [finding("a.py", 3, "bad arg"), finding("a.py", 30, "bad arg")]
    verdict = judge_check(outcome(MYPY, twice), base.checks["mypy"])
    assert [d.line for d in verdict.regressions] == [30]


def test_named_and_green_checks_are_targets_and_strict_makes_every_check_one() -> None:
    failing_mypy = outcome(MYPY, [finding("a.py", 1, "x")])
    assert baseline_of(failing_mypy, named={"mypy"}).checks["mypy"].role == "target"
    assert baseline_of(outcome(MYPY)).checks["mypy"].role == "target"
    assert baseline_of(failing_mypy, success="strict").checks["mypy"].role == "target"
    assert baseline_of(outcome(PYTEST, passed_tests={"t"})).checks["tests"].role == "guard"
    configured = CheckSpec("mypy", "mypy .", "mypy", role="target")
    assert baseline_of(outcome(configured, [finding("a.py", 1, "x")])).checks["mypy"].role == (
        "target"
    )


def test_a_guard_that_could_not_run_is_not_judged_unless_strict() -> None:
    broken = outcome(MYPY, [Diagnostic("runtime_error", "mypy: no files")], status="error")
    check = baseline_of(broken).checks["mypy"]
    assert check.role == "guard" and not check.judged and "not judged" in check.why
    later = judge_check(outcome(MYPY, [finding("a.py", 1, "x")]), check)
    assert later.ok and not later.judged
    strict = baseline_of(broken, success="strict").checks["mypy"]
    assert not judge_check(outcome(MYPY, [finding("a.py", 1, "x")]), strict).ok


def test_a_guard_that_ran_before_and_cannot_run_now_regressed() -> None:
    check = baseline_of(outcome(MYPY, [finding("a.py", 1, "x")])).checks["mypy"]
    crashed = outcome(MYPY, [Diagnostic("runtime_error", "mypy crashed")], status="error")
    verdict = judge_check(crashed, check)
    assert not verdict.ok and len(verdict.regressions) == 1


def test_a_failing_command_guard_cannot_regress_but_a_green_one_must_stay_green() -> None:
    red = baseline_of(outcome(SHELL, [Diagnostic("other", "boom")])).checks["docs"]
    assert red.role == "guard"
    assert judge_check(outcome(SHELL, [Diagnostic("other", "boom again")]), red).ok
    green = baseline_of(outcome(SHELL)).checks["docs"]
    assert green.role == "target"
    assert not judge_check(outcome(SHELL, [Diagnostic("other", "boom")]), green).ok


def test_what_an_attempt_broke_is_said_in_the_checks_own_terms() -> None:
    """A guard's findings from before the loop are not what it broke; a guard that cannot run
    now has only those held against it; a command says it passed before."""
    before = baseline_of(outcome(MYPY, [finding("a.py", 1, "x")])).checks["mypy"]
    grown = outcome(
        MYPY, [finding("a.py", 1, "x"), finding("b.py", 2, "y"), finding("c.py", 3, "z")]
    )
    grown.verdict = judge_check(grown, before)
    assert broke_text(grown, before) == "mypy: 2 new errors"
    crashed = outcome(MYPY, [finding("a.py", 1, "x")], status="error")
    crashed.verdict = judge_check(crashed, before)
    assert crashed.verdict.regressions  # held against it, though none is new
    assert broke_text(crashed, before) == "mypy: ran before, cannot run now"
    green = baseline_of(outcome(SHELL)).checks["docs"]
    red = outcome(SHELL, [Diagnostic("other", "boom")])
    red.verdict = judge_check(red, green)
    assert broke_text(red, green) == "docs: passed before, fails now"


def test_reward_is_one_only_for_success_and_a_regressed_guard_falls_below_the_baseline() -> None:
    first = [
        outcome(PYTEST, [failing_test("t::a")], passed_tests={"t::b"}),
        outcome(MYPY, [finding("a.py", 1, "old")]),
    ]
    base = baseline_of(*first)
    start = combine([(0.5, judge_check(first[0], base.checks["tests"])),
                     (0.3, judge_check(first[1], base.checks["mypy"]))])  # fmt: skip
    assert start == (False, KEPT_SHARE)  # something to lose, nothing fixed yet
    fixed = judge_check(outcome(PYTEST, passed_tests={"t::a", "t::b"}), base.checks["tests"])
    old = judge_check(outcome(MYPY, [finding("a.py", 1, "old")]), base.checks["mypy"])
    assert combine([(0.5, fixed), (0.3, old)]) == (True, 1.0)
    new = [finding("a.py", 1, "old"), finding("b.py", 2, "new")]
    worse = judge_check(outcome(MYPY, new), base.checks["mypy"])
    passed, reward = combine([(0.5, fixed), (0.3, worse)])
    assert not passed and 0 < reward < start[1]  # every target fixed, yet a guard got worse


def test_the_users_report_three_failing_become_twelve() -> None:
    """Attempt 1 broke 9 of 17 passing tests and fixed none: below the baseline, not equal."""
    ids = [f"t::{n}" for n in range(20)]
    start = outcome(PYTEST, [failing_test(t) for t in ids[:3]], passed_tests=set(ids[3:]))
    base = baseline_of(start)
    broke = outcome(PYTEST, [failing_test(t) for t in ids[:12]], passed_tests=set(ids[12:]))
    verdict = judge_check(broke, base.checks["tests"])
    assert len(verdict.regressions) == 9 and verdict.kept == pytest.approx(8 / 17)
    before = combine([(1.0, judge_check(start, base.checks["tests"]))])[1]
    assert before == KEPT_SHARE
    assert combine([(1.0, verdict)])[1] < before


def test_a_baseline_with_nothing_to_lose_scores_zero() -> None:
    start = outcome(PYTEST, [failing_test("t::a")], passed_tests=set())
    base = baseline_of(start)
    assert combine([(1.0, judge_check(start, base.checks["tests"]))]) == (False, 0.0)


def test_a_nearly_green_strict_suite_scores_at_most_0_99() -> None:
    nearly = outcome(PYTEST, [failing_test("t::x")], score=0.9987)
    verdict = judge_check(nearly, None)
    passed, reward = combine([(0.5, verdict)])
    assert not passed and reward == 0.99


def test_an_old_record_never_shows_1_00_unless_it_passed() -> None:
    from ralph.records import ActorOutput, MemoryMetadata, SelfReflection

    record = IterationRecord(
        "ralph-x-1",
        1,
        "2026-01-01T00:00:00Z",
        ActorOutput([], "r"),
        EvaluatorOutput(False, "unit_tests", reward_signal=0.9987),
        SelfReflection("I"),
        MemoryMetadata(3, 0),
    )
    assert f"{record.reward:.2f}" == "0.99"
    assert glyphs.sparkline([0.99, 1.0]) == "▇█"


def test_failure_keys_ignore_lines_and_numbers() -> None:
    a = finding("a.py", 3, "defined on line 12")
    b = finding("a.py", 40, "defined on line 57")
    assert failure_key(a) == failure_key(b)
    assert failure_key(failing_test("t.py::x[1]")) == "t.py::x[1]"


def test_baseline_round_trips_through_json_and_old_loops_are_judged_strictly() -> None:
    base = baseline_of(
        outcome(PYTEST, [failing_test("t::a")], passed_tests={"t::b"}),
        outcome(MYPY, [finding("a.py", 1, "old")]),
    )
    again = Baseline.from_json(base.to_json())
    assert again == base
    legacy = Baseline.legacy(BaselineSummary(reward=0.2, check_error_counts={"mypy": 3}))
    assert legacy.success == "strict" and legacy.checks["mypy"].role == "target"


def test_test_narrows_the_configured_test_checks_instead_of_adding_one() -> None:
    settings = Settings(
        test="pytest -q tests/test_x.py",
        checks=[CheckSpec("pytest", "pytest", "pytest"), MYPY],
    )
    assert [(c.name, c.command) for c in settings.all_checks()] == [
        ("tests", "pytest -q tests/test_x.py"),
        ("mypy", "mypy ."),
    ]
    assert settings.named() == ["tests"]


def test_check_names_a_configured_check_and_selects_it(tmp_path: pytest.TempPathFactory) -> None:
    from pathlib import Path

    root = Path(str(tmp_path))
    config = root / ".aiwg/ralph/config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(
        "checks:\n  - {name: types, command: mypy src, parser: mypy, role: guard}\n  - pytest\n"
    )
    settings = load(root, {"checks": ["types"]}, environ={})
    assert [(c.name, c.command) for c in settings.all_checks()] == [("types", "mypy src")]
    assert settings.named() == ["types"]
    assert load(root, {}, environ={}).named() == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("success: maybe\n", "success: must be baseline or strict, not 'maybe'"),
        (
            "checks:\n  - {name: lint, command: ruff check ., role: boss}\n",
            "checks.lint.role: role must be target or guard, not 'boss'",
        ),
    ],
)
def test_bad_role_or_success_is_one_clear_error(
    tmp_path: pytest.TempPathFactory, text: str, expected: str
) -> None:
    from pathlib import Path

    root = Path(str(tmp_path))
    config = root / ".aiwg/ralph/config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(text)
    with pytest.raises(ConfigError) as error:
        load(root, {}, environ={})
    assert expected in error.value.message


def test_init_says_each_role_in_the_words_doctor_and_run_use() -> None:
    """cachetools: init called a green pytest "a target (must stay green)", doctor a guard."""
    from ralph.cli.project import _probe_line
    from ralph.config import CheckSpec
    from ralph.evaluators.detect import Probe

    tests = CheckSpec(name="pytest", command="pytest", parser="pytest")
    green = _probe_line(Probe(tests, "pass", "passes"), None)
    assert (
        green
        == "pytest: passes; a guard (must not get worse): passes now: no test may start failing"
    )
    failing = _probe_line(Probe(tests, "fail", "9 of 476 tests failed", 9), None)
    assert failing.startswith("pytest: 9 of 476 tests failed; a target (must end green): ")
    lint = CheckSpec(name="ruff", command="ruff check .", parser="ruff")
    guard = _probe_line(Probe(lint, "fail", "3 lint errors", 3), "guard")
    assert guard.endswith(
        "a guard (must not get worse): 3 findings before the loop, not your task: "
        "no new ones allowed"
    )
    chosen = _probe_line(Probe(lint, "fail", "3 lint errors", 3), "target")
    assert chosen.endswith("a target (must end green): role set in the configuration")
