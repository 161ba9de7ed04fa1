"""`ralph check`'s start-up: checks started before the CLI loads, mypy's version remembered."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from ralph import entry
from ralph.config import CheckSpec
from ralph.evaluators import early, shell
from ralph.evaluators import mypy as mypy_module
from ralph.evaluators.suite import make_check

from .fakes.processes import alive


def write_config(root: Path, text: str) -> None:
    config = root / ".aiwg" / "ralph" / "config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(textwrap.dedent(text), encoding="utf-8")


def ralph_check(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], root: Path, *args: str
) -> tuple[int, str, str]:
    """The console script's `ralph check` path, in-process (without its final os._exit)."""
    monkeypatch.setattr(sys, "argv", ["ralph", "check", *args])
    monkeypatch.chdir(root)
    capsys.readouterr()
    code = entry.run_check()
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def adopted(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each `ralph check` used the evaluation the console script started early."""
    seen: list[bool] = []
    real = early.adopt

    def spy(root: Path, settings: object) -> object:
        found = real(root, settings)  # type: ignore[arg-type]
        seen.append(found is not None)
        return found

    monkeypatch.setattr(early, "adopt", spy)
    return seen


@pytest.fixture(autouse=True)
def _nothing_left_running() -> Iterator[None]:
    yield
    assert early._pending is None
    assert not shell._LIVE


# --- the early start -----------------------------------------------------------------------


def test_checks_started_early_are_adopted_and_run_once(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    adopted: list[bool],
) -> None:
    write_config(tmp_path, "checks:\n  - echo ran >> runs.log\n")
    code, out, _ = ralph_check(monkeypatch, capsys, tmp_path, "--json")
    assert code == 0
    assert json.loads(out)["passed"] is True
    assert adopted == [True]
    assert (tmp_path / "runs.log").read_text().splitlines() == ["ran"]


def test_flags_on_the_command_line_are_started_early_too(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    adopted: list[bool],
) -> None:
    code, out, _ = ralph_check(
        monkeypatch, capsys, tmp_path, "--check", "echo a >> runs.log", "--check=false", "--json"
    )
    assert code == 1
    assert [r["tool"] for r in json.loads(out)["results"]] == ["echo", "false"]
    assert adopted == [True]
    assert (tmp_path / "runs.log").read_text().splitlines() == ["a"]


def test_an_invalid_config_stops_the_checks_it_started_early(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Readable as data (so the checks start early), but the schema refuses omega 99.
    write_config(tmp_path, "omega: 99\nchecks:\n  - echo $$ > check.pid; sleep 60\n")
    code, _, err = ralph_check(monkeypatch, capsys, tmp_path)
    assert code == 2
    assert "omega" in err and "Traceback" not in err
    pid_file = tmp_path / "check.pid"
    if pid_file.exists():  # it got as far as starting: it must be gone now
        assert not alive(int(pid_file.read_text()))


def test_an_early_start_in_the_wrong_place_is_stopped_and_not_used(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    adopted: list[bool],
) -> None:
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    for folder in (project, elsewhere):
        write_config(folder, "checks:\n  - test -f marker\n")
    (project / "marker").write_text("")
    monkeypatch.setattr(early, "find_root", lambda cwd: elsewhere)
    code, out, _ = ralph_check(monkeypatch, capsys, project, "--json")
    assert adopted == [False]
    assert (code, json.loads(out)["passed"]) == (0, True)


def test_git_confirms_the_early_start_without_the_clis_slower_way(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    adopted: list[bool],
) -> None:
    import subprocess

    from ralph import runner

    def not_needed(*args: object) -> None:
        raise AssertionError("the CLI looked for the project root although git confirmed it")

    monkeypatch.setattr(runner, "project_root", not_needed)
    monkeypatch.setattr(runner, "memory_root", not_needed)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    write_config(tmp_path, "checks:\n  - pwd > where.txt\n")
    (tmp_path / "src").mkdir()
    code, _, _ = ralph_check(monkeypatch, capsys, tmp_path / "src", "--json")
    assert (code, adopted) == (0, [True])
    assert (tmp_path / "where.txt").read_text().strip() == str(tmp_path.resolve())


def test_usage_errors_and_help_are_left_to_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(tmp_path, "checks:\n  - echo ran >> runs.log\n")
    code, out, _ = ralph_check(monkeypatch, capsys, tmp_path, "--help")
    assert code == 0 and "--check" in out
    code, _, err = ralph_check(monkeypatch, capsys, tmp_path, "--no-such-flag")
    assert code == 2 and "no-such-flag" in err
    assert not (tmp_path / "runs.log").exists()


def test_the_early_argument_reader_takes_only_what_it_understands() -> None:
    args = ["--json", "--check", "ruff check .", "--check=mypy", "--test", "pytest -q"]
    assert early.parse_args(args) == {"test": "pytest -q", "checks": ["ruff check .", "mypy"]}
    assert early.parse_args([]) == {}
    for odd in (["--help"], ["--check"], ["-h"], ["--quiet"], ["extra"]):
        assert early.parse_args(odd) is None


def test_the_early_root_is_the_git_folder_or_nothing_when_git_could_differ(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / "src").mkdir()
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / ".git").write_text("gitdir: /elsewhere\n")
    assert early.find_root(tmp_path / "repo" / "src") == (tmp_path / "repo").resolve()
    assert early.find_root(tmp_path / "linked") is None
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "repo" / ".git"))
    assert early.find_root(tmp_path / "repo") is None


# --- mypy's version, remembered across runs ------------------------------------------------

FAKE_MYPY = """\
#!/bin/sh
if [ "$1" = "--version" ]; then
  echo asked >> "{log}"
  echo "mypy {version} (compiled: no)"
  exit 0
fi
case "$*" in
  *"-O json"*)
    if [ "{json}" = no ]; then
      echo "mypy: error: unrecognized arguments: -O json" >&2
      exit 2
    fi
    echo '{{"file": "a.py", "line": 1, "column": 0, "message": "bad", "code": "misc",'\
      '"severity": "error"}}'
    ;;
  *) echo "a.py:1:1: error: bad  [misc]" ;;
esac
exit 1
"""


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test its own user cache directory: the versions it remembers are its own."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def fake_mypy(folder: Path, version: str, json_output: bool = True) -> Path:
    program = folder / "bin" / "mypy"
    program.parent.mkdir(parents=True, exist_ok=True)
    text = FAKE_MYPY.format(
        log=folder / "asked.log", version=version, json="yes" if json_output else "no"
    )
    program.write_text(text)
    program.chmod(0o755)
    return program


def run_mypy(root: Path, program: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """One `ralph check` process's worth: nothing remembered in memory beforehand."""
    monkeypatch.setattr(mypy_module, "_versions", {})
    outcome = make_check(CheckSpec("mypy", f"{program} .", "mypy"), timeout=60, cap=10_000).run(
        root
    )
    assert [(e.file, e.line, e.rule) for e in outcome.errors] == [("a.py", 1, "misc")]
    return (root / "asked.log").read_text().splitlines()


def test_mypys_version_is_asked_once_per_installation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    program = fake_mypy(tmp_path, "1.12.0")
    assert run_mypy(tmp_path, program, monkeypatch) == ["asked"]
    assert run_mypy(tmp_path, program, monkeypatch) == ["asked"]  # remembered on disk
    cached = json.loads(mypy_module.cache_path().read_text())
    assert [str(program) in key for key in cached] == [True]
    stat = program.stat()
    os.utime(program, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # reinstalled
    assert run_mypy(tmp_path, program, monkeypatch) == ["asked", "asked"]


def test_a_corrupt_version_cache_only_means_asking_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    program = fake_mypy(tmp_path, "1.12.0")
    mypy_module.cache_path().parent.mkdir(parents=True, exist_ok=True)
    mypy_module.cache_path().write_text("{not json")
    assert run_mypy(tmp_path, program, monkeypatch) == ["asked"]
    assert run_mypy(tmp_path, program, monkeypatch) == ["asked"]
    assert isinstance(json.loads(mypy_module.cache_path().read_text()), dict)


def test_a_remembered_version_mypy_refuses_is_forgotten_and_mypy_run_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An older mypy behind the same path, size and mtime: it rejects `-O json`.
    program = fake_mypy(tmp_path, "1.10.0", json_output=False)
    identity = mypy_module.installed_identity(f"{program}", tmp_path)
    assert identity is not None
    mypy_module.cache_path().parent.mkdir(parents=True, exist_ok=True)
    mypy_module.cache_path().write_text(json.dumps({identity: [1, 12]}))
    assert run_mypy(tmp_path, program, monkeypatch) == ["asked"]
    assert json.loads(mypy_module.cache_path().read_text()) == {identity: [1, 10]}
