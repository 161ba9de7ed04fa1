"""`ralph reflections show` says each check as the run did: its role and verdict (a guard failing
only as before the loop is no failure of the attempt), its own diagnostics under its own name,
and counts that say which are new."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from ralph.memory.shown import RecordView
from ralph.records import CheckResult, Diagnostic, IterationRecord, RalphExtension
from ralph.testing import Loop, Step, fake_evaluator, make_loop

from .fakes.records import record
from .test_harm import CountedTests, Findings

OLD_RUFF = ",".join(f"r{n}" for n in range(15))


def drawn(rec: IterationRecord) -> list[str]:
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(RecordView(rec), crop=False)
    return out.getvalue().splitlines()


def trial_loop(root: Path, ruff: str = OLD_RUFF) -> Loop:
    """As the semver trial: 3 target tests fail, mypy has 1 old finding and ruff 15; the attempt
    fixes the 3 tests and breaks 12 others (and writes `ruff` as ruff's findings)."""
    broken = ",".join(str(n) for n in range(3, 15))
    plan = {1: Step(write={"failing.txt": broken, "ruff.txt": ruff})}
    checks = [CountedTests(), Findings("mypy"), Findings("ruff", "lint_error")]
    loop = make_loop(root, plan, evaluator=fake_evaluator(*checks), max_iterations=1)
    (root / "failing.txt").write_text("3")  # the first 3 fail
    (root / "mypy.txt").write_text("a")
    (root / "ruff.txt").write_text(OLD_RUFF)
    loop.start()
    return loop


def test_guards_failing_as_before_are_said_as_the_run_said_them(tmp_path: Path) -> None:
    first = trial_loop(tmp_path).reporter.records[0]
    lines = drawn(first)
    checks = lines.index("checks")
    assert lines[checks + 1] == "  tests: target, fail: 12 failures, 12 new, 3 fixed"
    listed = lines[checks + 2 : checks + 12]
    assert all(line.startswith("    tests/test_lib.py  ") for line in listed), lines
    assert "test_3 failed" in listed[0]  # the tests' own failures, under their name
    assert lines[checks + 12] == "    ... 2 more"  # of this check's 12, not all checks' 28
    assert lines[checks + 13] == "  mypy: guard, as before (1 old finding)"
    assert lines[checks + 14] == "  ruff: guard, as before (15 old findings)"
    assert not any("lib/r" in line or "finding a" in line for line in lines)  # old ones
    assert "failing checks" not in lines


def test_a_guard_that_got_worse_lists_its_findings_under_its_name(tmp_path: Path) -> None:
    first = trial_loop(tmp_path, ruff=OLD_RUFF + ",new").reporter.records[0]
    assert first.ralph is not None and first.ralph.check_verdicts is not None
    assert first.ralph.check_verdicts["ruff"].new == 1
    lines = drawn(first)
    at = lines.index("  ruff: guard worse (+1 new, 15 old findings)")
    assert lines[at - 1] == "  mypy: guard, as before (1 old finding)"
    under = lines[at + 1 : at + 12]
    assert all("lib/r" in line or "lib/new.py" in line for line in under[:10]), under
    assert under[10] == "    ... 6 more"


def test_a_record_without_verdicts_keeps_its_diagnostics_apart_from_the_last_check() -> None:
    rec = record(1)
    rec.evaluator_output.results = [
        CheckResult("pytest", "fail"),
        CheckResult("mypy", "fail"),
        CheckResult("ruff", "fail"),
    ]
    rec.evaluator_output.errors = [Diagnostic("test_failure", "boom", file="t.py", line=3)]
    rec.ralph = RalphExtension(
        check_roles={"pytest": "target", "mypy": "guard", "ruff": "guard"}, regressions=0
    )
    lines = drawn(rec)
    at = lines.index("failing checks")
    assert lines[at + 1 : at + 6] == [
        "  pytest: target, fail",
        "  mypy: guard, as before",
        "  ruff: guard, as before",
        "  diagnostics of all checks:",
        "    t.py:3  boom",
    ]
