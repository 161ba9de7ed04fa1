"""Smaller breaks: a secret in a feedback note on screen, a batch task read as a flag, an
imported record overwritten by `resume`, YAML keys given twice, `doctor` in a deleted directory."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from ralph.bench.runner import BenchEntry
from ralph.config import load
from ralph.errors import ConfigError
from ralph.loop.batch import Entry
from ralph.loop.tasks_file import BatchTask, TasksFileError, load_tasks
from ralph.memory.state import LoopState
from ralph.memory.store import MemoryStore

from ..conftest import RunCli
from .conftest import assert_invariants, heuristic, plan, write

SECRET = "hunter2-very-secret-77"


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_a_feedback_note_is_redacted_on_screen_too(
    as_json: bool, ralph: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", SECRET)
    store = MemoryStore(tmp_path)
    store.ensure()
    store.write_state(LoopState("ralph-done-00000001", "a task", status="completed"))
    note = f"it printed the token {SECRET} in the log"
    result = ralph(
        "feedback", "ralph-done-00000001", "--reject", "--note", note,
        *(["--json"] if as_json else []), cwd=tmp_path,
    )  # fmt: skip
    assert result.code == 0, result.err
    assert SECRET not in result.out + result.err
    assert "[REDACTED:MY_SERVICE_TOKEN]" in result.out
    for path in store.base.rglob("*.json"):
        assert SECRET not in path.read_text()


def test_a_batch_task_that_looks_like_a_flag_is_the_task() -> None:
    """The child `ralph run` read `--help me ...` as its --help (and printed help, exit 0)."""
    import typer.main

    from ralph.cli.app import app

    task = "--help me: the parser treats this as a flag"
    entry = Entry(BatchTask(name="flag", task=task, test="pytest -q"), "ralph-flag-00000001")
    argv = entry.argv()
    assert argv[1:4] == ["-m", "ralph", "run"]
    group = typer.main.get_command(app)
    run = group.commands["run"]  # type: ignore[attr-defined]
    ctx = run.make_context("run", argv[4:])
    assert ctx.params["task"] == task
    assert ctx.params["loop_id"] == "ralph-flag-00000001"
    # a bench arm's flags still reach the run: before the `--`
    arm = BenchEntry(entry.task, "ralph-flag-00000002", arm="a", flags=("--omega", "0"))
    ctx = run.make_context("run", arm.argv()[4:])
    assert ctx.params["task"] == task and ctx.params["omega"] == 0


def test_resume_keeps_a_record_imported_into_a_paused_loop(
    ralph: RunCli, project: Path, tmp_path: Path
) -> None:
    """Record 2 came from another clone; `resume` did iteration 2 again and wrote over it
    without a word. Now the record is moved to conflicts/ first, and resume says so."""
    plan(project, {"1": write("partial"), "default": write("full")})
    first = ralph(*heuristic("--max-iterations", "1"), cwd=project)
    loop_id = json.loads(first.out)["loop_id"]
    store = MemoryStore(project)
    record = json.loads(store.record_path(loop_id, 1).read_text())
    record["iteration"] = 2
    record["notes"] = "MARKER-imported-from-another-clone"
    record["ralph"]["prompt_sha256"] = "0" * 64
    folder = tmp_path / "other" / ".aiwg" / "ralph" / "reflections" / loop_id
    folder.mkdir(parents=True)
    (folder / "002.json").write_text(json.dumps(record))
    imported = ralph("reflections", "import", str(tmp_path / "other"), cwd=project)
    assert imported.code == 0, imported.err
    assert "MARKER-imported" in store.record_path(loop_id, 2).read_text()
    resumed = ralph("resume", loop_id, "--max-iterations", "2", "--json", cwd=project)
    assert resumed.code == 0, resumed.err
    assert "record 2 is newer than the loop's state" in resumed.err
    kept = list((store.base / "conflicts" / loop_id).glob("002-*.json"))
    assert len(kept) == 1 and "MARKER-imported" in kept[0].read_text()
    assert "MARKER-imported" not in store.record_path(loop_id, 2).read_text()
    assert_invariants(project)


def test_resume_still_redoes_its_own_interrupted_attempt(ralph: RunCli, project: Path) -> None:
    """A record past the state written here (killed before the state counted it) is no import:
    it is rewritten by the redo, nothing is moved aside."""
    plan(project, {"default": write("partial")})
    first = ralph(*heuristic("--max-iterations", "2"), cwd=project)
    loop_id = json.loads(first.out)["loop_id"]
    store = MemoryStore(project)
    state = store.read_state(loop_id)
    state.iteration, state.reward_history = 1, state.reward_history[:1]
    assert state.git is not None
    state.git = dataclasses.replace(state.git, commits={"1": state.git.commits["1"]})
    store.write_state(state)  # as if killed after record 2, before its state
    plan(project, {"default": write("full")})
    resumed = ralph("resume", loop_id, "--max-iterations", "2", "--json", cwd=project)
    assert resumed.code == 0, resumed.err
    assert "newer than the loop's state" not in resumed.err
    assert not (store.base / "conflicts").exists()


YAML_TWICE = "max_iterations: 3\nreflector: heuristic\nmax_iterations: 40\n"


def test_a_key_given_twice_in_config_yaml_is_refused(tmp_path: Path) -> None:
    config = tmp_path / ".aiwg" / "ralph" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(YAML_TWICE)
    with pytest.raises(ConfigError) as error:
        load(tmp_path, {}, {})
    message = error.value.message
    assert "duplicate key 'max_iterations' on line 3 (first on line 1)" in message
    assert "\n" not in message
    config.write_text("base: &b {max_iterations: 3}\nchecks:\n  t: {<<: *b, command: x}\n")
    with pytest.raises(ConfigError) as other:  # a merge key is no duplicate (the schema speaks)
        load(tmp_path, {}, {})
    assert "duplicate" not in other.value.message


def test_a_key_given_twice_in_a_batch_tasks_file_is_refused(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text("- task: fix the dates\n  test: pytest -q\n  task: fix the parser\n")
    with pytest.raises(TasksFileError, match=r"duplicate key 'task' on line 3 \(first on line 1\)"):
        load_tasks(tasks)


def test_doctor_in_a_deleted_directory_says_so_in_one_line(
    ralph: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    shutil.rmtree(gone)
    result = ralph("doctor", "--no-run")
    assert result.code == 2
    assert result.err.splitlines()[0] == (
        "ralph: error: the current directory no longer exists (deleted or moved away)"
    )
    assert "internal error" not in result.err and "Traceback" not in result.err
