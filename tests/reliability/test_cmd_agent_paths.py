"""A `cmd:` agent given by a relative path runs under `--worktree` as in the checkout: the path
is the file in the directory ralph was started in, not one in the loop's worktree."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..conftest import RunCli
from .conftest import assert_invariants, check_command, plan, write


def test_a_relative_agent_path_runs_the_same_file_in_a_worktree(
    ralph: RunCli, project: Path
) -> None:
    tools = project.parent / "tools"
    agent = tools / "agent.sh"
    agent.write_text(f"#!/bin/sh\nexec {sys.executable} {tools / 'agent.py'}\n")
    agent.chmod(0o755)
    plan(project, {"1": {**write("full"), "say": "edited calc.py: f returns abs(x)"}})
    argv = ["run", "make f pass its tests", "--actor", "cmd:../tools/agent.sh", "--worktree"]
    argv += ["--test", check_command(), "--reflector", "heuristic", "--json"]
    result = ralph(*argv, cwd=project)
    assert result.code == 0, result.err
    summary = json.loads(result.out)
    assert summary["reward_history"] == [1.0]
    record = assert_invariants(project)[0]  # what the agent said is the attempt's summary
    assert record["actor_output"]["rationale"] == "edited calc.py: f returns abs(x)"


def test_resume_from_another_directory_runs_the_agent_a_relative_path_named(
    ralph: RunCli, project: Path
) -> None:
    """The state keeps the absolute path: `../../tools/agent.sh` typed in tests/ names nothing
    from the repository's top, where `resume` runs."""
    tools = project.parent / "tools"
    agent = tools / "agent.sh"
    agent.write_text(f"#!/bin/sh\nexec {sys.executable} {tools / 'agent.py'}\n")
    agent.chmod(0o755)
    plan(project, {"1": write("partial"), "2": write("full")})
    argv = ["run", "make f pass its tests", "--actor", "cmd:../../tools/agent.sh"]
    argv += ["--test", check_command(), "--reflector", "heuristic", "--max-iterations", "1"]
    first = ralph(*argv, "--json", cwd=project / "tests")
    assert first.code == 1, first.err
    loop_id = json.loads(first.out)["loop_id"]
    state = json.loads((project / ".aiwg/ralph/loops" / loop_id / "state.json").read_text())
    assert state["settings"]["actor"] == f"cmd:{agent}"
    resumed = ralph("resume", loop_id, "--max-iterations", "2", "--json", cwd=project)
    assert resumed.code == 0, resumed.err
    assert json.loads(resumed.out)["reward_history"][-1] == 1.0


def test_a_batch_task_s_relative_agent_path_is_beside_the_tasks_file(tmp_path: Path) -> None:
    from ralph.loop.tasks_file import load_tasks

    (tmp_path / "agents").mkdir()
    agent = tmp_path / "agents" / "fix.sh"
    agent.write_text("#!/bin/sh\n")
    tasks = tmp_path / "agents" / "tasks.yaml"
    tasks.write_text(
        "defaults: {actor: 'cmd:./fix.sh --fast'}\n"
        "tasks: [one, {task: two, actor: 'cmd:./missing.sh'}, {task: three, actor: claude}]\n"
    )
    loaded = load_tasks(tasks)
    assert [t.actor for t in loaded] == [f"cmd:{agent} --fast", "cmd:./missing.sh", "claude"]
