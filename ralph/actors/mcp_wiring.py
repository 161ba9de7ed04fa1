"""How each agent CLI takes ralph's memory server (`ralph mcp`) for one attempt, without
touching the user's files: Claude Code a `--mcp-config` file in the attempt's folder, the
server marked `alwaysLoad` so print mode waits for it (`CLAUDE_CONNECT_WAIT`), and
`--allowedTools` of exactly the memory's tools (print mode denies what it would ask about);
Codex `-c mcp_servers.ralph.*` overrides for the run (the server required, so codex waits
for it, and exactly the memory's tools approved); Gemini a system-defaults file named by
`GEMINI_CLI_SYSTEM_DEFAULTS_PATH`, a copy of the one in force plus the server. aider and
opencode take no server per run, so they are not offered one.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ralph.memory.tools import SERVER_NAME, TOOL_NAMES


@dataclass(frozen=True)
class MemoryWiring:
    """What gives one attempt of a CLI ralph's memory server (`ralph mcp`): arguments, variables
    and the files they name, all in the attempt's folder, never in the user's files."""

    args: list[str]
    env: dict[str, str]
    files: dict[Path, str]


# (attempt folder, the server's command line, the CLI's environment) -> its wiring
MemoryWirer = Callable[[Path, Sequence[str], Mapping[str, str]], MemoryWiring]


# Claude Code (>= 2.1.119) starts an attempt in print mode before its MCP servers connect: the
# first model requests had no memory tools. A server marked `alwaysLoad` is waited for (and its
# tools never deferred behind tool search), up to MCP_CONNECT_TIMEOUT_MS (its default, 5 s, is
# less than `ralph mcp` takes to start on a busy machine); a user's own value is kept.
CLAUDE_CONNECT_WAIT = ("MCP_CONNECT_TIMEOUT_MS", "60000")


def claude_memory(folder: Path, server: Sequence[str], environ: Mapping[str, str]) -> MemoryWiring:
    # print mode denies every tool it would have asked about: allow exactly the memory's
    config = folder / "mcp.json"
    entry = {"type": "stdio", "command": server[0], "args": list(server[1:]), "alwaysLoad": True}
    text = json.dumps({"mcpServers": {SERVER_NAME: entry}}, indent=2) + "\n"
    allowed = ",".join(f"mcp__{SERVER_NAME}__{tool}" for tool in TOOL_NAMES)
    name, wait = CLAUDE_CONNECT_WAIT
    env = {} if environ.get(name, "").strip() else {name: wait}
    return MemoryWiring(
        ["--mcp-config", str(config), "--allowedTools", allowed], env, {config: text}
    )


def codex_memory(folder: Path, server: Sequence[str], environ: Mapping[str, str]) -> MemoryWiring:
    """codex takes no server file; `-c` overrides its configuration for this run only.

    codex 0.171.0 sends its first model request before an MCP server has listed its tools
    (`ralph mcp` takes a second or more to start), so the memory tools were missing from the
    first requests: `required` makes it wait for this server (and fail, saying so, when the
    server cannot start). `exec` never asks, so a tool that needs approval fails ("MCP tool
    call requires approval, but approval policy is never"): exactly the memory's four tools
    are enabled and approved, none other of the server's and nothing of the user's servers.
    """

    def toml(value: str) -> str:
        return json.dumps(value)  # a JSON string is a TOML basic string

    table = f"mcp_servers.{SERVER_NAME}"
    args = ", ".join(toml(arg) for arg in server[1:])
    tools = ", ".join(toml(tool) for tool in TOOL_NAMES)
    wiring = [f"{table}.command={toml(server[0])}", f"{table}.args=[{args}]"]
    wiring += [f"{table}.required=true", f"{table}.enabled_tools=[{tools}]"]
    wiring += [f'{table}.tools.{tool}.approval_mode="approve"' for tool in TOOL_NAMES]
    return MemoryWiring([arg for setting in wiring for arg in ("-c", setting)], {}, {})


GEMINI_DEFAULTS = "GEMINI_CLI_SYSTEM_DEFAULTS_PATH"


def _gemini_defaults_path() -> Path:
    if sys.platform == "darwin":
        return Path("/Library/Application Support/GeminiCli/system-defaults.json")
    if sys.platform == "win32":
        return Path("C:/ProgramData/gemini-cli/system-defaults.json")
    return Path("/etc/gemini-cli/system-defaults.json")


def gemini_memory(folder: Path, server: Sequence[str], environ: Mapping[str, str]) -> MemoryWiring:
    # gemini reads a system-defaults file named by a variable, merged under the user's and
    # the project's settings: a copy of the one in force, plus the memory server, trusted (its
    # tools only read) so a headless run does not wait for a confirmation
    current = Path(environ.get(GEMINI_DEFAULTS) or _gemini_defaults_path())
    data: dict[str, object] = {}
    try:
        loaded = json.loads(current.read_text("utf-8")) if current.is_file() else {}
        data = loaded if isinstance(loaded, dict) else {}
    except (OSError, ValueError):
        data = {}
    servers = data.get("mcpServers")
    servers = dict(servers) if isinstance(servers, dict) else {}
    servers[SERVER_NAME] = {
        "command": server[0],
        "args": list(server[1:]),
        "trust": True,
        "includeTools": list(TOOL_NAMES),
    }
    data["mcpServers"] = servers
    path = folder / "gemini-system-defaults.json"
    return MemoryWiring([], {GEMINI_DEFAULTS: str(path)}, {path: json.dumps(data, indent=2)})
