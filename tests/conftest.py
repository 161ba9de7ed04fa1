"""Shared fixtures: an in-process `ralph` invocation and the repository's example loop."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLE_LOOP = "ralph-fix-date-parser-3f9a1c2e"


@dataclass
class CliResult:
    code: int
    out: str
    err: str


RunCli = Callable[..., CliResult]


@pytest.fixture
def ralph(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> RunCli:
    """Run the real console-script entry point in-process; returns exit code, stdout, stderr."""
    from ralph.cli.app import main

    def invoke(*args: str, cwd: Path | None = None) -> CliResult:
        monkeypatch.setattr(sys, "argv", ["ralph", *args])
        if cwd is not None:
            monkeypatch.chdir(cwd)
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit_info:
            main()
        out, err = capsys.readouterr()
        code = exit_info.value.code
        return CliResult(code if isinstance(code, int) else 0 if code is None else 1, out, err)

    return invoke


def isolate(monkeypatch: pytest.MonkeyPatch, cache_home: Path) -> None:
    """No developer setting leaks into a test: RALPH_* (but RALPH_SANDBOX=none), step summary
    and proxy variables; and no test writes the user's cache directory (ralph remembers mypy's
    version there).

    The pytest that ralph runs on a generated project loads no plugins of this virtualenv:
    importing hypothesis alone takes 1-3 s per run on a busy machine, and no generated project
    uses a plugin (the suite's own pytest and its workers started before this is set)."""
    import os

    proxies = {"http_proxy", "https_proxy", "all_proxy", "no_proxy"}
    for name in list(os.environ):
        if name.startswith("RALPH_") or name == "GITHUB_STEP_SUMMARY" or name.lower() in proxies:
            monkeypatch.delenv(name)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache_home))
    # Every machine runs the generated projects' Python the same way: no bytecode written (a
    # fresh ralph prefix per project compiled the standard library and pytest again for each
    # one, twice the suite's CPU; bytecode kept across a fast fake agent's same-size edits is
    # stale). The bytecode tests remove it to see ralph's own prefix.
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    # The suite's fake agents read their plans from variables a sandbox would not pass: loops
    # run as before (`--sandbox none`) unless a test asks for the sandbox (test_sandbox.py).
    monkeypatch.setenv("RALPH_SANDBOX", "none")


@pytest.fixture(autouse=True)
def _isolated_env(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    isolate(monkeypatch, tmp_path_factory.getbasetemp() / "user-cache")


@pytest.fixture(autouse=True)
def _states_match_their_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop writes its state without the schema (its types keep it valid):
    every state a test writes is checked here, so one the schema refuses fails that test."""
    import json

    from ralph import schemas
    from ralph.memory.store import MemoryStore

    write = MemoryStore.write_state

    def checked(store: MemoryStore, state: Any) -> None:
        write(store, state)
        data = json.loads(store.state_path(state.loop_id).read_text("utf-8"))
        assert schemas.errors(schemas.LOOP_STATE, data) == [], "an invalid state was written"

    monkeypatch.setattr(MemoryStore, "write_state", checked)


@contextmanager
def isolated_environment(factory: pytest.TempPathFactory) -> Iterator[pytest.MonkeyPatch]:
    """The environment every test gets, for a module- or session-scoped fixture that prepares a
    project once (its tests copy it); undone when the block ends."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        isolate(monkeypatch, factory.getbasetemp() / "user-cache")
        yield monkeypatch


def ralph_subprocess(*args: str, cwd: Path) -> CliResult:
    """`python -m ralph ...` for fixtures wider than a test (the in-process `ralph` fixture
    needs a test's capsys)."""
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "ralph", *args], cwd=cwd, capture_output=True, text=True
    )
    return CliResult(done.returncode, done.stdout, done.stderr)


def copy_project(template: Path, destination: Path) -> Path:
    """A prepared project (git repository and ralph's memory) for one test to change."""
    shutil.copytree(template, destination, symlinks=True)
    return destination


@pytest.fixture
def example_project(tmp_path: Path) -> Path:
    """A copy of the repository's example memory in a fresh project directory."""
    project = tmp_path / "project"
    shutil.copytree(REPO / ".aiwg", project / ".aiwg")
    return project
