"""The claude preset as the released CLI (2.1.197) needs it, in process: the memory server
waited for in print mode, claude's own settings variables kept in the sandbox, no
title-generation request, and a model it cannot reach named with its own line. The same
behaviours against the real CLI are in tests/contract/test_claude.py."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from ralph.actors.agent_output import parse_claude
from ralph.actors.agents import PRESETS, AgentActor
from ralph.actors.base import ActorContext, ActorResult
from ralph.actors.confine import confine
from ralph.actors.mcp_wiring import claude_memory
from ralph.actors.tracing import parse_stream
from ralph.loop.iteration import Iteration
from ralph.sandbox import Policy

SERVER = ["/usr/bin/python3", "-m", "ralph", "mcp", "--project", "/repo"]


def test_the_memory_server_is_waited_for_before_the_first_model_request(tmp_path: Path) -> None:
    # print mode connects --mcp-config servers in the background: only an `alwaysLoad` one is
    # awaited (its tools never deferred), and only for MCP_CONNECT_TIMEOUT_MS (default 5 s)
    wiring = claude_memory(tmp_path, SERVER, {})
    (config,) = wiring.files
    entry = json.loads(wiring.files[config])["mcpServers"]["ralph"]
    assert entry == {"type": "stdio", "command": SERVER[0], "args": SERVER[1:], "alwaysLoad": True}
    assert wiring.env == {"MCP_CONNECT_TIMEOUT_MS": "60000"}
    assert wiring.args[:2] == ["--mcp-config", str(config)]


def test_a_users_own_connect_timeout_is_kept(tmp_path: Path) -> None:
    wiring = claude_memory(tmp_path, SERVER, {"MCP_CONNECT_TIMEOUT_MS": "9000"})
    assert wiring.env == {}


def test_claude_runs_without_nonessential_traffic_unless_the_user_says_otherwise() -> None:
    # without it each attempt paid one title-generation request (seen at a fake Messages API)
    assert (
        AgentActor(PRESETS["claude"], environ={}).run_env()[
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"
        ]
        == "1"
    )
    users = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": ""}
    assert (
        AgentActor(PRESETS["claude"], environ=users).run_env()[
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"
        ]
        == ""
    )


def test_the_sandbox_keeps_claudes_own_settings_and_endpoint_and_drops_others(
    tmp_path: Path,
) -> None:
    environ = {
        "HOME": str(tmp_path),
        "PATH": "/usr/bin",
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
        "ANTHROPIC_API_KEY": "sk-ant-x",
        "ANTHROPIC_CUSTOM_HEADERS": "x-team: a",
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": "h",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_MAX_OUTPUT_TOKENS": "8000",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "MCP_TIMEOUT": "20000",
        "MCP_CONNECT_TIMEOUT_MS": "9000",
        "BASH_DEFAULT_TIMEOUT_MS": "300000",
        "VERTEX_REGION_CLAUDE_4_5_SONNET": "europe-west1",
        "OPENAI_API_KEY": "sk-other",
        "GITHUB_TOKEN": "ghp_x",
        "CLAUDE_SECRET_OF_ANOTHER_TOOL": "x",
    }
    policy = Policy("bwrap", tmp_path, tmp_path, environ=environ)
    actor = AgentActor(PRESETS["claude"], environ=environ)
    confine(actor, policy, environ)
    assert actor.sandbox is not None
    kept = actor.sandbox.environment(environ, tmp_path)
    dropped = {"OPENAI_API_KEY", "GITHUB_TOKEN", "CLAUDE_SECRET_OF_ANOTHER_TOOL"}
    assert set(kept) == set(environ) - dropped | {"TMPDIR"}


def test_an_unconnected_memory_server_at_the_start_is_noted() -> None:
    init = {
        "type": "system",
        "subtype": "init",
        "mcp_servers": [{"name": "ralph", "status": "pending"}],
    }
    assert parse_claude(json.dumps(init)).notes == [
        "the memory server was pending when the attempt began"
    ]
    init["mcp_servers"] = [{"name": "ralph", "status": "connected"}]
    assert parse_claude(json.dumps(init)).notes == []


def retry(attempt: int, error: str = "unknown", status: int | None = None) -> dict[str, Any]:
    return {"type": "system", "subtype": "api_retry", "attempt": attempt, "max_retries": 10,
            "retry_delay_ms": 500.0, "error_status": status, "error": error}  # fmt: skip


GAVE_UP = {
    "type": "result",
    "subtype": "success",
    "is_error": True,
    "api_error_status": None,
    "result": "API Error: Unable to connect to API (ConnectionRefused)",
}


def stream(*events: dict[str, Any]) -> str:
    return "\n".join(json.dumps(event) for event in events) + "\n"


def test_a_model_it_cannot_reach_is_named_with_the_clis_own_line() -> None:
    # claude 2.1.197 with a dead endpoint: ten api_retry events, then this result, exit 1
    gave_up = parse_claude(stream(*(retry(n) for n in range(1, 11)), GAVE_UP))
    assert gave_up.unreachable == "API Error: Unable to connect to API (ConnectionRefused)"
    stopped = parse_claude(stream(retry(1), retry(2, "server_error", 503)))
    assert stopped.unreachable == (
        "stopped while retrying (retry 2 of 10: the model API failed (HTTP 503))"
    )
    assert stopped.error == stopped.unreachable


def test_retries_that_were_answered_or_a_limit_are_not_an_unreachable_model() -> None:
    answered = {"type": "assistant", "message": {"model": "claude-x", "content": []}}
    assert parse_claude(stream(retry(1), answered)).unreachable is None
    limited = dict(GAVE_UP, api_error_status=429, result="API Error: Request rejected (429)")
    assert parse_claude(stream(retry(1, "rate_limit", 429), limited)).unreachable is None


def test_the_iteration_says_unreachable_rather_than_timed_out() -> None:
    result = ActorResult("", None, 1000, timed_out="wall", notes=["sandbox denied: x"])
    result.unreachable = "claude could not reach its model: stopped while retrying (…)"
    it = cast(Iteration, SimpleNamespace(acted=SimpleNamespace(result=result)))
    assert Iteration.actor_notes(it) == [result.unreachable, "sandbox denied: x"]
    result.unreachable = None
    assert Iteration.actor_notes(it)[0] == "actor stopped at its wall timeout"


def test_a_claude_stopped_while_retrying_is_named_by_the_attempt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "claude"
    events = stream(retry(1), retry(2))
    script.write_text(
        "#!/bin/sh\ncat >/dev/null\n" + f"cat <<'EOF'\n{events}EOF\n" + "exec sleep 60\n"
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    (tmp_path / "tree").mkdir()
    ctx = ActorContext(
        "ralph-t-00000000", 1, tmp_path / "tree", tmp_path / "001", iteration_timeout=3
    )
    acted = AgentActor(PRESETS["claude"], environ=dict(os.environ)).act("fix it", ctx)
    assert acted.timed_out == "wall"
    assert acted.unreachable == (
        "claude could not reach its model: stopped while retrying "
        "(retry 2 of 10: no answer from the model API)"
    )


def test_a_messages_usage_is_counted_once_and_its_start_output_count_not_at_all() -> None:
    # claude 2.1.197 prints one assistant event per content block, each with the usage of
    # the message's `message_start` (output_tokens 1): two tool calls are one message
    def block(n: int) -> dict[str, Any]:
        use = {"type": "tool_use", "id": f"t{n}", "name": "Read", "input": {"file_path": "a"}}
        usage = {"input_tokens": 100, "output_tokens": 1}
        return {"type": "assistant", "message": {"id": "m1", "content": [use], "usage": usage}}

    trajectory = parse_stream("claude", stream(block(1), block(2)))
    assert trajectory is not None
    first, second = trajectory.steps
    assert (first.tokens_in, first.tokens_out, second.tokens_in) == (100, None, None)
