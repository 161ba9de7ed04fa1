"""An attempt that breaks what worked shows as harm: its reward below the baseline's, and its
line, record and commit message say what it broke, per check and in that check's own counts
(`broke what worked (tests: 3 → 12 failing, 9 new; mypy: 1 new error)`)."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path
from typing import Any

from ralph.analyze.report import write_csv
from ralph.analyze.stats import analyze
from ralph.cli.analyze_view import curve
from ralph.cli.live import PlainReporter
from ralph.evaluators.base import CheckOutcome, OutputCallback
from ralph.loop.result import loop_status
from ralph.records import CheckResult, Diagnostic, ErrorType, Metrics
from ralph.testing import FakeCheck, Loop, Step, fake_evaluator, make_loop

TESTS = [f"tests/test_lib.py::test_{n}" for n in range(20)]


class CountedTests(FakeCheck):
    """A pytest-like check of 20 tests: `failing.txt` holds N (the first N fail) or the failing
    tests' numbers, comma-separated."""

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


class Findings(FakeCheck):
    """A mypy- or ruff-like check: `NAME.txt` holds its findings, comma-separated."""

    def __init__(self, name: str, kind: ErrorType = "type_error") -> None:
        super().__init__(name, parser=name)
        self.kind: ErrorType = kind

    def run(
        self,
        cwd: Path,
        *,
        baseline_errors: int | None = None,
        on_output: OutputCallback | None = None,
    ) -> CheckOutcome:
        text = (cwd / f"{self.spec.name}.txt").read_text().strip()
        errors = [
            Diagnostic(self.kind, f"finding {key}", file=f"lib/{key}.py", line=1, rule="X1")
            for key in text.split(",")
            if key
        ]
        status = "fail" if errors else "pass"
        return CheckOutcome(
            self.spec, CheckResult(self.spec.name, status, int(bool(errors))), errors
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
    assert subject.endswith(
        "iteration 1 — tests fail, broke what worked (tests: 3 → 12 failing, 9 new)"
    )
    change = round(first.reward - state.baseline.reward, 2)
    assert f"Reward: {first.reward:.2f} ({change:+.2f} from the baseline's" in body
    assert change < 0
    # the terminal line: the harm, and the broken tests listed before the baseline's failures
    out = io.StringIO()
    PlainReporter(out).evaluated(1, loop.reporter.evaluations[1])
    lines = out.getvalue().splitlines()
    assert "iteration 1: reward" in lines[0]
    assert "broke what worked (tests: 3 → 12 failing, 9 new) — tests fail" in lines[0]
    assert "test_3 failed" in lines[1]  # the first broken test, not the baseline's test_0
    assert loop.reporter.noted(
        "iteration 1: rolled back: broke what worked before; restored the code"
    )
    # a clean success says nothing of harm
    assert "broke" not in loop.workspace.messages[2].split("\n", 1)[0]
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
    assert loop.reporter.noted(
        "iteration 1: kept: broke what worked before, but fixed 1 target failure, more than the "
        "starting point (0); the next attempt repairs what it broke from here"
    )  # never silent: the line says why the harm stays
    assert [line.split(", but")[0] for line in loop_status(state.loop_id, tmp_path).worse] == [
        "iteration 1: kept: broke what worked before"
    ]  # and `ralph status` says it, replayed from the records
    assert found == ["1,2,3,4"]  # attempt 2 started from attempt 1's tree
    assert state.status == "completed"


def guarded_loop(root: Path) -> Loop:
    """As on python-dateutil: 6 of 20 tests fail, mypy has 3 findings and ruff 2 before the
    loop (guards). Attempt 1 fixes 3 tests but breaks test_10 and adds a mypy finding (ruff as
    before); attempt 2 breaks nothing and still fails a test, its guards as before."""
    plan = {
        1: Step(write={"failing.txt": "0,1,2,10", "mypy.txt": "a,b,c,d"}),
        2: Step(write={"failing.txt": "0,1", "mypy.txt": "a,b,c"}),
    }
    checks = (CountedTests(), Findings("mypy"), Findings("ruff", "lint_error"))
    loop = make_loop(root, plan, evaluator=fake_evaluator(*checks), max_iterations=2)
    for name, text in {
        "failing.txt": "0,1,2,3,4,5",
        "mypy.txt": "a,b,c",
        "ruff.txt": "x,y",
    }.items():
        (root / name).write_text(text)
    loop.start()
    return loop


def test_the_harm_is_said_per_check_in_its_own_counts(tmp_path: Path) -> None:
    """Never the tests and the guards' findings added up (6 + 3 + 2 = 11 → 9), never "worse"
    beside a count that fell: the tests' own counts, and the one finding mypy added."""
    loop = guarded_loop(tmp_path)
    out = io.StringIO()
    PlainReporter(out).evaluated(1, loop.reporter.evaluations[1])
    line = out.getvalue().splitlines()[0]
    harm = "broke what worked (tests: 6 → 4 failing, 1 new; mypy: 1 new error)"
    assert f"reward {loop.reporter.records[0].reward:.2f} — {harm} — tests fail" in line
    assert "ruff guard ok (2 from before)" in line
    assert "worse:" not in line and "11 →" not in line
    subject = loop.workspace.messages[1].split("\n", 1)[0]
    assert subject.endswith(f"iteration 1 — tests fail (+1 more failing), {harm}")


def test_a_guard_no_worse_than_before_does_not_count_as_failing(tmp_path: Path) -> None:
    """Attempt 2 fails one target; mypy and ruff still fail, only as much as before the loop:
    the subject names the tests alone, as the iteration's line says the guards are ok."""
    loop = guarded_loop(tmp_path)
    out = io.StringIO()
    PlainReporter(out).evaluated(2, loop.reporter.evaluations[2])
    line = out.getvalue().splitlines()[0]
    assert "mypy guard ok (3 from before)" in line and "ruff guard ok (2 from before)" in line
    subject = loop.workspace.messages[2].split("\n", 1)[0]
    assert subject.endswith("iteration 2 — tests fail")


def test_status_reads_no_record_when_no_reward_fell(tmp_path: Path, monkeypatch: Any) -> None:
    """An attempt that broke what worked scores below the baseline, so a loop whose rewards
    never fell below the best before them has nothing "worse" to say: `ralph status` answers
    from the state without reading (and schema-checking) every record."""
    from ralph.loop.rollback import may_have_worse
    from ralph.memory.store import MemoryStore

    plan = {1: Step(write={"failing.txt": "3"}), 2: Step(write={"failing.txt": "0"})}
    loop = make_loop(tmp_path, plan, evaluator=fake_evaluator(CountedTests()), max_iterations=2)
    (tmp_path / "failing.txt").write_text("3")
    loop.start()
    state = loop.state()
    assert not may_have_worse(state)

    def refused(store: MemoryStore, loop_id: str) -> list[Any]:
        raise AssertionError("records read")

    monkeypatch.setattr(MemoryStore, "valid_records", refused)
    assert loop_status(state.loop_id, tmp_path).worse == []
    fell = dataclasses.replace(state, reward_history=[*state.reward_history, 0.0])
    assert may_have_worse(fell)
