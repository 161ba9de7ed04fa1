"""An attempt that breaks what worked shows as harm: its reward below the baseline's, and its
line, record and commit message say how much it broke (`3 → 12 failing, 9 new`)."""

from __future__ import annotations

import io
from pathlib import Path

from ralph.analyze.report import write_csv
from ralph.analyze.stats import analyze
from ralph.cli.analyze_view import curve
from ralph.cli.live import PlainReporter
from ralph.config import CheckSpec
from ralph.evaluators.base import CheckOutcome, OutputCallback
from ralph.records import CheckResult, Diagnostic, Metrics

from .fakes.loop import Loop, Step, fake_evaluator, make_loop

TESTS = [f"tests/test_lib.py::test_{n}" for n in range(20)]


class CountedTests:
    """A pytest-like check of 20 tests: `failing.txt` holds N (the first N fail) or the failing
    tests' numbers, comma-separated."""

    def __init__(self) -> None:
        self.spec = CheckSpec("tests", "fake-tests", "pytest")

    def tool(self) -> str:
        return "sh"

    def preflight(self) -> None:
        return None

    def run(
        self,
        cwd: Path,
        *,
        baseline_errors: int | None = None,
        on_output: OutputCallback | None = None,
    ) -> CheckOutcome:
        text = (cwd / "failing.txt").read_text().strip()
        failing = [TESTS[int(n)] for n in text.split(",")] if "," in text else TESTS[: int(text)]
        count = len(failing)
        errors = [
            Diagnostic("test_failure", f"{t} failed", file="tests/test_lib.py", rule=t)
            for t in failing
        ]
        return CheckOutcome(
            self.spec,
            CheckResult("tests", "fail" if errors else "pass", 1 if errors else 0),
            errors,
            Metrics(20 - count, count, 20),
            score=(20 - count) / 20,
            passed_tests=set(TESTS) - set(failing),
        )


def harmful_loop(root: Path) -> Loop:
    """Baseline: 3 of 20 tests fail; attempt 1 breaks 9 more; attempt 2 fixes everything."""
    plan = {1: Step(write={"failing.txt": "12"}), 2: Step(write={"failing.txt": "0"})}
    loop = make_loop(root, plan, evaluator=fake_evaluator(CountedTests()), max_iterations=2)
    (root / "failing.txt").write_text("3")
    loop.start()
    return loop


def test_an_attempt_that_breaks_nine_passing_tests_shows_as_harm(tmp_path: Path) -> None:
    loop = harmful_loop(tmp_path)
    state = loop.state()
    assert state.baseline is not None
    first = loop.reporter.records[0]
    assert first.ralph is not None and first.ralph.regressions == 9
    assert 0 <= first.reward < state.baseline.reward  # not 0.00 against 0.00
    assert first.performance_delta is not None
    assert first.performance_delta.reward_change is not None
    assert first.performance_delta.reward_change < 0
    # the commit says what broke, and its reward change is negative
    message = loop.workspace.messages[1]  # [0] is the loop's start
    subject, body = message.split("\n", 1)
    assert subject.endswith("iteration 1 — tests fail: 3 → 12 failing, 9 new")
    change = round(first.reward - state.baseline.reward, 2)
    assert f"Reward: {first.reward:.2f} ({change:+.2f} from the baseline's" in body
    assert change < 0
    # the terminal line: the harm, and the broken tests listed before the baseline's failures
    out = io.StringIO()
    PlainReporter(out).evaluated(1, loop.reporter.evaluations[1])
    lines = out.getvalue().splitlines()
    assert "iteration 1: reward" in lines[0] and "worse: 3 → 12 failing, 9 new" in lines[0]
    assert "test_3 failed" in lines[1]  # the first broken test, not the baseline's test_0
    assert loop.reporter.noted("iteration 1 broke what worked before: restored the code")
    # a clean success says nothing of harm
    assert "failing" not in loop.workspace.messages[2].split("\n", 1)[0]
    assert state.status == "completed"


def test_analyze_shows_the_dip_and_marks_the_harm(tmp_path: Path) -> None:
    loop = harmful_loop(tmp_path)
    (analysed,) = analyze(loop.store).loops
    base, harmed, green = analysed.rewards
    assert harmed < base < green == 1.0  # the learning curve dips below the baseline
    assert [r.regressions for r in analysed.records] == [9, 0]
    drawn = curve(analysed).plain
    assert "✕" in drawn and "broke what worked before" in drawn
    out = io.StringIO()
    write_csv(analyze(loop.store), out)
    rows = out.getvalue().splitlines()
    assert rows[0].endswith(",regressions") and rows[2].endswith(",9")


def test_an_attempt_that_fixed_more_while_breaking_some_is_kept_to_repair(tmp_path: Path) -> None:
    """Below the baseline, yet not reverted: it fixed a target, so the next attempt starts from
    its tree and repairs the two tests it broke (rollback.py)."""
    found: list[str] = []

    def look(workdir: Path) -> None:
        found.append((workdir / "failing.txt").read_text())

    plan = {
        1: Step(write={"failing.txt": "1,2,3,4"}),
        2: Step(write={"failing.txt": "0"}, before=look),
    }
    loop = make_loop(tmp_path, plan, evaluator=fake_evaluator(CountedTests()), max_iterations=2)
    (tmp_path / "failing.txt").write_text("3")
    loop.start()
    state = loop.state()
    first = loop.reporter.records[0]
    assert first.ralph is not None and (first.ralph.fixed, first.ralph.regressions) == (1, 2)
    assert state.baseline is not None and first.reward < state.baseline.reward
    assert not loop.reporter.noted("restored the code")
    assert found == ["1,2,3,4"]  # attempt 2 started from attempt 1's tree
    assert state.status == "completed"
