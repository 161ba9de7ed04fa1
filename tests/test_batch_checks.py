"""What a batch task's loop is judged by: its `test` and `checks` are its targets, the project's
configured checks guard it (loop/task_checks.py), so two tasks on a repository with two bugs
each fix their own, and a task scoped to its tests still cannot break the others unseen."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from ralph import config
from ralph.loop.task_checks import loop_checks, loop_env, task_settings
from ralph.loop.tasks_file import BatchTask, TasksFileError, load_tasks

from .conftest import RunCli
from .fakes.calc_project import git, make_calc_repo

CALC = """\
def add(a, b):
    return a - b  # add


def sub(a, b):
    return a + b  # sub


def mul(a, b):
    return a * b  # mul
"""
TESTS = """\
import calc


def test_add():
    assert calc.add(2, 3) == 5


def test_sub():
    assert calc.sub(5, 3) == 2


def test_mul():
    assert calc.mul(2, 3) == 6
"""
# attempt 1 fixes its function and breaks mul (which passed); later attempts repair mul,
# unless told to break it `always`
AGENT = """\
import os, pathlib, sys
what, always = sys.argv[1], sys.argv[2:] == ["always"]
path = pathlib.Path("calc.py")
text = path.read_text().replace(f"return a {'-' if what == 'add' else '+'} b  # {what}",
                                f"return a {'+' if what == 'add' else '-'} b  # {what}")
if os.environ["RALPH_ITERATION"] == "1" or always:
    text = text.replace("a * b  # mul", "a + b  # mul")
else:
    text = text.replace("a + b  # mul", "a * b  # mul")
path.write_text(text)
"""


@pytest.fixture
def two_bugs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """calc.py with two bugs (add, sub) and the project's configured check: the whole suite."""
    repo = make_calc_repo(tmp_path / "repo", calc=CALC, tests=TESTS, monkeypatch=monkeypatch)
    (repo / ".aiwg" / "ralph").mkdir(parents=True)
    (repo / ".aiwg" / "ralph" / "config.yaml").write_text(
        f"checks: ['{sys.executable} -m pytest']\n"
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "ralph init")
    return repo


def task_for(tmp_path: Path, what: str, *agent_args: str) -> dict[str, Any]:
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    return {
        "name": what,
        "task": f"fix {what}",
        "actor": f"cmd:{' '.join([sys.executable, str(agent), what, *agent_args])}",
        "test": f"{sys.executable} -m pytest -q tests/test_calc.py::test_{what}",
        "max_iterations": 3,
    }


def test_each_task_fixes_its_own_bug_and_the_project_tests_guard_what_worked(
    two_bugs: Path, tmp_path: Path, ralph: RunCli
) -> None:
    """The trial: each loop fixed its own bug and failed on the other's tests (0/2 green); with
    `test:` scoping them, attempt 1 was accepted although it broke test_mul."""
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(yaml.safe_dump([task_for(tmp_path, "add"), task_for(tmp_path, "sub")]))
    result = ralph("batch", str(tasks), "--jobs", "1", "--json", cwd=two_bugs)
    assert result.code == 0, result.err
    loops = {e["name"]: e for e in json.loads(result.out)["loops"]}
    for name, entry in loops.items():
        # attempt 1 broke test_mul, which the configured pytest check guards: not accepted
        assert entry["status"] == "completed" and entry["iterations"] == 2, (name, result.err)
        assert entry["reward_history"][0] < 0.1
        calc = git(two_bugs, "show", f"{entry['branch']}:calc.py")
        assert "a * b  # mul" in calc
    assert "batch: 2/2 loops green" in result.err


def test_the_summary_says_why_a_loop_failed_in_its_tasks_terms(
    two_bugs: Path, tmp_path: Path, ralph: RunCli
) -> None:
    """A loop whose own tests pass but which broke what worked says so; a loop judged by every
    failing test says how many of them are left, which may be the other task's."""
    scoped = {**task_for(tmp_path, "add", "always"), "max_iterations": 2}
    unscoped = {**task_for(tmp_path, "sub"), "max_iterations": 1}
    del unscoped["test"]
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(yaml.safe_dump([scoped, unscoped]))
    result = ralph("batch", str(tasks), "--jobs", "1", "--json", cwd=two_bugs)
    assert result.code == 1, result.err
    loops = {e["name"]: e for e in json.loads(result.out)["loops"]}
    assert [loops["add"]["status"], loops["sub"]["status"]] == ["failed", "failed"]
    broke = "its own checks pass (tests), but it broke what worked: 1 new failure (pytest)"
    left = (
        "fixed 1 of the 2 failures it had to fix; those left may be other tasks' (a task "
        "without `test:` must fix every failing test); it broke what worked: 1 new failure"
    )
    assert loops["add"]["held_back"] == broke and loops["sub"]["held_back"] == left
    assert f"[add]   why     {broke}\n" in result.err
    assert f"[sub]   why     {left}\n" in result.err
    assert "without `test:` or `checks:`: 1 task (sub); each such loop must make" in result.err


def configured(**data: Any) -> config.Settings:
    return config.from_mapping(data)


def test_a_tasks_test_is_its_target_and_the_configured_checks_guard_it() -> None:
    project = configured(
        checks=["pytest", "mypy", {"name": "lint", "command": "ruff check .", "role": "target"}]
    )
    task = BatchTask("a", "fix a", test="pytest -q tests/test_a.py")
    assert loop_checks(task, project) == [
        {"name": "tests", "command": "pytest -q tests/test_a.py"},
        {"name": "pytest", "command": "pytest", "parser": "pytest", "role": "guard"},
        {"name": "mypy", "command": "mypy .", "parser": "mypy", "role": "guard"},
        {"name": "lint", "command": "ruff check .", "parser": "ruff", "role": "target"},
    ]
    # the configured check that is the task's own test runs once, as the target
    same = BatchTask("b", "fix b", test="pytest")
    assert [c["name"] for c in loop_checks(same, project) or []] == ["tests", "mypy", "lint"]
    # a task naming nothing: the configured checks, roles from the baseline, as before
    assert loop_checks(BatchTask("c", "fix c"), project) is None
    assert loop_env(BatchTask("c", "fix c"), project) == {}


def test_a_tasks_checks_select_and_a_mapping_carries_its_role() -> None:
    project = configured(checks=[{"name": "unit", "command": "pytest -q tests/unit"}, "mypy"])
    task = BatchTask(
        "a",
        "fix a",
        test="pytest tests/test_a.py",
        checks=("ruff", {"name": "unit", "role": "guard"}, {"name": "all", "command": "pytest"}),
    )
    assert loop_checks(task, project) == [
        {"name": "tests", "command": "pytest tests/test_a.py"},
        "ruff",
        {"name": "unit", "command": "pytest -q tests/unit", "parser": "pytest", "role": "guard"},
        {"name": "all", "command": "pytest"},
    ]
    assert task.own_checks() == ["tests", "ruff", "all"]


def test_the_loop_loads_those_checks_with_their_roles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the task's `ralph run` will run: its environment read by config.load, with a
    configured `test` (here from the user's environment) kept as a guard beside the task's."""
    (tmp_path / ".aiwg" / "ralph").mkdir(parents=True)
    (tmp_path / ".aiwg" / "ralph" / "config.yaml").write_text(
        "checks: [pytest, {name: mypy, command: mypy src}]\n"
    )
    monkeypatch.setenv("RALPH_TEST", "pytest -q tests/smoke")
    project = config.load(tmp_path)
    task = BatchTask("a", "fix a", test="pytest tests/test_a.py", actor="cmd:true")
    settings = task_settings(tmp_path, task, project)
    checks = {c.name: (c.command, c.role) for c in settings.all_checks()}
    assert checks == {
        "tests": ("pytest tests/test_a.py", None),
        "project-tests": ("pytest -q tests/smoke", "guard"),
        "mypy": ("mypy src", "guard"),
    }
    assert "tests" in settings.named() and settings.actor == "cmd:true"
    assert settings.worktree


def test_the_tasks_file_takes_check_mappings_like_the_config(tmp_path: Path) -> None:
    path = tmp_path / "tasks.yaml"
    path.write_text(
        "- {task: x, checks: [{name: all, command: pytest, role: guard}, mypy]}\n"
        "- {task: y, checks: {name: lint, command: ruff check ., timeout: 5m}}\n"
    )
    first, second = load_tasks(path)
    assert first.checks == ({"name": "all", "command": "pytest", "role": "guard"}, "mypy")
    assert second.checks == ({"name": "lint", "command": "ruff check .", "timeout": "5m"},)


@pytest.mark.parametrize(
    ("checks", "message"),
    [
        ("[{name: a, command: pytest, role: boss}]", "role must be target or guard"),
        ("[{command: pytest}]", "a check mapping needs a `name`"),
        ("[{name: a, colour: red}]", "check 'a': unknown key 'colour'"),
        ("[{name: a, weight: -1}]", "checks[0]"),
        ("[3]", "`checks` must be a check name or command, a mapping"),
    ],
)
def test_a_wrong_check_mapping_is_one_line_naming_the_task(
    tmp_path: Path, checks: str, message: str
) -> None:
    path = tmp_path / "tasks.yaml"
    path.write_text(f"- {{task: x}}\n- {{name: b, task: y, checks: {checks}}}\n")
    with pytest.raises(TasksFileError) as caught:
        load_tasks(path)
    assert "task 2 ('b')" in caught.value.message and message in caught.value.message
    assert "\n" not in caught.value.message
