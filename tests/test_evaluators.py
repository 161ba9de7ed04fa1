"""The evaluator on real pytest, mypy and ruff runs over small generated projects."""

from __future__ import annotations

import _thread
import json
import shlex
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ralph.cli.check_view import CheckReport
from ralph.config import CheckSpec
from ralph.errors import ConfigError, PreflightError
from ralph.evaluators import mypy as mypy_module
from ralph.evaluators.base import CheckOutcome, Evaluation, OutputCallback
from ralph.evaluators.judging import Baseline
from ralph.evaluators.suite import (
    CheckSuite,
    fingerprint,
    make_check,
    missing_tool,
    verification_type,
)
from ralph.glyphs import plural
from ralph.memory.state import BaselineSummary
from ralph.records import CheckResult, CheckStatus, Diagnostic, EvaluatorOutput, to_json
from ralph.testing import FakeCheck

from .fakes.processes import alive

PY = shlex.quote(sys.executable)
PYTEST = f"{PY} -m pytest -q"
MYPY = f"{PY} -m mypy calc/typed.py"
RUFF = f"{PY} -m ruff check --isolated --no-cache --select F --output-format=concise calc"

CORE = """\
def add(a: int, b: int) -> int:
    return a + b


def divide(a: int, b: int) -> float:
    return a / b
"""
TYPED = """\
from calc.core import add


def label(n: int) -> str:
    return n


def total() -> int:
    return add(1, "2")


def mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


ints: list[int] = [1, 2]
mean(ints)
"""
LINT = """\
import os
import sys


def f() -> int:
    return undefined_name  # type: ignore[name-defined]
"""
TESTS = """\
import pytest

from calc.core import add, divide


def test_add():
    assert add(2, 2) == 4


def test_add_wrong():
    result = add(1, 1)
    assert result == 3, "adding is broken"


def test_divide_by_zero():
    assert divide(1, 0) == 0


class TestParams:
    @pytest.mark.parametrize("n", [1, 2])
    def test_one(self, n):
        assert n == 1


@pytest.mark.skip(reason="not today")
def test_skipped():
    pass
"""


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def project(tmp_path: Path) -> Path:
    """An empty project folder beside `tmp_path`'s side files: what a check writes in the tree
    is put back after the evaluation, so a test's side channel lives outside it."""
    root = tmp_path / "project"
    root.mkdir()
    return root


def line_of(root: Path, name: str, needle: str) -> int:
    """1-based line of the first line of `name` containing `needle`."""
    lines = (root / name).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if needle in line)


def outcome(evaluation: Evaluation, name: str) -> CheckOutcome:
    return next(o for o in evaluation.outcomes if o.spec.name == name)


def run_one(root: Path, spec: CheckSpec, baseline: int | None = None) -> CheckOutcome:
    return make_check(spec, timeout=120, cap=200_000).run(root, baseline_errors=baseline)


# --- one broken project, evaluated once with pytest + mypy + ruff -------------------------


@dataclass
class Evaluated:
    root: Path
    suite: CheckSuite
    evaluation: Evaluation


SPECS = [
    CheckSpec("tests", PYTEST, "pytest"),
    CheckSpec("mypy", MYPY, "mypy"),
    CheckSpec("ruff", RUFF, "ruff"),
]


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> Evaluated:
    root = write(
        tmp_path_factory.mktemp("broken"),
        {
            "calc/__init__.py": "",
            "calc/core.py": CORE,
            "calc/typed.py": TYPED,
            "calc/lint.py": LINT,
            "tests/test_core.py": TESTS,
        },
    )
    suite = CheckSuite(SPECS, check_timeout=120)
    suite.preflight()
    return Evaluated(root, suite, suite.evaluate(root))


def test_pytest_failures_carry_test_id_file_line_and_message(broken: Evaluated) -> None:
    tests = outcome(broken.evaluation, "tests")
    root = broken.root
    assert tests.result.status == "fail"
    assert tests.result.exit_code == 1
    assert (tests.metrics.tests_passed, tests.metrics.tests_failed) == (2, 3)
    assert tests.metrics.tests_total == 5  # the skipped test is not counted
    assert tests.score == pytest.approx(2 / 5)
    wrong, zero, param = tests.errors
    assert wrong.type == "test_failure"
    assert wrong.rule == "tests/test_core.py::test_add_wrong"
    assert (wrong.file, wrong.line) == (
        "tests/test_core.py",
        line_of(root, "tests/test_core.py", "assert result == 3"),
    )
    assert wrong.message.splitlines()[0] == "AssertionError: adding is broken"
    assert wrong.stack_trace is not None and "assert 2 == 3" in wrong.stack_trace
    # The deepest frame inside the project is where the error happened: the library.
    assert zero.rule == "tests/test_core.py::test_divide_by_zero"
    assert (zero.file, zero.line) == ("calc/core.py", line_of(root, "calc/core.py", "a / b"))
    assert zero.message == "ZeroDivisionError: division by zero"
    assert param.rule == "tests/test_core.py::TestParams::test_one[2]"
    assert (param.file, param.line) == (
        "tests/test_core.py",
        line_of(root, "tests/test_core.py", "assert n == 1"),
    )
    assert param.message == "assert 2 == 1"


def test_mypy_json_errors_with_columns_rules_and_hints(broken: Evaluated) -> None:
    mypy = outcome(broken.evaluation, "mypy")
    root = broken.root
    assert mypy.result.status == "fail"
    assert mypy.metrics.type_errors == 3
    assert {e.type for e in mypy.errors} == {"type_error"}
    assert {e.file for e in mypy.errors} == {"calc/typed.py"}
    assert [(e.line, e.column, e.rule) for e in mypy.errors] == [
        (line_of(root, "calc/typed.py", "return n"), 12, "return-value"),
        (line_of(root, "calc/typed.py", 'add(1, "2")'), 19, "arg-type"),
        (line_of(root, "calc/typed.py", "mean(ints)"), 6, "arg-type"),
    ]
    assert mypy.errors[0].message.startswith("Incompatible return value type")
    invariance = mypy.errors[2].message.splitlines()
    assert invariance[0].startswith('Argument 1 to "mean" has incompatible type')
    assert any(line.startswith("note:") and "invariant" in line for line in invariance[1:])


def test_ruff_errors_with_location_rule_and_fixability(broken: Evaluated) -> None:
    ruff = outcome(broken.evaluation, "ruff")
    assert ruff.result.status == "fail"
    assert ruff.metrics.lint_errors == 3
    assert [(e.type, e.file, e.line, e.column, e.rule) for e in ruff.errors] == [
        ("lint_error", "calc/lint.py", 1, 8, "F401"),
        ("lint_error", "calc/lint.py", 2, 8, "F401"),
        ("lint_error", "calc/lint.py", 6, 12, "F821"),
    ]
    assert ruff.errors[0].message == "`os` imported but unused (fixable: ruff check --fix)"
    assert ruff.errors[2].message == "Undefined name `undefined_name`"


def test_combined_output_without_a_baseline(broken: Evaluated) -> None:
    output = broken.evaluation.output
    assert output.passed is False
    assert output.verification_type == "combined"
    assert [(r.tool, r.status) for r in output.results or []] == [
        ("tests", "fail"),
        ("mypy", "fail"),
        ("ruff", "fail"),
    ]
    assert len(output.errors or []) == 3 + 3 + 3
    # mypy and ruff score 0 without a baseline: only the tests' 2/5 counts, at weight 0.5.
    assert output.reward_signal == pytest.approx(round(0.5 * 0.4 / 1.0, 4))
    assert output.metrics is not None
    assert (output.metrics.tests_passed, output.metrics.tests_failed) == (2, 3)
    assert (output.metrics.type_errors, output.metrics.lint_errors) == (3, 3)
    assert len(broken.evaluation.fingerprint) == 16
    counts = {o.spec.name: o.error_count for o in broken.evaluation.outcomes}
    assert counts == {"tests": 3, "mypy": 3, "ruff": 3}


def test_full_logs_are_kept_per_check(broken: Evaluated) -> None:
    logs = broken.evaluation.logs()
    assert set(logs) == {"tests", "mypy", "ruff"}
    assert "3 failed, 2 passed, 1 skipped" in logs["tests"]
    assert logs["ruff"].startswith("$ ") and "--output-format json" in logs["ruff"]
    assert "--output-format=concise" not in logs["ruff"]  # ruff rejects the option twice
    stored = outcome(broken.evaluation, "tests").result.stdout
    assert stored is not None and len(stored) <= 4100


def test_baseline_scales_mypy_and_ruff_and_text_mode_mypy_agrees(broken: Evaluated) -> None:
    # An old mypy (no JSON output) is read from its text format with the same result.
    prefix = f"{PY} -m mypy"
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(mypy_module._versions, (prefix, str(broken.root)), ((1, 10), False))
        suite = CheckSuite(SPECS, check_timeout=120)
        baseline = Baseline.legacy(
            BaselineSummary(check_error_counts={"tests": 3, "mypy": 6, "ruff": 4})
        )
        again = suite.evaluate(broken.root, baseline=baseline)
    assert "--show-column-numbers" in again.logs()["mypy"]
    assert " -O json" not in again.logs()["mypy"]
    first = outcome(broken.evaluation, "mypy").errors
    text = outcome(again, "mypy").errors
    assert [(e.file, e.line, e.column, e.rule) for e in text] == [
        (e.file, e.line, e.column, e.rule) for e in first
    ]
    assert [e.message for e in text] == [e.message for e in first]
    assert outcome(again, "mypy").score == pytest.approx(1 - 3 / 6)
    assert outcome(again, "ruff").score == pytest.approx(1 - 3 / 4)
    expected = (0.5 * 0.4 + 0.3 * 0.5 + 0.2 * 0.25) / (0.5 + 0.3 + 0.2)
    assert again.reward == round(expected, 4)
    assert again.fingerprint == broken.evaluation.fingerprint


def test_report_shows_each_check_and_the_first_diagnostics(broken: Evaluated) -> None:
    from rich.console import Console

    console = Console(record=True, width=200)
    console.print(CheckReport(broken.evaluation))
    text = console.export_text()
    line = line_of(broken.root, "tests/test_core.py", "assert result == 3")
    assert "2 passed, 3 failed" in text
    assert "3 type errors" in text and "3 lint errors" in text
    assert f"tests/test_core.py:{line}  AssertionError: adding is broken" in text
    assert "calc/lint.py:6  Undefined name `undefined_name`" in text
    assert "reward 0.20" in text


# --- pytest edge cases --------------------------------------------------------------------


def test_collection_errors_become_import_and_syntax_errors(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "calc/__init__.py": "",
            "calc/broken.py": "def f(:\n    pass\n",
            "tests/test_imports.py": "import nosuchmodule_xyz\n\n\ndef test_x():\n    pass\n",
            "tests/test_syntax.py": "from calc import broken\n\n\ndef test_y():\n    pass\n",
        },
    )
    result = run_one(root, CheckSpec("tests", PYTEST, "pytest"))
    assert result.result.status == "fail"
    assert result.score == 0.0
    assert result.metrics.tests_total == 0
    imports, syntax = result.errors
    assert (imports.type, imports.file, imports.line) == (
        "runtime_error",
        "tests/test_imports.py",
        1,
    )
    assert imports.message == "ModuleNotFoundError: No module named 'nosuchmodule_xyz'"
    assert (syntax.type, syntax.file, syntax.line) == ("syntax_error", "calc/broken.py", 1)
    assert syntax.message.startswith("SyntaxError")


def test_broken_conftest_is_read_from_the_text_output(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "conftest.py": "\nimport nosuch_plugin_xyz\n",
            "tests/test_a.py": "def test_a():\n    pass\n",
        },
    )
    result = run_one(root, CheckSpec("tests", PYTEST, "pytest"))
    assert result.result.status == "fail"
    (error,) = result.errors
    assert (error.type, error.file, error.line) == ("runtime_error", "conftest.py", 2)
    assert error.message == "ModuleNotFoundError: No module named 'nosuch_plugin_xyz'"


def test_no_tests_collected_fails_with_a_clear_message(tmp_path: Path) -> None:
    root = write(tmp_path, {"tests/test_a.py": "def helper():\n    pass\n"})
    result = run_one(root, CheckSpec("tests", PYTEST, "pytest"))
    assert (result.result.status, result.result.exit_code) == ("fail", 5)
    (error,) = result.errors
    assert error.message.startswith("no tests ran")
    assert result.score == 0.0


def test_pytest_usage_error_is_a_check_error(tmp_path: Path) -> None:
    result = run_one(tmp_path, CheckSpec("tests", f"{PYTEST} no_such_dir", "pytest"))
    assert (result.result.status, result.result.exit_code) == ("error", 4)
    (error,) = result.errors
    assert error.type == "runtime_error"
    assert "file or directory not found: no_such_dir" in error.message


def test_pytest_behind_a_wrapper_still_reports_through_junit(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "run-tests.sh": f'exec {PYTEST} "$@"\n',
            "tests/test_a.py": "def test_ok():\n    pass\n\n\ndef test_bad():\n    assert 1 == 2\n",
        },
    )
    check = make_check(CheckSpec("tests", "sh run-tests.sh", "pytest"), timeout=120, cap=10**5)
    result = check.run(root)
    assert getattr(check, "last_log").startswith("$ sh run-tests.sh\n")  # noqa: B009
    (error,) = result.errors
    assert (error.rule, error.file, error.line) == (
        "tests/test_a.py::test_bad",
        "tests/test_a.py",
        6,
    )
    assert result.score == 0.5


def test_fingerprint_ignores_line_shifts_but_not_new_failures(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "calc/__init__.py": "",
            "calc/core.py": CORE,
            "tests/test_core.py": TESTS,
        },
    )
    suite = CheckSuite([CheckSpec("tests", PYTEST, "pytest")])
    before = suite.evaluate(root)
    for name in ("calc/core.py", "tests/test_core.py"):
        path = root / name
        path.write_text("# shifted\n\n\n" + path.read_text())
    shifted = suite.evaluate(root)
    assert [e.line for e in shifted.output.errors or []] == [
        (e.line or 0) + 3 for e in before.output.errors or []
    ]
    assert shifted.fingerprint == before.fingerprint
    assert shifted.output.verification_type == "unit_tests"
    path = root / "tests/test_core.py"
    path.write_text(path.read_text().replace("== 3,", "== 2,"))
    fixed_one = suite.evaluate(root)
    assert fixed_one.fingerprint != before.fingerprint
    assert fixed_one.reward > before.reward


# --- a clean project ----------------------------------------------------------------------


def test_clean_project_passes_with_reward_one(tmp_path: Path) -> None:
    root = write(
        tmp_path,
        {
            "calc/__init__.py": "",
            "calc/core.py": CORE,
            "calc/typed.py": """\
                from calc.core import add


                def three() -> int:
                    return add(1, 2)
                """,
            "tests/test_core.py": """\
                from calc.core import add


                def test_add():
                    assert add(1, 2) == 3
                """,
        },
    )
    evaluation = CheckSuite(SPECS).evaluate(root)
    assert evaluation.passed
    assert evaluation.reward == 1.0
    assert evaluation.output.errors == []
    assert [r.status for r in evaluation.output.results or []] == ["pass", "pass", "pass"]
    metrics = evaluation.output.metrics
    assert metrics is not None
    assert (metrics.tests_passed, metrics.tests_total, metrics.type_errors) == (1, 1, 0)
    assert metrics.lint_errors == 0


# --- mypy and ruff edge cases -------------------------------------------------------------


def test_mypy_text_parser_attaches_notes_and_reads_missing_columns(tmp_path: Path) -> None:
    stdout = (
        'pkg/a.py:3: error: Name "x" is not defined  [name-defined]\n'
        'pkg/a.py:3: note: Did you mean "y"?\n'
        "pkg/b.py:7:5: error: invalid syntax  [syntax]\n"
        'pkg/b.py:9: note: Revealed type is "int"\n'
        f"{tmp_path}/pkg/c.py:1:1: error: Missing return statement  [empty-body]\n"
        "Found 3 errors in 3 files (checked 3 source files)\n"
    )
    errors = mypy_module.parse_output(stdout, tmp_path)
    assert [(e.type, e.file, e.line, e.column, e.rule) for e in errors] == [
        ("type_error", "pkg/a.py", 3, None, "name-defined"),
        ("syntax_error", "pkg/b.py", 7, 5, "syntax"),
        ("type_error", "pkg/c.py", 1, 1, "empty-body"),
    ]
    assert errors[0].message == 'Name "x" is not defined\nnote: Did you mean "y"?'
    assert errors[1].message == "invalid syntax"  # a note on another line is not attached


def test_mypys_syntax_errors_are_said_as_syntax_errors_not_type_errors(tmp_path: Path) -> None:
    from rich.console import Console

    from ralph.evaluators.describe import check_summary

    root = write(tmp_path, {"ok.py": "x: int = 1\n", "broken.py": "def f(:\n    pass\n"})
    result = run_one(root, CheckSpec("mypy", f"{PY} -m mypy --no-incremental .", "mypy"))
    assert result.result.status == "fail" and result.errors  # one or two, by mypy's version
    assert {e.type for e in result.errors} == {"syntax_error"}
    assert result.metrics.type_errors is None  # mypy stopped there: no type was checked
    said = plural(len(result.errors), "syntax error")
    assert check_summary(result) == said
    console = Console(record=True, width=200, force_terminal=True)
    console.print(CheckReport(Evaluation(EvaluatorOutput(False, "combined"), [result], "fp")))
    assert said in console.export_text() and "type error" not in console.export_text()


def test_mypy_bad_usage_is_a_check_error(tmp_path: Path) -> None:
    result = run_one(tmp_path, CheckSpec("mypy", f"{PY} -m mypy --no-such-flag .", "mypy"))
    assert (result.result.status, result.result.exit_code) == ("error", 2)
    (error,) = result.errors
    assert error.type == "runtime_error"
    assert error.stack_trace is not None and "no-such-flag" in error.stack_trace


def test_ruff_syntax_errors_and_scores(tmp_path: Path) -> None:
    root = write(tmp_path, {"ok.py": "x = 1\n", "broken.py": "x = 1\ndef f(:\n    pass\n"})
    command = f"{PY} -m ruff check --isolated --no-cache ."
    result = run_one(root, CheckSpec("ruff", command, "ruff"), baseline=4)
    assert result.result.status == "fail"
    assert result.errors, "ruff reported no syntax error"
    assert {(e.type, e.file, e.rule) for e in result.errors} == {
        ("syntax_error", "broken.py", "invalid-syntax")
    }
    assert result.errors[0].line == 2
    assert result.score == pytest.approx(max(0.0, 1 - len(result.errors) / 4))


def test_ruff_configuration_error_is_a_check_error(tmp_path: Path) -> None:
    command = f"{PY} -m ruff check --isolated --select NOPE999 ."
    result = run_one(tmp_path, CheckSpec("ruff", command, "ruff"))
    assert (result.result.status, result.result.exit_code) == ("error", 2)
    assert result.errors[0].type == "runtime_error"


def test_ruff_format_check_reports_each_file(tmp_path: Path) -> None:
    root = write(tmp_path, {"ugly.py": "x   =  1\n", "fine.py": "x = 1\n"})
    command = f"{PY} -m ruff format --isolated --check ."
    result = run_one(root, CheckSpec("format", command, "ruff"))
    assert result.result.status == "fail"
    assert [(e.file, e.rule) for e in result.errors] == [("ugly.py", "format")]


# --- shell checks, timeouts, secrets, parallelism ----------------------------------------


def test_shell_check_passes_on_exit_zero_and_fails_with_the_output_tail(tmp_path: Path) -> None:
    ok = run_one(tmp_path, CheckSpec("ok", "true", "shell"))
    assert (ok.result.status, ok.score, ok.errors) == ("pass", 1.0, [])
    command = "for i in $(seq 1 30); do echo line$i; done; echo boom >&2; exit 3"
    bad = run_one(tmp_path, CheckSpec("bad", command, "shell"))
    assert (bad.result.status, bad.result.exit_code, bad.score) == ("fail", 3, 0.0)
    (error,) = bad.errors
    assert error.type == "other"
    lines = error.message.splitlines()
    assert len(lines) == 20
    assert lines[0] == "line12" and lines[-1] == "boom"


def test_shell_command_not_found_is_a_check_error(tmp_path: Path) -> None:
    result = run_one(tmp_path, CheckSpec("missing", "no-such-program-xyz", "shell"))
    assert (result.result.status, result.result.exit_code) == ("error", 127)
    assert result.errors[0].type == "runtime_error"


def test_hung_check_is_killed_at_its_timeout_with_its_grandchildren(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"  # outside the tree: ralph puts back what checks write
    command = f"sh -c 'sleep 60 & echo $! > {pid_file}; wait'"
    spec = CheckSpec("hang", command, "shell", timeout=0.5)
    evaluation = CheckSuite([spec], check_timeout=900).evaluate(project(tmp_path))
    (error,) = evaluation.output.errors or []
    assert evaluation.outcomes[0].result.status == "error"
    assert error.type == "timeout"
    assert error.message == (
        "check 'hang' did not finish within 0.5 s and was killed with its child processes"
    )
    assert not alive(int(pid_file.read_text()))
    assert evaluation.reward == 0.0


def test_secrets_printed_by_checks_never_reach_the_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "hunter2-very-secret-value"
    monkeypatch.setenv("DEMO_API_KEY", secret)
    root = write(
        tmp_path,
        {
            "tests/test_secret.py": """\
                import os


                def test_key():
                    print(os.environ["DEMO_API_KEY"])
                    assert os.environ["DEMO_API_KEY"] == "expected"
                """,
        },
    )
    suite = CheckSuite(
        [
            CheckSpec("tests", PYTEST, "pytest"),
            CheckSpec("echo", 'echo "$DEMO_API_KEY"; exit 1', "shell"),
        ]
    )
    evaluation = suite.evaluate(root)
    dumped = json.dumps(to_json(evaluation.output))
    assert secret not in dumped
    assert secret not in "".join(evaluation.logs().values())
    test_error = outcome(evaluation, "tests").errors[0]
    assert "[REDACTED:DEMO_API_KEY]" in test_error.message
    assert "[REDACTED:DEMO_API_KEY]" in outcome(evaluation, "echo").errors[0].message


def test_checks_run_in_parallel(tmp_path: Path) -> None:
    # Each check waits (up to 10 s) for the other to have started: run one after the other,
    # the first would give up and fail.
    def waits_for(me: str, other: str) -> CheckSpec:
        command = (
            f"touch {tmp_path}/{me}.started; for i in $(seq 1 200); do "
            f"[ -f {tmp_path}/{other}.started ] && exit 0; sleep 0.05; done; exit 1"
        )
        return CheckSpec(me, command, "shell")

    streamed: list[tuple[str, str]] = []

    def on_output(name: str, chunk: str) -> None:
        streamed.append((name, chunk))

    suite = CheckSuite([waits_for("a", "b"), waits_for("b", "a"), CheckSpec("say", "echo hi")])
    evaluation = suite.evaluate(project(tmp_path), on_output=on_output)
    assert [o.result.status for o in evaluation.outcomes] == ["pass", "pass", "pass"]
    assert evaluation.passed and evaluation.reward == 1.0
    assert evaluation.output.verification_type == "combined"
    assert streamed == [("say", "hi\n")]


def test_ctrl_c_during_evaluation_kills_running_checks(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    command = f"sh -c 'sleep 60 & echo $! > {pid_file}.tmp; mv {pid_file}.tmp {pid_file}; wait'"
    suite = CheckSuite([CheckSpec("hang", command, "shell")])

    def interrupt_when_started() -> None:
        deadline = time.monotonic() + 30
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        _thread.interrupt_main()

    helper = threading.Thread(target=interrupt_when_started, daemon=True)
    helper.start()
    with pytest.raises(KeyboardInterrupt):
        suite.evaluate(project(tmp_path))
    helper.join()
    assert not alive(int(pid_file.read_text()))


# --- preflight, configuration, weights ----------------------------------------------------


def test_preflight_names_a_missing_tool_and_how_to_fix_it() -> None:
    suite = CheckSuite([CheckSpec("lint", "no-such-linter-xyz --strict .", "shell")])
    with pytest.raises(PreflightError) as info:
        suite.preflight()
    assert "no-such-linter-xyz" in info.value.message
    assert info.value.hint is not None
    assert info.value.hint.startswith("pip install no-such-linter-xyz or drop the check")


def test_preflight_names_a_missing_python_module() -> None:
    suite = CheckSuite([CheckSpec("tests", f"{PY} -m nosuchtool_xyz -q", "pytest")])
    with pytest.raises(PreflightError) as info:
        suite.preflight()
    assert "`nosuchtool_xyz`" in info.value.message
    assert info.value.hint is not None and "pip install nosuchtool_xyz" in info.value.hint


def test_preflight_accepts_installed_tools_and_shell_builtins() -> None:
    suite = CheckSuite([*SPECS, CheckSpec("build", "cd . && true", "shell")])
    assert [missing_tool(check) for check in suite.checks] == [None] * (len(SPECS) + 1)
    assert suite.preflight() is None  # type: ignore[func-returns-value]


def test_preflight_without_checks_says_how_to_add_them() -> None:
    with pytest.raises(PreflightError) as info:
        CheckSuite([]).preflight()
    hint = info.value.hint or ""
    assert "--test CMD" in hint and "--check" in hint and "ralph init" in hint


def test_configuration_mistakes_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="unknown parser 'eslint'"):
        make_check(CheckSpec("js", "eslint .", "eslint"), timeout=None, cap=1000)
    twice = CheckSuite([CheckSpec("a", "true"), CheckSpec("a", "false")])
    with pytest.raises(ConfigError, match="two checks are named 'a'"):
        twice.preflight()


def test_a_spec_timeout_overrides_the_suite_default() -> None:
    own = make_check(CheckSpec("a", "true", timeout=5), timeout=900, cap=1000)
    default = make_check(CheckSpec("b", "true"), timeout=900, cap=1000)
    assert (getattr(own, "timeout"), getattr(default, "timeout")) == (5, 900)  # noqa: B009


class ScoredCheck(FakeCheck):
    """A check in process that scores `score` (1.0 passes) and keeps the baseline it was given."""

    def __init__(self, spec: CheckSpec, score: float) -> None:
        self.spec, self.score = spec, score
        self.seen_baseline: int | None = None

    def run(
        self,
        cwd: Path,
        *,
        baseline_errors: int | None = None,
        on_output: OutputCallback | None = None,
    ) -> CheckOutcome:
        self.seen_baseline = baseline_errors
        status: CheckStatus = "pass" if self.score == 1.0 else "fail"
        return CheckOutcome(self.spec, CheckResult(self.spec.name, status), score=self.score)


def test_weights_default_by_parser_and_are_renormalised(tmp_path: Path) -> None:
    checks = [
        ScoredCheck(CheckSpec("tests", "t", "pytest"), 0.5),
        ScoredCheck(CheckSpec("types", "m", "mypy"), 1.0),
    ]
    evaluation = CheckSuite.from_checks(checks).evaluate(tmp_path)
    assert evaluation.reward == round((0.5 * 0.5 + 0.3 * 1.0) / 0.8, 4)
    assert evaluation.output.verification_type == "combined"


def test_configured_weights_override_the_spec_and_the_default(tmp_path: Path) -> None:
    checks = [
        ScoredCheck(CheckSpec("tests", "t", "pytest", weight=3.0), 0.0),
        ScoredCheck(CheckSpec("lint", "r", "ruff"), 1.0),
        ScoredCheck(CheckSpec("docs", "make docs", "shell"), 1.0),
    ]
    suite = CheckSuite.from_checks(checks, weights={"docs": 0.0})
    baseline = Baseline.legacy(BaselineSummary(check_error_counts={"lint": 7}))
    evaluation = suite.evaluate(tmp_path, baseline=baseline)
    assert evaluation.reward == round(0.2 / 3.2, 4)
    assert checks[1].seen_baseline == 7 and checks[0].seen_baseline is None


def test_a_check_that_raises_becomes_an_error_not_a_crash(tmp_path: Path) -> None:
    class Exploding(ScoredCheck):
        def run(
            self,
            cwd: Path,
            *,
            baseline_errors: int | None = None,
            on_output: OutputCallback | None = None,
        ) -> CheckOutcome:
            raise ValueError("unreadable output")

    fine = ScoredCheck(CheckSpec("fine", "true"), 1.0)
    evaluation = CheckSuite.from_checks([fine, Exploding(CheckSpec("boom", "x"), 0.0)]).evaluate(
        tmp_path
    )
    assert [o.result.status for o in evaluation.outcomes] == ["pass", "error"]
    (error,) = evaluation.output.errors or []
    assert error.type == "runtime_error"
    assert error.message == "ralph could not run check 'boom': ValueError: unreadable output"
    assert evaluation.reward == 0.5 and not evaluation.passed


def test_reward_of_all_zero_weights_counts_checks_equally(tmp_path: Path) -> None:
    checks = [
        ScoredCheck(CheckSpec("a", "x", weight=0), 1.0),
        ScoredCheck(CheckSpec("b", "y", weight=0), 0.0),
    ]
    assert CheckSuite.from_checks(checks).evaluate(tmp_path).reward == 0.5


def test_verification_type_follows_the_parsers() -> None:
    def specs(*parsers: str) -> list[CheckSpec]:
        return [CheckSpec(p, p, p) for p in parsers]

    assert verification_type(specs("pytest", "pytest")) == "unit_tests"
    assert verification_type(specs("mypy")) == "type_check"
    assert verification_type(specs("ruff")) == "lint"
    assert verification_type(specs("shell")) == "combined"
    assert verification_type(specs("pytest", "ruff")) == "combined"


def test_fingerprint_uses_test_ids_and_messages_not_lines() -> None:
    def evaluated(*errors: Diagnostic) -> list[CheckOutcome]:
        spec = CheckSpec("c", "x")
        return [CheckOutcome(spec, CheckResult("c", "fail"), list(errors))]

    test = Diagnostic("test_failure", "assert 1 == 2", "t.py", 10, rule="t.py::test_a")
    moved = Diagnostic("test_failure", "assert 1 == 3", "t.py", 40, rule="t.py::test_a")
    other = Diagnostic("test_failure", "assert 1 == 2", "t.py", 10, rule="t.py::test_b")
    assert fingerprint(evaluated(test)) == fingerprint(evaluated(moved))
    assert fingerprint(evaluated(test)) != fingerprint(evaluated(other))
    lint = Diagnostic("lint_error", "`os` imported but unused", "a.py", 1, 8, rule="F401")
    lint_moved = Diagnostic("lint_error", "`os` imported but unused", "a.py", 9, 8, rule="F401")
    lint_sys = Diagnostic("lint_error", "`sys` imported but unused", "a.py", 1, 8, rule="F401")
    assert fingerprint(evaluated(lint, test)) == fingerprint(evaluated(moved, lint_moved))
    assert fingerprint(evaluated(lint)) != fingerprint(evaluated(lint_sys))


@pytest.fixture(autouse=True)
def _no_stray_checks() -> Iterator[None]:
    """Every test leaves no registered running check behind."""
    from ralph.evaluators import command as shell

    yield
    assert not shell._LIVE
