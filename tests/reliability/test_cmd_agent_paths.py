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
