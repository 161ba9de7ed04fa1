"""The codex preset's fixes, in process (tests/contract/test_codex.py runs the released CLI):
its own sandbox composed with ralph's, the user's OPENAI_BASE_URL passed on, the memory server
awaited with exactly its four tools approved, a model out of reach named with codex's own line
(and given up on rather than waited for), codex's own settings kept in the sandbox."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from ralph.actors.agent_output import parse_codex
from ralph.actors.agents import PRESETS, AgentActor
from ralph.actors.base import ActorResult
from ralph.actors.confine import confine
from ralph.memory.tools import TOOL_NAMES
from ralph.sandbox import Policy

CONFINED = "sandbox_workspace_write.exclude_slash_tmp=true"


def codex(tmp_path: Path, environ: dict[str, str] | None = None) -> AgentActor:
    return AgentActor(PRESETS["codex"], environ=environ or {}, base_dir=tmp_path)


def test_inside_ralph_sandbox_codex_keeps_its_own_without_tmp(tmp_path: Path) -> None:
    """0.171.0's bwrap re-mounts /tmp/.git read-only in each writable root; ralph's sandbox
    keeps /tmp read-only, so every command and edit failed: confined, /tmp is not one."""
    actor = codex(tmp_path)
    assert CONFINED not in actor.describe()  # without ralph's sandbox: codex as configured
    confine(actor, Policy("/usr/bin/bwrap", tmp_path, tmp_path), {"HOME": str(tmp_path)})
    argv = actor.describe().split()
    assert CONFINED in argv and argv[argv.index(CONFINED) - 1] == "-c"
    assert argv[argv.index("--sandbox") + 1] == "workspace-write"  # codex's own sandbox kept


def test_the_users_openai_base_url_reaches_codex_config(tmp_path: Path) -> None:
    actor = codex(tmp_path, {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    assert 'openai_base_url="http://127.0.0.1:9/v1"' in actor.describe()
    assert "openai_base_url" not in codex(tmp_path).describe()  # codex's own default


def test_codex_gives_up_on_a_model_out_of_reach(tmp_path: Path) -> None:
    """0.171.0 otherwise waits for the network without end: the wall timeout."""
    assert "features.unbounded_connection_retries=false" in codex(tmp_path).describe()


def test_the_memory_server_is_awaited_with_exactly_its_tools_approved(tmp_path: Path) -> None:
    actor = codex(tmp_path)
    assert actor.offer_memory(["/py", "-m", "ralph", "mcp"])
    args = actor.memory_wiring(tmp_path).args
    settings = args[1::2]
    assert set(args[::2]) == {"-c"}
    assert "mcp_servers.ralph.required=true" in settings  # the first request waits for it
    tools = json.dumps(list(TOOL_NAMES), separators=(", ", ": "))
    assert f"mcp_servers.ralph.enabled_tools={tools}" in settings
    approved = [s for s in settings if s.endswith('.approval_mode="approve"')]
    assert approved == [f'mcp_servers.ralph.tools.{t}.approval_mode="approve"' for t in TOOL_NAMES]
    assert not any("default_tools_approval_mode" in s or "approval_policy" in s for s in settings)


def lines(*events: dict[str, object]) -> str:
    return "".join(json.dumps(event) + "\n" for event in events)


GAVE_UP = "Connection failed: error sending request"
WAITING = "Reconnecting... waiting for network (Connection failed: error sending request)"


def test_a_model_out_of_reach_is_named_with_codex_line() -> None:
    gave_up = parse_codex(
        lines(
            {"type": "turn.started"},
            {"type": "error", "message": "Reconnecting... 5/5 (Connection failed: error)"},
            {"type": "error", "message": "Connection failed: error sending request"},
            {
                "type": "turn.failed",
                "error": {"message": "Connection failed: error sending request"},
            },
        )
    )
    assert gave_up.unreachable == GAVE_UP
    # stopped (the wall timeout) while codex still waited: its last line
    stopped = parse_codex(lines({"type": "turn.started"}, {"type": "error", "message": WAITING}))
    assert stopped.unreachable == f"stopped while {WAITING}"


def test_a_reconnection_that_got_an_answer_or_a_limit_is_not_out_of_reach() -> None:
    answered = parse_codex(
        lines(
            {"type": "error", "message": "Reconnecting... 2/5 (stream disconnected)"},
            {"type": "item.completed", "item": {"type": "error", "message": "Falling back"}},
            {"type": "item.completed", "item": {"type": "agent_message", "text": "Done."}},
            {"type": "turn.completed", "usage": {"input_tokens": 1, "output_tokens": 1}},
        )
    )
    assert answered.unreachable is None and answered.text == "Done."
    limit = "You’ve hit your usage limit. ... or try again at 9:33 AM."
    limited = parse_codex(
        lines(
            {"type": "error", "message": limit},
            {"type": "turn.failed", "error": {"message": limit}},
        )
    )
    assert limited.unreachable is None and limited.error == limit


def test_an_unreachable_model_is_the_iteration_note_not_the_timeout() -> None:
    from ralph.loop.iteration import Iteration

    result = ActorResult(
        output="", exit_code=None, duration_ms=1, timed_out="wall",
        unreachable="codex could not reach its model: Connection failed",
    )  # fmt: skip

    it = SimpleNamespace(acted=SimpleNamespace(result=result))
    assert Iteration.actor_notes(it) == ["codex could not reach its model: Connection failed"]  # type: ignore[arg-type]


def test_codex_own_settings_are_kept_in_the_sandbox(tmp_path: Path) -> None:
    actor = codex(tmp_path)
    confine(actor, Policy("/usr/bin/bwrap", tmp_path, tmp_path), {"HOME": str(tmp_path)})
    assert actor.sandbox is not None
    kept = actor.sandbox.keep
    assert {"OPENAI_BASE_URL", "OPENAI_ORGANIZATION", "OPENAI_PROJECT", "RUST_LOG"} <= kept
    assert {"CODEX_HOME", "CODEX_CA_CERTIFICATE"} <= kept


def test_a_memory_tool_that_failed_is_traced_as_failed() -> None:
    """0.171.0 reports a tool's own error as `status: failed`, `error: null`, the text in the
    result: the step is not ok."""
    from ralph.actors.tracing import parse_stream

    text = "Error executing tool list_loops: no ralph memory here"
    item = {
        "id": "item_0", "type": "mcp_tool_call", "server": "ralph", "tool": "list_loops",
        "arguments": {}, "error": None, "status": "failed",
        "result": {"content": [{"type": "text", "text": text}], "structured_content": None},
    }  # fmt: skip
    trajectory = parse_stream("codex", lines({"type": "item.completed", "item": item}))
    assert trajectory is not None
    (step,) = trajectory.steps
    assert (step.tool, step.ok, step.observation) == ("mcp:ralph/list_loops", False, text)
