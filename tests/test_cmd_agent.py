"""A `cmd:` agent in the loop: one that cannot start stops the loop as a configuration error,
and what it printed is the attempt's summary (never ralph's stand-in in a lesson or a commit)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ralph.actors.command import CommandActor
from ralph.errors import PreflightError

from .fakes.loop import make_loop


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
    assert "exit 127: not found" in raised.value.message
    assert "no-such-agent-cli-xyz" in log.read_text()
    state = loop.state()
    assert state.iteration == 0 and not list(loop.store.record_paths("ralph-fake-1"))
    assert state.status == "paused" and "could not start" in (state.stop_reason or "")
