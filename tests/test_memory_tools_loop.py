"""The memory's tools wired into the loop: a fake `claude` on PATH, given `--mcp-config`, starts
`ralph mcp` with the SDK's client, calls `search_reflections`, and the fix it finds there turns
the loop green; the trace and `ralph analyze` show the call. Codex and Gemini get the server
through their own configuration, written in the attempt's folder (gemini: a GEMINI_CLI_HOME)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from ralph.actors.agents import PRESETS, AgentActor
from ralph.memory.store import MemoryStore
from ralph.records import (
    ActorOutput,
    EvaluatorOutput,
    IterationRecord,
    MemoryMetadata,
    SelfReflection,
)
from ralph.testing import TEST_TEXT, VERSIONS

from .conftest import RunCli
from .fakes import AGENT_CREDENTIALS
from .fakes.calc_project import git, make_calc_repo

pytest.importorskip("mcp")

FAKES = Path(__file__).parent / "fakes" / "agents"
TESTS = TEST_TEXT + "\n\ndef test_negative():\n    assert f(-2) == 2\n"
CHECK = f"{sys.executable} -m pytest -q -p no:cacheprovider tests"
FIX = "FAKE-EDIT: calc.py :: return x => return abs(x)"


def earlier_reflection() -> IterationRecord:
    """What another loop learnt: its lesson carries the fix (the fake applies FAKE-EDIT lines)."""
    return IterationRecord(
        loop_id="ralph-earlier-1",
        iteration=1,
        timestamp="2026-01-01T00:00:00Z",
        task_description="negative numbers",
        actor_output=ActorOutput(actions=[], rationale="r"),
        evaluator_output=EvaluatorOutput(
            passed=False, verification_type="unit_tests", reward_signal=0.5
        ),
        self_reflection=SelfReflection(
            reflection_text="test_negative failed: f dropped the sign handling.",
            lessons_learned=[f"Negative inputs need abs(). {FIX}"],
        ),
        memory_metadata=MemoryMetadata(omega_capacity=3, current_memory_size=0),
    )


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = make_calc_repo(
        tmp_path / "repo", calc=VERSIONS["partial"], tests=TESTS, monkeypatch=monkeypatch
    )
    store = MemoryStore(root)
    store.ensure()
    store.write_record(earlier_reflection())
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "ralph's memory")
    # the fake claude on PATH, run by this Python (it needs the MCP SDK for its client)
    shims = tmp_path / "bin"
    shims.mkdir()
    shim = shims / "claude"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKES / "claude"}" "$@"\n')
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{shims}{os.pathsep}{os.environ.get('PATH', '')}")
    for name, value in AGENT_CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("FAKE_AGENT_MEMORY_QUERY", "negative abs sign")
    monkeypatch.setenv("FAKE_AGENT_LOG", str(tmp_path / "calls.jsonl"))
    monkeypatch.setenv("CI", "true")
    return root


def run(ralph: RunCli, project: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    args = ["run", "make f handle negative numbers", "--actor", "claude", "--test", CHECK]
    args += ["--reflector", "heuristic", "--lessons", "0", "--max-iterations", "1", "--json"]
    result = ralph(*args, *extra, cwd=project)
    assert result.code in (0, 1), result.err
    return result.code, json.loads(result.out)


def test_claude_asks_the_memory_mid_attempt_and_the_loop_ends_green(
    ralph: RunCli, project: Path, tmp_path: Path
) -> None:
    code, result = run(ralph, project)
    assert (code, result["stop_reason"]) == (0, "success"), result
    loop = result["loop_id"]
    store = MemoryStore(project)
    attempt = store.artifacts_dir(loop, 1)
    prompt = (attempt / "prompt.md").read_text()
    assert "# ralph's memory, as tools you can call" in prompt
    assert FIX not in prompt  # --lessons 0: the fix came through the tool, not the prompt
    (call,) = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    argv = call["argv"]
    config = Path(argv[argv.index("--mcp-config") + 1])
    assert config.parent == attempt  # the attempt's folder, never the user's files
    server = json.loads(config.read_text())["mcpServers"]["ralph"]
    assert server["args"][-3:] == ["mcp", "--project", str(store.root)]
    allowed = argv[argv.index("--allowedTools") + 1].split(",")
    assert allowed == [f"mcp__ralph__{t}" for t in PRESETS_TOOLS]
    record = store.read_record(loop, 1)
    assert record.ralph is not None and record.ralph.trace is not None
    assert record.ralph.trace.actions["mcp__ralph__search_reflections"] == 1
    analyzed = json.loads(ralph("analyze", "--json", cwd=project).out)
    assert analyzed["summary"]["agent_actions"]["memory_tool_attempts"] == 1
    assert "called ralph's memory tools in 1" in ralph("analyze", cwd=project).out
    changed = git(project, "status", "--porcelain", "--untracked-files=all").splitlines()
    assert all(line[3:].startswith(".aiwg/ralph/reflections/") for line in changed), changed


def test_without_memory_tools_claude_gets_no_server_and_cannot_find_the_fix(
    ralph: RunCli, project: Path, tmp_path: Path
) -> None:
    code, result = run(ralph, project, "--no-memory-tools")
    assert (code, result["stop_reason"]) == (1, "limit")
    prompt = (MemoryStore(project).artifacts_dir(result["loop_id"], 1) / "prompt.md").read_text()
    assert "ralph's memory, as tools" not in prompt
    (call,) = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert "--mcp-config" not in call["argv"] and "--allowedTools" not in call["argv"]


PRESETS_TOOLS = ("search_reflections", "lessons_for", "get_reflection", "list_loops")


# --- codex and gemini: their own configuration, per attempt ----------------------------------


def test_codex_gets_the_server_as_config_overrides_for_this_run(tmp_path: Path) -> None:
    actor = AgentActor(PRESETS["codex"], environ={}, base_dir=tmp_path)
    assert actor.offer_memory(["/py/bin/python", "-m", "ralph", "mcp", "--project", "/p q"])
    wiring = actor.memory_wiring(tmp_path)
    assert wiring.args[:4] == [
        "-c",
        'mcp_servers.ralph.command="/py/bin/python"',
        "-c",
        'mcp_servers.ralph.args=["-m", "ralph", "mcp", "--project", "/p q"]',
    ]
    assert wiring.files == {} and wiring.env == {}
    assert "-c 'mcp_servers.ralph.command=" in actor.describe()


def test_gemini_gets_a_home_of_its_own_with_the_users_settings_and_login(tmp_path: Path) -> None:
    """gemini 0.61 skips a system-defaults file in a folder a user can write ("Parent directory
    '/tmp' is insecure"): the server goes in the settings of a GEMINI_CLI_HOME of the attempt's
    own, the user's settings kept (comments and all), the rest of ~/.gemini linked."""
    home = tmp_path / "home"
    (home / ".gemini").mkdir(parents=True)
    settings = home / ".gemini" / "settings.json"
    settings.write_text(
        '{\n  // picked with /auth\n  "security": {"auth": {"selectedType": "gemini-api-key"}},\n'
        '  "mcpServers": {"other": {"command": "o"}}, "mcp": {"allowed": ["other"]}\n}\n'
    )
    (home / ".gemini" / "oauth_creds.json").write_text("{}")
    (home / ".env").write_text("GEMINI_API_KEY=k\n")
    actor = AgentActor(PRESETS["gemini"], environ={"HOME": str(home)}, base_dir=tmp_path)
    assert actor.offer_memory(["py", "-m", "ralph", "mcp"])
    folder = tmp_path / "001"
    wiring = actor.memory_wiring(folder)
    assert wiring.env == {"GEMINI_CLI_HOME": str(folder / "gemini-home")}
    assert "GEMINI_CLI_HOME=" in actor.describe()
    wiring.write()
    mine = folder / "gemini-home" / ".gemini"
    data = json.loads((mine / "settings.json").read_text())
    assert data["security"] == {"auth": {"selectedType": "gemini-api-key"}}
    assert data["mcpServers"]["other"] == {"command": "o"}
    assert data["mcp"]["allowed"] == ["other", "ralph"]
    ralph_server = data["mcpServers"]["ralph"]
    assert ralph_server["trust"] is True and ralph_server["includeTools"] == list(PRESETS_TOOLS)
    assert (mine / "oauth_creds.json").resolve() == (home / ".gemini/oauth_creds.json").resolve()
    assert (folder / "gemini-home" / ".env").read_text() == "GEMINI_API_KEY=k\n"
    assert settings.read_text().startswith("{\n  // picked")  # read, never written
    wiring.write()  # the next attempt's, over the same folder
    assert (mine / "oauth_creds.json").is_symlink()


@pytest.mark.parametrize("name", ["aider", "opencode"])
def test_a_cli_without_per_run_mcp_configuration_is_not_offered_the_tools(
    name: str, tmp_path: Path
) -> None:
    actor = AgentActor(PRESETS[name], environ={}, base_dir=tmp_path)
    assert not actor.offer_memory(["py", "-m", "ralph", "mcp"])
    assert actor.memory_wiring(tmp_path).args == []


def test_memory_tool_names_as_each_cli_reports_them() -> None:
    from ralph.actors.trace import memory_tool

    for name in ("mcp__ralph__search_reflections", "mcp:ralph/lessons_for", "list_loops"):
        assert memory_tool(name)
    for name in ("Read", "mcp__github__search_issues", "mcp__other__list_loops_x"):
        assert not memory_tool(name)


def test_without_the_sdk_no_cli_is_offered_the_tools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ralph.actors.agents import offer_memory_tools

    actor = AgentActor(PRESETS["claude"], environ={}, base_dir=tmp_path)
    with monkeypatch.context() as patched:
        patched.setitem(sys.modules, "mcp", None)  # as if the extra were not installed
        assert not offer_memory_tools(actor, tmp_path) and actor.memory_server is None
    assert offer_memory_tools(actor, tmp_path)
    assert actor.memory_server is not None and actor.memory_server[-1] == str(tmp_path.resolve())
