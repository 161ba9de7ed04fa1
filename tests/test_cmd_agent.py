"""A `cmd:` agent in the loop: one that cannot start stops the loop as a configuration error,
and what it printed is the attempt's summary (never ralph's stand-in in a lesson or a commit)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ralph.actors.command import CommandActor
from ralph.errors import PreflightError
from ralph.testing import VERSIONS, FakeWorkspace, make_loop

FULL = "printf 'def f(x: int) -> int:\\n    return abs(x)\\n' > calc.py"


def test_an_agent_that_cannot_start_stops_the_loop_at_once_without_an_iteration(
    tmp_path: Path,
) -> None:
    loop = make_loop(tmp_path / "repo", max_iterations=3)
    agent = loop.root / "agent.sh"  # preflight finds it; what it starts is not there
    agent.write_text("#!/bin/sh\nexec no-such-agent-cli-xyz --go\n")
    agent.chmod(0o755)
    loop.runner.parts.actor = CommandActor("./agent.sh", invoked_from=loop.root)
    with pytest.raises(PreflightError) as raised:
        loop.start()
    log = loop.store.artifacts_dir("ralph-fake-1", 1) / "actor.log"
    assert str(agent) in raised.value.message and str(log) in raised.value.message
    assert "exit 127: not found" in raised.value.message  # and the shell's own words:
    assert "no-such-agent-cli-xyz: not found" in raised.value.message
    assert "no-such-agent-cli-xyz" in log.read_text()
    state = loop.state()
    assert state.iteration == 0 and not list(loop.store.record_paths("ralph-fake-1"))
    assert state.status == "paused" and "could not start" in (state.stop_reason or "")


def test_what_a_cmd_agent_printed_is_its_summary_and_what_worked(tmp_path: Path) -> None:
    loop = make_loop(tmp_path / "repo")
    said = "echo 'reading calc.py'; echo; echo 'thought: f ignores the sign'; echo 'edited calc.py'"
    loop.runner.parts.actor = CommandActor(f"{FULL}; {said}")
    assert loop.start().exit_code == 0
    assert (loop.root / "calc.py").read_text() == VERSIONS["full"]
    record = loop.store.read_record("ralph-fake-1", 1)
    rationale = record.actor_output.rationale
    assert rationale == "reading calc.py\nthought: f ignores the sign\nedited calc.py"
    assert record.self_reflection.lessons_learned == ["What worked: reading calc.py"]


def test_a_silent_cmd_agent_leaves_no_stand_in_in_lessons_or_commits(tmp_path: Path) -> None:
    loop = make_loop(tmp_path / "repo")
    loop.runner.parts.actor = CommandActor(FULL)
    assert loop.start().exit_code == 0
    record = loop.store.read_record("ralph-fake-1", 1)
    assert "without a summary of its own" in record.actor_output.rationale  # the schema needs one
    assert record.self_reflection.lessons_learned == []
    assert "without a summary" not in record.self_reflection.reflection_text
    assert isinstance(loop.workspace, FakeWorkspace)
    assert loop.workspace.messages and not any(
        "without a summary" in message for message in loop.workspace.messages
    )
