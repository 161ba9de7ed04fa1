"""Output decides the parser, not the command: pytest, mypy and ruff behind `make test`,
`sh -c "…"` or a script are read as themselves (evaluators/shell.read_as_tool)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from ralph.config import CheckSpec, parse_check
from ralph.evaluators.base import CheckOutcome
from ralph.evaluators.suite import make_check

PY = shlex.quote(sys.executable)
TESTS = 'def test_ok():\n    pass\n\n\ndef test_bad():\n    assert "1K" == "1k"\n'


def project(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "project"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def run(root: Path, command: str) -> CheckOutcome:
    spec = parse_check(command)
    assert spec.parser == "shell"  # the command names no tool the config knows
    return make_check(spec, timeout=120, cap=10**5).run(root)


def assert_read_as_pytest(outcome: CheckOutcome) -> None:
    assert outcome.result.status == "fail"
    (error,) = outcome.errors
    assert (error.type, error.rule, error.file) == (
        "test_failure",
        "tests/test_a.py::test_bad",
        "tests/test_a.py",
    )
    # never a fragment of pytest's diff ("E         - 1k") as the finding
    assert "AssertionError" in error.message and not error.message.startswith("E ")
    assert outcome.score == 0.5
    assert outcome.metrics is not None and outcome.metrics.tests_failed == 1


def test_pytest_behind_sh_c_is_read_as_pytest(tmp_path: Path) -> None:
    root = project(tmp_path, {"tests/test_a.py": TESTS})
    command = f'sh -c "export LANG=C.UTF-8; {PY} -mpytest -q -p no:cacheprovider"'
    assert_read_as_pytest(run(root, command))


def test_pytest_behind_make_test_is_read_as_pytest(tmp_path: Path) -> None:
    root = project(
        tmp_path,
        {
            "tests/test_a.py": TESTS,
            "Makefile": f"test:\n\t{PY} -m pytest -p no:cacheprovider\n",
        },
    )
    assert_read_as_pytest(run(root, "make test"))


def test_mypy_behind_a_script_is_read_as_mypy(tmp_path: Path) -> None:
    root = project(
        tmp_path,
        {
            "calc/typed.py": "def label(n: int) -> str:\n    return n\n",
            "check.sh": f"exec {PY} -m mypy --no-incremental calc/typed.py\n",
        },
    )
    outcome = run(root, "sh check.sh")
    (error,) = outcome.errors
    assert (error.type, error.file, error.line, error.rule) == (
        "type_error",
        "calc/typed.py",
        2,
        "return-value",
    )


def test_output_of_no_known_tool_fails_with_its_tail(tmp_path: Path) -> None:
    root = project(tmp_path, {"x.txt": ""})
    spec = CheckSpec("build", "echo broken; exit 2", "shell")
    outcome = make_check(spec, timeout=60, cap=10**5).run(root)
    (error,) = outcome.errors
    assert (error.type, error.message) == ("other", "broken")
