"""`ralph batch`: many tasks on one repository, each a loop in its own worktree and branch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from ralph.ids import loop_branch
from ralph.loop.batch import batch_file
from ralph.memory.store import MemoryStore

from .conftest import RunCli
from .fakes.calc_project import git, make_calc_repo
from .fakes.processes import alive

FAKES = Path(__file__).resolve().parent / "fakes"
CALC = """\
def add(a, b):
    return a - b  # add


def sub(a, b):
    return a + b  # sub


def mul(a, b):
    return a + b  # mul
"""
AGENT = f"cmd:{sys.executable} {FAKES / 'edit_agent.py'}"


def check(expr: str) -> str:
    return f'{sys.executable} -c "import calc, sys; sys.exit(not ({expr}))"'


def task(name: str, edit: str, expr: str) -> dict[str, Any]:
    return {"name": name, "task": f"fix {name}. FAKE-EDIT: calc.py :: {edit}", "test": check(expr)}


FIX_ADD = task("add", "a - b  # add => a + b  # add", "calc.add(2, 3) == 5")
FIX_SUB = task("sub", "a + b  # sub => a - b  # sub", "calc.sub(5, 3) == 2")
NO_FIX_MUL = task("mul", "no such text => x", "calc.mul(2, 3) == 6")


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return make_calc_repo(tmp_path / "repo", calc=CALC, tests="", monkeypatch=monkeypatch)


def write_tasks(path: Path, tasks: list[dict[str, Any]], **defaults: Any) -> Path:
    path.write_text(yaml.safe_dump({"defaults": {"actor": AGENT, **defaults}, "tasks": tasks}))
    return path


def test_three_tasks_two_at_a_time_each_on_its_branch_and_the_checkout_untouched(
    repo: Path, tmp_path: Path, ralph: RunCli
) -> None:
    tasks = write_tasks(tmp_path / "tasks.yaml", [FIX_ADD, FIX_SUB, NO_FIX_MUL], max_iterations=1)
    result = ralph("batch", str(tasks), "--jobs", "2", "--json", cwd=repo)
    assert result.code == 1, result.err  # one task is not green
    out = json.loads(result.out)
    loops = {entry["name"]: entry for entry in out["loops"]}
    assert [entry["name"] for entry in out["loops"]] == ["add", "sub", "mul"]
    assert {n: e["status"] for n, e in loops.items()} == {
        "add": "completed",
        "sub": "completed",
        "mul": "failed",
    }
    for name, entry in loops.items():
        loop_id = entry["loop_id"]
        assert loop_id.startswith(f"ralph-{name}-")
        assert entry["branch"] == loop_branch(loop_id) and entry["iterations"] == 1
        assert Path(entry["worktree"]).is_dir()
    on_branch = {n: git(repo, "show", f"{e['branch']}:calc.py") for n, e in loops.items()}
    assert on_branch["add"] == CALC.replace("a - b  # add", "a + b  # add").strip()
    assert on_branch["sub"] == CALC.replace("a + b  # sub", "a - b  # sub").strip()
    assert on_branch["mul"] == CALC.strip()
    assert loops["mul"]["exit_code"] == 1 and loops["add"]["exit_code"] == 0
    # every loop recorded into this repository's memory
    assert set(MemoryStore(repo).loop_ids()) == {e["loop_id"] for e in loops.values()}
    # the user's checkout: still on main, calc.py as committed, nothing but ralph's memory new
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert (repo / "calc.py").read_text() == CALC
    assert git(repo, "status", "--porcelain") == "?? .aiwg/"
    assert "[add] started" in result.err and "batch: 2/3 loops green" in result.err
    assert f"[add]   apply   ralph apply {loops['add']['loop_id']}\n" in result.err
    assert f"ralph apply {loops['mul']['loop_id']}" not in result.err  # it changed nothing
    # nothing is left to resume: finished loops are reported as they are
    again = ralph("batch", str(tasks), "--resume", "--json", cwd=repo)
    assert again.code == 1
    assert [e["loop_id"] for e in json.loads(again.out)["loops"]] == [
        loops[n]["loop_id"] for n in ("add", "sub", "mul")
    ]
    assert "0 to run" in again.err


def test_a_later_loop_is_given_the_lessons_of_an_earlier_one(
    repo: Path, tmp_path: Path, ralph: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    monkeypatch.setenv("AGENT_PROMPTS", str(prompts))
    first = {**NO_FIX_MUL, "name": "first", "max_iterations": 1}
    second = task("second", "a + b  # mul => a * b  # mul", "calc.mul(2, 3) == 6")
    tasks = write_tasks(tmp_path / "tasks.yaml", [first, second])
    result = ralph("batch", str(tasks), "--jobs", "1", "--json", cwd=repo)
    loops = {e["name"]: e for e in json.loads(result.out)["loops"]}
    assert [loops["first"]["status"], loops["second"]["status"]] == ["failed", "completed"]
    prompt = (prompts / f"{loops['second']['loop_id']}-1.md").read_text()
    assert "Lessons from earlier loops" in prompt
    assert f"from {loops['first']['loop_id']}#1)" in prompt  # (for the failure ...; from ...)


def test_tasks_that_cannot_start_are_one_error_and_no_loop_starts(
    repo: Path, tmp_path: Path, ralph: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each loop used to start, fail its preflight (exit 2) and leave a loop id `ralph status`
    did not know: now every task's actor and checks are checked before the first loop."""
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OLLAMA_HOST"):
        monkeypatch.delenv(name, raising=False)
    tasks = tmp_path / "tasks.yaml"
    bad = [
        {**FIX_ADD, "actor": "no-such-actor"},
        {"name": "auto", "task": "fix sub", "test": "true"},  # no agent CLI, no provider
        {**NO_FIX_MUL, "actor": AGENT},  # fine: named in no line
        {"name": "nocheck", "task": "x", "actor": AGENT, "checks": [{"name": "lint"}]},
    ]
    tasks.write_text(yaml.safe_dump(bad))
    result = ralph("batch", str(tasks), "--json", cwd=repo)
    assert result.code == 2 and result.out == "", result.err
    lines = result.err.strip().splitlines()
    assert lines[0] == "ralph: error: 3 of 4 tasks cannot start; no loop was started:"
    assert lines[1].startswith("  task 1 ('add'): unknown actor 'no-such-actor'")
    assert lines[2].startswith("  task 2 ('auto'): no actor available")
    assert lines[3] == "  task 4 ('nocheck'): check 'lint' has no command"
    assert lines[4].startswith("hint: ") and len(lines) == 5
    assert not (repo / ".aiwg").exists()  # no batch file, no loop id, no state
    assert git(repo, "branch", "--list") == "* main"


def wait_for(predicate: Any, what: str, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def pids_in(folder: Path) -> list[int]:
    """The pids the agents wrote (a file can exist a moment before its pid is in it)."""
    return [int(text) for path in folder.iterdir() if (text := path.read_text())]


def test_ctrl_c_stops_every_loop_resumably_and_resume_finishes_them(
    repo: Path, tmp_path: Path, ralph: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    started, gate = tmp_path / "started", tmp_path / "gate"
    started.mkdir()
    monkeypatch.setenv("AGENT_STARTED", str(started))
    monkeypatch.setenv("AGENT_GATE", str(gate))
    third = task("sub-again", "a + b  # sub => a - b  # sub", "calc.sub(5, 3) == 2")
    tasks = write_tasks(tmp_path / "tasks.yaml", [FIX_ADD, FIX_SUB, third])
    batch = subprocess.Popen(
        [sys.executable, "-m", "ralph", "batch", str(tasks), "--jobs", "2", "--json"],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: len(pids_in(started)) == 2, "two agents to start")
    except AssertionError:
        batch.kill()
        raise AssertionError(batch.communicate()[1]) from None
    store = MemoryStore(repo)
    ids = json.loads(batch_file(store, tasks).read_text())["loops"]
    assert not store.state_path(ids["sub-again"]).exists()  # both slots are taken
    agents = pids_in(started)
    batch.send_signal(signal.SIGINT)
    out, err = batch.communicate(timeout=120)
    assert batch.returncode == 130, err
    report = json.loads(out)
    assert report["interrupted"] is True
    assert [e["status"] for e in report["loops"]] == ["paused", "paused", "not started"]
    assert "ralph batch --resume" in err
    assert not any(alive(pid) for pid in agents)
    for name in ("add", "sub"):
        assert store.read_state(ids[name]).status == "paused"
    gate.write_text("open")
    resumed = ralph("batch", str(tasks), "--resume", "--json", cwd=repo)
    assert resumed.code == 0, resumed.err
    done = {e["name"]: e for e in json.loads(resumed.out)["loops"]}
    assert all(e["status"] == "completed" for e in done.values())
    assert done["add"]["loop_id"] == ids["add"] and done["sub"]["loop_id"] == ids["sub"]
    assert "[add] resumed" in resumed.err and "[sub-again] started" in resumed.err
    assert (repo / "calc.py").read_text() == CALC


def test_a_batch_started_with_sigint_ignored_still_stops_its_loops_on_sigterm(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ralph batch ... &` in a script runs with SIGINT ignored, and so would its loops: a CI
    cancel (SIGTERM) then waited for the loops to end on their own. They get SIGTERM."""
    started, gate = tmp_path / "started", tmp_path / "gate"
    started.mkdir()
    monkeypatch.setenv("AGENT_STARTED", str(started))
    monkeypatch.setenv("AGENT_GATE", str(gate))
    tasks = write_tasks(tmp_path / "tasks.yaml", [FIX_ADD])
    batch = subprocess.Popen(
        [sys.executable, "-m", "ralph", "batch", str(tasks), "--json"],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        wait_for(lambda: len(pids_in(started)) == 1, "the agent to start")
        agents = pids_in(started)
        batch.send_signal(signal.SIGTERM)
        out, err = batch.communicate(timeout=120)
    finally:
        gate.write_text("open")  # a loop that was not stopped ends by itself
        if batch.poll() is None:
            batch.kill()
            batch.communicate()
    assert batch.returncode == 130, err
    assert [e["status"] for e in json.loads(out)["loops"]] == ["paused"]
    assert "interrupted: 1 loop can go on;" in err
    assert not any(alive(pid) for pid in agents)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- {name: a}\n", "task 1 ('a'): missing `task`"),
        ("- {task: x, tset: y}\n", "task 1: unknown key 'tset'"),
        ("- {name: a, task: x}\n- {name: a, task: y}\n", "task 2 ('a'): duplicate name 'a'"),
        ("- fix the parser\n- fix the parser\n", "task 2: duplicate name 'fix-the-parser'"),
        ("- {task: x, max-iterations: 0}\n", "task 1: `max_iterations` must be"),
        ("- {task: x, checks: [3]}\n", "task 1: `checks` must be"),
        ("- {task: x, actor: 3}\n", "task 1: `actor` must be"),
        ("tasks: []\n", "no tasks"),
        ("{jobs: 2, tasks: [x]}\n", "unknown top-level key 'jobs'"),
        ("{defaults: {task: x}, tasks: [x]}\n", "defaults: unknown key 'task'"),
        ("- [1, 2]\n", "task 1: expected a mapping"),
        ("- {task: [\n", "cannot read YAML"),
    ],
)
def test_a_wrong_tasks_file_is_one_line_and_nothing_starts(
    repo: Path, tmp_path: Path, ralph: RunCli, text: str, message: str
) -> None:
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(text)
    result = ralph("batch", str(tasks), cwd=repo)
    assert result.code == 2
    first, *rest = result.err.strip().splitlines()
    assert first.startswith(f"ralph: error: {tasks}: ") and message in first, result.err
    assert len(rest) <= 1 and "Traceback" not in result.err
    assert not (repo / ".aiwg").exists()
    assert git(repo, "branch", "--list") == "* main"


def test_an_unknown_key_hints_at_the_right_one(repo: Path, tmp_path: Path, ralph: RunCli) -> None:
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text("- {task: x, tset: y}\n")
    assert "did you mean 'test'?" in ralph("batch", str(tasks), cwd=repo).err


def test_batch_needs_git_and_a_tasks_file(tmp_path: Path, ralph: RunCli) -> None:
    missing = ralph("batch", str(tmp_path / "nope.yaml"), cwd=tmp_path)
    assert missing.code == 2 and "cannot read" in missing.err
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text("- fix it\n")
    outside = ralph("batch", str(tasks), cwd=tmp_path)
    assert outside.code == 2 and "needs a git repository" in outside.err
    resume = tmp_path / "repo"
    resume.mkdir()
    git(resume, "init", "-q")
    never = ralph("batch", str(tasks), "--resume", cwd=resume)
    assert never.code == 2 and "no earlier batch" in never.err


def test_the_live_table_shows_every_loop() -> None:
    from rich.console import Console

    from ralph.cli.batch_view import LiveView
    from ralph.loop.batch import Entry
    from ralph.loop.tasks_file import BatchTask

    entry = Entry(BatchTask("add", "fix add", max_iterations=4), "ralph-add-00000001")
    entry.status, entry.iteration, entry.best_reward, entry.rewards = "running", 2, 0.5, [0, 0.5]
    view = LiveView()
    view.entries = [entry]
    console = Console(record=True, width=120)
    console.print(view._table())
    text = console.export_text()
    assert "ralph-add-00000001" in text and "running" in text and "2/4" in text and "0.50" in text


def test_the_plain_summary_names_each_loops_status_branch_changes_and_apply_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from ralph.cli.batch_view import PlainView
    from ralph.loop.batch import Entry
    from ralph.loop.tasks_file import BatchTask

    calc = [{"path": "calc.py", "added": 1, "removed": 1}]
    done = Entry(BatchTask("add", "fix add"), "ralph-add-00000001", status="completed")
    failed = Entry(BatchTask("mul", "fix mul"), "ralph-mul-00000002", status="failed")
    broken = Entry(BatchTask("div", "fix div"), "ralph-div-00000003", status="error")
    for entry, branch in ((done, "ralph/add-00000001"), (failed, "ralph/mul-00000002")):
        entry.branch, entry.changed_files, entry.changes_read = branch, calc, True
    failed.stop_reason = "limit"
    broken.error = "cannot start: no such actor"
    PlainView().end([done, failed, broken])
    lines = [line.split(" ", 1)[1] for line in capsys.readouterr().err.splitlines()]
    assert lines == [
        "[add] ralph-add-00000001 completed",
        "[add]   branch  ralph/add-00000001",
        "[add]   changed 1 file: calc.py +1 -1",
        "[add]   apply   ralph apply ralph-add-00000001",
        "[mul] ralph-mul-00000002 failed (limit)",
        "[mul]   branch  ralph/mul-00000002",
        "[mul]   changed 1 file: calc.py +1 -1",
        "[mul]   apply   ralph apply ralph-mul-00000002 --force",
        "[div] ralph-div-00000003 error: cannot start: no such actor",
        "batch: 1/3 loops green",
    ]


def test_in_ci_the_view_is_plain_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    from ralph.cli.batch_view import LiveView, PlainView, make_view

    monkeypatch.setenv("CI", "true")
    view = make_view()
    assert isinstance(view, PlainView) and not isinstance(view, LiveView)
    assert os.environ["CI"] == "true"


def test_the_help_gives_the_whole_tasks_file_format_and_its_example_runs(
    tmp_path: Path, ralph: RunCli
) -> None:
    """`--help` said only "YAML list of tasks: task, and name, test, checks, actor, ...": a
    newcomer had to guess the keys and the `tasks:` form. Now every key the parser takes is
    there and in the README, and the help's example is a tasks file the parser reads."""
    from ralph.loop.tasks_file import DEFAULT_KEYS, TASK_KEYS, load_tasks

    text = ralph("batch", "--help").out
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    table = readme.split("A task is its text as a bare string", 1)[1].split("```", 1)[0]
    for key in TASK_KEYS:
        assert f"\n    {key} " in text, key
        assert f"| `{key}` |" in table, key
    assert all(key in text.split("A task is its text")[0] for key in DEFAULT_KEYS)
    assert "`tasks:`" in text and "`defaults:`" in text and "role" in text
    example = text.split("Example:\n", 1)[1].split("\n\n", 1)[0]
    path = tmp_path / "tasks.yaml"
    path.write_text(textwrap.dedent(example))
    dates, lint, mypy = load_tasks(path)
    assert dates.test == "pytest -q tests/test_dates.py" and dates.actor == "claude"
    assert lint.checks == ("ruff check src/api", {"name": "pytest", "role": "guard"})
    assert mypy.name == "make-mypy-pass" and mypy.max_iterations == 5


def test_one_task_is_counted_in_the_singular(capsys: pytest.CaptureFixture[str]) -> None:
    """Not "batch: 1 tasks" nor "1/1 loops green": counts go through `glyphs.plural`."""
    from ralph.cli.batch_view import PlainView
    from ralph.loop.batch import Entry
    from ralph.loop.tasks_file import BatchTask

    one = Entry(BatchTask("add", "fix add"), "ralph-add-00000001", status="completed")
    view = PlainView()
    view.begin([one], 1)
    view.end([one])
    lines = [line.split(" ", 1)[1] for line in capsys.readouterr().err.splitlines()]
    assert lines[0] == "batch: 1 task, 1 to run, at most 1 at once"
    assert lines[-1] == "batch: 1/1 loop green"
