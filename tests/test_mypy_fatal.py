"""mypy that stops before checking any code (a duplicate module, a folder that is not a package,
a target that does not exist) is a check that cannot run, never a failure with one finding: a
guard counting that one "finding" could never get worse, so it would guard nothing. Real mypy
on small generated projects."""

from __future__ import annotations

import json
import shlex
import sys
import textwrap
from pathlib import Path
from unittest.mock import patch

import pytest

from ralph.config import CheckSpec
from ralph.evaluators import detect
from ralph.evaluators import mypy as mypy_module
from ralph.evaluators.base import CheckOutcome
from ralph.evaluators.suite import CheckSuite, make_check
from ralph.loop.announce import baseline_notes

from .conftest import RunCli

PY = shlex.quote(sys.executable)
MYPY = f"{PY} -m mypy"

# semver 3.1.2's shape: two folders without __init__.py hold a module of the same name
DUPLICATE = {
    "src/pkg/__init__.py": "",
    "src/pkg/core.py": "def one() -> int:\n    return 1\n",
    "tests/coerce.py": "x = 1\n",
    "docs/coerce.py": "y = 2\n",
}


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def run_mypy(root: Path, args: str = ".") -> CheckOutcome:
    spec = CheckSpec("mypy", f"{MYPY} {args}", "mypy")
    return make_check(spec, timeout=120, cap=200_000).run(root, baseline_errors=None)


def test_duplicate_module_is_an_error_with_mypys_line_and_the_fix(tmp_path: Path) -> None:
    root = write(tmp_path, DUPLICATE)
    result = run_mypy(root)
    assert (result.result.status, result.result.exit_code) == ("error", 2)
    (error,) = result.errors
    first = error.message.splitlines()[0]
    assert 'Duplicate module named "coerce"' in first
    assert "`mypy src`" in first and "ralph init --force" in first
    assert len(first) <= 200  # the loop's warning quotes 200 characters of it
    assert result.metrics.type_errors is None  # not one type error


def test_old_mypy_text_output_wrapped_by_pretty_says_the_same(tmp_path: Path) -> None:
    root = write(tmp_path, {**DUPLICATE, "mypy.ini": "[mypy]\npretty = true\n"})
    check = make_check(CheckSpec("mypy", f"{MYPY} .", "mypy"), timeout=120, cap=200_000)
    with patch.dict(mypy_module._versions, {(MYPY, str(root)): ((1, 10), False)}):
        result = check.run(root, baseline_errors=None)
    assert result.result.status == "error"
    assert "--show-column-numbers" in (check.last_log or "")
    first = result.errors[0].message.splitlines()[0]
    assert 'Duplicate module named "coerce" (also at' in first
    assert "docs/coerce.py" in first  # the wrapped rest of mypy's line is joined back


def test_a_folder_that_is_not_a_package_and_a_missing_target_cannot_run(tmp_path: Path) -> None:
    root = write(tmp_path / "a", {"my-pkg/__init__.py": "", "my-pkg/a.py": "x = 1\n"})
    result = run_mypy(root)
    assert result.result.status == "error"
    assert "is not a valid Python package name" in result.errors[0].message.splitlines()[0]
    missing = run_mypy(write(tmp_path / "b", {"a.py": "x = 1\n"}), "src")
    assert missing.result.status == "error"
    assert "src: Cannot read file" in missing.errors[0].message.splitlines()[0]


def test_a_syntax_error_also_exits_2_but_is_a_finding(tmp_path: Path) -> None:
    root = write(tmp_path, {"a.py": "def f(:\n", "b.py": "x: int = 1\n"})
    result = run_mypy(root)
    assert (result.result.status, result.result.exit_code) == ("fail", 2)
    assert {(e.type, e.file) for e in result.errors} == {("syntax_error", "a.py")}


CRASHING = {  # a plugin bug: mypy crashes checking mod.py:8, after the error of line 1
    "crash_plugin.py": """\
        from mypy.plugin import Plugin

        def boom(ctx):
            raise RuntimeError("plugin bug")

        class Crash(Plugin):
            def get_function_hook(self, fullname):
                return boom if fullname == "mod.boom" else None

        def plugin(version):
            return Crash
        """,
    "mod.py": 'x: int = "s"\n\n\ndef boom() -> int:\n    return 1\n\n\ny = boom()\n',
    "mypy.ini": "[mypy]\nplugins = crash_plugin.py\n",
}


@pytest.mark.parametrize("version", [None, (1, 10)])  # JSON output, and text
def test_mypys_internal_error_is_an_error_with_its_line_not_one_finding(
    tmp_path: Path, version: tuple[int, int] | None
) -> None:
    root = write(tmp_path, CRASHING)
    check = make_check(
        CheckSpec("mypy", f"{MYPY} --no-incremental .", "mypy"), timeout=120, cap=200_000
    )
    versions = {} if version is None else {(MYPY, str(root)): (version, False)}
    with patch.dict(mypy_module._versions, versions):
        result = check.run(root, baseline_errors=None)
    assert (result.result.status, result.result.exit_code) == ("error", 2)
    (error,) = result.errors
    first = error.message.splitlines()[0]
    assert first.startswith("mypy crashed: ./mod.py:8: error: INTERNAL ERROR (version: ")
    assert first.endswith("a bug of mypy, not of the code: another mypy version may not crash")
    assert result.metrics.type_errors is None


def test_a_guard_that_cannot_run_at_the_baseline_is_said_with_the_fix(tmp_path: Path) -> None:
    root = write(tmp_path, DUPLICATE)
    suite = CheckSuite([CheckSpec("mypy", f"{MYPY} .", "mypy")], check_timeout=120)
    evaluation = suite.evaluate_baseline(root)
    assert evaluation.baseline is not None
    check = evaluation.baseline.checks["mypy"]
    assert (check.role, check.status) == ("guard", "error")
    assert "not judged" in check.why
    warning = next(n for n in baseline_notes(evaluation.baseline, evaluation) if "mypy" in n)
    assert 'Duplicate module named "coerce"' in warning and "`mypy src`" in warning


# --- ralph init: a mypy command that checks the code ----------------------------------------


@pytest.fixture
def mypy_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """`ralph init` writes a bare `mypy`: the one installed beside this Python."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{Path('/usr/bin')}")


SEMVER_LIKE = {
    **DUPLICATE,
    "pyproject.toml": "[tool.mypy]\ncheck_untyped_defs = true\n",
    "tox.ini": "[tox]\nenvlist = py3\n[testenv:mypy]\ndeps = mypy\ncommands = mypy {posargs:src}\n",
}


def only_mypy(root: Path) -> list[detect.Probe]:
    checks = [c for c in detect.detect_checks(root) if c.name == "mypy"]
    assert [c.command for c in checks] == ["mypy ."]
    return detect.probe_checks(root, checks)


def test_init_takes_the_mypy_command_tox_runs_when_mypy_dot_cannot_run(
    tmp_path: Path, mypy_on_path: None
) -> None:
    (probe,) = only_mypy(write(tmp_path, SEMVER_LIKE))
    assert (probe.spec.command, probe.status, probe.kept) == ("mypy src", "pass", True)
    assert "with `mypy src` (as tox.ini runs it; `mypy .` cannot run: " in probe.detail
    assert 'Duplicate module named "coerce"' in probe.detail


def test_init_takes_the_one_top_level_package_when_nothing_is_stated(
    tmp_path: Path, mypy_on_path: None
) -> None:
    files = {k.replace("src/", ""): v for k, v in DUPLICATE.items()}
    files["mypy.ini"] = "[mypy]\n"
    (probe,) = only_mypy(write(tmp_path, files))
    assert (probe.spec.command, probe.status) == ("mypy pkg", "pass")
    assert "the one top-level package" in probe.detail


def test_init_leaves_mypy_out_with_its_reason_when_nothing_runs(
    tmp_path: Path, mypy_on_path: None
) -> None:
    files = {"my-pkg/__init__.py": "", "mypy.ini": "[mypy]\n", "Makefile": "t:\n\tmypy nosuch\n"}
    (probe,) = only_mypy(write(tmp_path, files))
    assert (probe.status, probe.kept) == ("error", False)
    assert "is not a valid Python package name" in probe.detail
    assert probe.detail.endswith("; tried `mypy nosuch` too")
    assert "ralph init --force" not in probe.detail  # init itself did what the fix says


def test_init_no_run_writes_the_mypy_command_probing_would_try_first(
    ralph: RunCli, tmp_path: Path
) -> None:
    """Without running, `mypy .` would be written where the project states its own command."""
    import yaml

    root = write(tmp_path, SEMVER_LIKE)
    result = ralph("init", "--no-run", cwd=root)
    assert result.code == 0, result.err
    assert "check mypy: mypy src" in result.out
    config = yaml.safe_load((root / ".aiwg/ralph/config.yaml").read_text())
    assert [c["command"] for c in config["checks"] if c["name"] == "mypy"] == ["mypy src"]


@pytest.mark.parametrize(
    ("files", "command"),
    [
        ({"src/x.py": ""}, "mypy src"),
        ({"pkg/__init__.py": "", "tests/__init__.py": ""}, "mypy pkg"),
        ({"a/__init__.py": "", "b/__init__.py": ""}, "mypy ."),  # nothing to choose by
    ],
)
def test_unprobed_mypy_takes_src_then_the_one_package(
    tmp_path: Path, files: dict[str, str], command: str
) -> None:
    root = write(tmp_path, {**files, "mypy.ini": "[mypy]\n"})
    mypy = [c for c in detect.unprobed(root, detect.detect_checks(root)) if c.name == "mypy"]
    assert [c.command for c in mypy] == [command]


def test_the_mypy_commands_a_project_states(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "tox.ini": (
                "[testenv]\ndeps =\n    mypy\n    pytest\ncommands =\n    pytest\n"
                "    python -m mypy --strict {toxinidir}/lib {posargs}\n"
                "[testenv:x]\ncommands = mypy {env:X}\n"
            ),
            "noxfile.py": (
                "def typing(session):\n    session.install('mypy')\n"
                "    session.run('mypy', 'lib', '--strict')\n"
                "    session.run('mypy', *session.posargs)\n"
            ),
            "Makefile": "lint:\n\t@mypy lib\n\t$(PY) -m mypy lib\nmypy src:\n",
            "src/x.py": "",
            "lib/__init__.py": "",
            "tests/__init__.py": "",
        },
    )
    assert detect.mypy_alternatives(tmp_path, "mypy .") == [
        ("mypy --strict lib", "as tox.ini runs it"),
        ("mypy lib --strict", "as noxfile.py runs it"),
        ("mypy lib", "as the Makefile runs it"),
        ("mypy src", "the src/ layout"),
    ]  # `mypy lib` once; tests/ is not the one package


def test_init_then_check_sees_a_new_type_error_in_the_code(
    ralph: RunCli, tmp_path: Path, mypy_on_path: None
) -> None:
    root = write(tmp_path, SEMVER_LIKE)
    result = ralph("init", cwd=root)
    assert result.code == 0, result.err
    assert "check mypy: mypy src" in result.out
    assert "\nmypy\tpass\t" in ralph("check", cwd=root).out
    (root / "src/pkg/core.py").write_text("def one() -> int:\n    return 'x'\n")
    after = ralph("check", cwd=root).out
    assert "\nmypy\tfail\t1 type error\t" in after and "src/pkg/core.py:2" in after


def test_doctor_says_cannot_run_with_mypys_line(ralph: RunCli, tmp_path: Path) -> None:
    config = f"checks:\n- {{name: mypy, command: '{MYPY} .', parser: mypy}}\n"
    root = write(tmp_path, {**DUPLICATE, ".aiwg/ralph/config.yaml": config})
    agent = f"cmd:{sys.executable} -c pass"
    result = ralph("doctor", "-a", agent, "--json", cwd=root)
    (row,) = [f for f in json.loads(result.out)["findings"] if f["name"] == "mypy"]
    assert row["status"] == "cannot run, guard" and row["ok"] is False  # "can start" only
    assert result.code == 1  # when every check can judge the attempts
    assert row["detail"].startswith(
        'mypy cannot run: tests/coerce.py: Duplicate module named "coer'
    )
