"""The Stop hook's input comes from a session an agent steers: a `cwd` outside the project the
hook serves runs nothing there, and the input is bounded by size (before it is read) and by
depth, each refused in one line."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from ralph.evaluators.pytest import ENDED_EARLY
from tests.conftest import RunCli
from tests.fakes.calc_project import make_calc_repo

from ..test_stop_hook import TESTS
from ..test_stop_hook import project as project  # the fixture


def hook(ralph: RunCli, monkeypatch: pytest.MonkeyPatch, stdin: object) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "stdin", stdin)
    result = ralph("hook", "claude-stop")
    return result.code, result.out, result.err


def test_a_cwd_outside_the_project_runs_nothing_there(
    ralph: RunCli, monkeypatch: pytest.MonkeyPatch, project: Path, tmp_path: Path
) -> None:
    other = make_calc_repo(
        tmp_path / "other", calc="def f(x):\n    return x\n", tests=TESTS, monkeypatch=monkeypatch
    )
    marker = tmp_path / "ran-elsewhere"
    config = other / ".aiwg" / "ralph" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(f"checks:\n  - name: evil\n    command: touch {marker}\n")
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(project))
    data = {"session_id": "s1", "cwd": str(other), "stop_hook_active": False}
    code, out, err = hook(ralph, monkeypatch, io.StringIO(json.dumps(data)))
    assert code == 0, err
    assert not marker.exists(), "the other directory's configured check ran"
    answer = json.loads(out)
    assert answer["decision"] == "block"
    assert f"outside the project {project}" in answer["reason"]


def test_a_cwd_inside_the_project_is_judged(
    ralph: RunCli, monkeypatch: pytest.MonkeyPatch, project: Path
) -> None:
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(project))
    data = {"session_id": "s1", "cwd": str(project / "tests")}
    code, out, err = hook(ralph, monkeypatch, io.StringIO(json.dumps(data)))
    assert code == 0, err
    assert "tests (1 of 2 tests failed)" in json.loads(out)["reason"]


def test_deep_nesting_is_a_clean_refusal(ralph: RunCli, monkeypatch: pytest.MonkeyPatch) -> None:
    code, _, err = hook(ralph, monkeypatch, io.StringIO("[" * 100_000))
    assert code == 2
    assert "nested too deeply" in err
    assert "RecursionError" not in err and "internal error" not in err


class Endless(io.RawIOBase):
    """A pipe that never ends, counting what was read of it."""

    def __init__(self) -> None:
        self.taken = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        view = memoryview(buffer)
        view[:] = b"[" * len(view)
        self.taken += len(view)
        return len(view)


def test_an_endless_pipe_is_read_no_further_than_the_limit(
    ralph: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipe = Endless()
    code, _, err = hook(ralph, monkeypatch, io.TextIOWrapper(io.BufferedReader(pipe)))
    assert code == 2
    assert "larger than 1 MB" in err
    assert pipe.taken < 2_000_000


def test_a_huge_file_on_stdin_is_refused_before_it_is_read(
    ralph: RunCli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    huge = tmp_path / "huge.json"
    with huge.open("wb") as f:
        f.truncate(300 * 1024 * 1024)  # sparse: 300 MB that take no disk
    with huge.open("r") as stdin:
        code, _, err = hook(ralph, monkeypatch, stdin)
        assert stdin.buffer.tell() == 0, "the input was read before its size was looked at"
    assert code == 2
    assert "larger than 1 MB" in err


# --- the hook judges like the loop: the tests and their harness, evidence, canaries ---------------
def stop_answer(ralph: RunCli, monkeypatch: pytest.MonkeyPatch, project: Path) -> dict[str, str]:
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(project))
    data = {"session_id": "s1", "cwd": str(project)}
    code, out, err = hook(ralph, monkeypatch, io.StringIO(json.dumps(data)))
    assert code == 0, err
    assert out.strip(), "the stop was let through"
    answer: dict[str, str] = json.loads(out)
    assert answer["decision"] == "block", answer
    return answer


def test_a_target_test_edited_to_pass_does_not_let_claude_stop(
    ralph: RunCli, monkeypatch: pytest.MonkeyPatch, project: Path
) -> None:
    tests = project / "tests" / "test_calc.py"
    tests.write_text(tests.read_text().replace("assert f(-2) == 2", "assert True"))
    reason = stop_answer(ralph, monkeypatch, project)["reason"]
    assert "tests/test_calc.py" in reason and "test harness" in reason


@pytest.mark.parametrize(
    "name, text",
    [
        ("tests/conftest.py", "def pytest_collection_modifyitems(items):\n    items.clear()\n"),
        ("pytest.toml", '[pytest]\naddopts = ["-p", "no:junitxml"]\n'),
        ("sitecustomize.py", "import os\n"),
    ],
    ids=["new-conftest", "new-pytest-toml", "sitecustomize"],
)
def test_a_new_harness_file_does_not_let_claude_stop(
    ralph: RunCli, monkeypatch: pytest.MonkeyPatch, project: Path, name: str, text: str
) -> None:
    (project / name).write_text(text)
    assert name in stop_answer(ralph, monkeypatch, project)["reason"]


def test_exit_before_the_asserts_does_not_let_claude_stop(
    ralph: RunCli, monkeypatch: pytest.MonkeyPatch, project: Path
) -> None:
    calc = project / "calc.py"
    calc.write_text("import os\nos._exit(0)\n" + calc.read_text())
    assert ENDED_EARLY in stop_answer(ralph, monkeypatch, project)["reason"]


def test_test_edits_allowed_by_the_settings_are_judged_as_they_are(
    ralph: RunCli, monkeypatch: pytest.MonkeyPatch, project: Path
) -> None:
    config = project / ".aiwg" / "ralph" / "config.yaml"
    config.write_text(config.read_text() + "allow_test_edits: true\n")
    tests = project / "tests" / "test_calc.py"
    tests.write_text(tests.read_text().replace("assert f(-2) == 2", "assert True"))
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(project))
    data = {"session_id": "s1", "cwd": str(project)}
    code, out, err = hook(ralph, monkeypatch, io.StringIO(json.dumps(data)))
    assert (code, out) == (0, ""), err
