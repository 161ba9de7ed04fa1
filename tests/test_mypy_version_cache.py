"""`mypy --version` is asked once per mypy installation and remembered across `ralph check`s."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ralph.config import CheckSpec
from ralph.evaluators import mypy as mypy_module
from ralph.evaluators.suite import make_check

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
