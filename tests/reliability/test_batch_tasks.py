"""What a batch hands on and refuses: a task's secrets never become its loop id, branch, command
line or JSON; a task no process could be given is refused before anything starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ralph.loop.batch import Entry
from ralph.loop.tasks_file import MAX_TASK_CHARS, load_tasks
from ralph.memory.store import MemoryStore

from ..conftest import RunCli
from ..test_batch import FIX_ADD, FIX_SUB, git, repo, write_tasks  # noqa: F401

TOKEN = "ghp_" + "Qw3Er5Ty7" * 4
PASSWORD_TASK = f"fix add; deploy with {TOKEN}"


def test_a_token_in_a_task_is_in_no_id_branch_argv_or_json(
    repo: Path,  # noqa: F811
    tmp_path: Path,
    ralph: RunCli,
) -> None:
    token_task = {**FIX_ADD, "task": f"{TOKEN} {FIX_ADD['task']}"}
    del token_task["name"]  # the name comes from the task, as does the loop id
    tasks = write_tasks(tmp_path / "tasks.yaml", [token_task], max_iterations=1)
    result = ralph("batch", str(tasks), "--json", cwd=repo)
    assert result.code == 0, result.err
    (entry,) = json.loads(result.out)["loops"]
    for shown in (result.out, result.err, entry["loop_id"], entry["branch"]):
        assert TOKEN not in shown and TOKEN.lower() not in shown
    assert entry["task"].startswith("[REDACTED] fix add")
    assert entry["name"].startswith("redacted-fix-add")
    branches = git(repo, "branch", "--list", "--all")
    assert TOKEN.lower() not in branches and TOKEN not in branches
    for path in MemoryStore(repo).base.rglob("*"):
        if path.is_file():
            text = path.read_text("utf-8", errors="replace")
            assert TOKEN not in text and TOKEN.lower() not in text, path


def test_the_loops_command_line_carries_the_redacted_task(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(yaml.safe_dump([{"task": PASSWORD_TASK}, {"name": TOKEN, "task": "-x"}]))
    first, second = load_tasks(tasks)
    argv = Entry(first, "ralph-x-00000000").argv()
    assert TOKEN not in " ".join(argv) and first.task == "fix add; deploy with [REDACTED]"
    assert second.name == "[REDACTED]"
    # a task that starts with a dash is the task, not an option of `ralph run`
    assert Entry(second, "ralph-y-00000000").argv()[-2:] == ["--", "-x"]


@pytest.mark.parametrize(
    ("tasks", "message"),
    [
        ([FIX_ADD, {"name": "nul", "task": "a\x00b"}], "task 2 ('nul'): `task` contains a NUL"),
        ([FIX_ADD, {**FIX_SUB, "test": "pytest\x00 -q"}], "task 2 ('sub'): `test` contains a NUL"),
        (
            [FIX_ADD, FIX_SUB, {"task": "x" * 140_000}],
            f"task 3: the task is 140,000 characters, over the limit of {MAX_TASK_CHARS:,}",
        ),
    ],
)
def test_a_task_that_cannot_be_launched_is_refused_before_anything_runs(
    repo: Path,  # noqa: F811
    tmp_path: Path,
    ralph: RunCli,
    tasks: list[dict[str, str]],
    message: str,
) -> None:
    path = write_tasks(tmp_path / "tasks.yaml", tasks, max_iterations=1)
    result = ralph("batch", str(path), "--json", cwd=repo)
    assert result.code == 2, result.err
    (line, *rest) = result.err.strip().splitlines()
    assert line.startswith("ralph: error: ") and message in line, line
    assert len(line) < 400 and len(rest) <= 1 and "Traceback" not in result.err
    assert result.out == ""
    assert not (repo / ".aiwg").exists()  # nothing ran, nothing was planned
    assert git(repo, "branch", "--list") == "* main"


def test_the_limit_is_the_tasks_length_not_its_bytes(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(yaml.safe_dump([{"name": "long", "task": "é" * MAX_TASK_CHARS}]))
    assert len(load_tasks(tasks)[0].task) == MAX_TASK_CHARS


class Quiet:
    def begin(self, entries: list[Entry], jobs: int) -> None: ...
    def event(self, entry: Entry | None, text: str) -> None: ...
    def update(self, entries: list[Entry]) -> None: ...
    def end(self, entries: list[Entry]) -> None: ...


def test_a_loop_this_machine_cannot_start_is_an_error_entry_and_the_others_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past validation, the system can still refuse a process (E2BIG on a smaller limit): that
    task is an error entry, the batch goes on and ends with its result, not a crash."""
    from ralph import process
    from ralph.loop.batch import Batch
    from ralph.loop.tasks_file import BatchTask

    started: list[str] = []

    def run(argv: list[str], **_: object) -> process.ProcessResult:
        if argv[-1] == "too big":
            raise OSError(7, "Argument list too long")
        started.append(argv[-1])
        if argv[-1] == "third":  # a loop's error line quotes text from outside
            return process.ProcessResult(2, "", "ralph: error: no \x1b]0;t\x07\x1b[2Jactor\n", 0)
        return process.ProcessResult(1, "", "", 0)

    monkeypatch.setattr(process, "run", run)
    store = MemoryStore(tmp_path)
    entries = [
        Entry(BatchTask(n, t), f"ralph-{n}-0000000{i}")
        for i, (n, t) in enumerate([("a", "first"), ("b", "too big"), ("c", "third")])
    ]
    assert Batch(tmp_path, store, entries, Quiet()).run(1) is False
    assert started == ["first", "third"]
    assert entries[1].status == "error" and entries[1].phase == "done"
    assert entries[1].error == "cannot start: [Errno 7] Argument list too long"
    assert entries[2].error == "ralph: error: no actor"
