"""How each agent CLI takes ralph's memory server (`ralph mcp`) for one attempt, without
touching the user's files: Claude Code a `--mcp-config` file in the attempt's folder, the
server marked `alwaysLoad` so print mode waits for it (`CLAUDE_CONNECT_WAIT`), and
`--allowedTools` of exactly the memory's tools (print mode denies what it would ask about);
Codex `-c mcp_servers.ralph.*` overrides for the run (the server required, so codex waits
for it, and exactly the memory's tools approved); Gemini a home of the attempt's own named by
`GEMINI_CLI_HOME`: the user's settings plus the server, links to the rest of `~/.gemini`.
aider and opencode take no server per run, so they are not offered one.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ralph.files import atomic_write_text
from ralph.memory.tools import SERVER_NAME, TOOL_NAMES


@dataclass(frozen=True)
class MemoryWiring:
    """What gives one attempt of a CLI ralph's memory server (`ralph mcp`): arguments, variables
    and the files they name, all in the attempt's folder, never in the user's files."""

    args: list[str]
    env: dict[str, str]
    files: dict[Path, str]
    links: dict[Path, Path] = field(default_factory=dict)  # symbolic link -> what it names
    writable: tuple[Path, ...] = ()  # folders the CLI writes in (bound so in the sandbox)

    def write(self) -> None:
        """Put the files and links in place (replacing an earlier attempt's)."""
        for path, text in self.files.items():
            atomic_write_text(path, text, durable=False)
        for link, target in self.links.items():
            link.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileNotFoundError):
                link.unlink()
            link.symlink_to(target)
        for folder in self.writable:
            folder.mkdir(parents=True, exist_ok=True)


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


GEMINI_HOME = "GEMINI_CLI_HOME"
GEMINI_BESIDE = (".env", ".agents")  # what gemini also reads in its home, beside `.gemini`
JSON_COMMENT = re.compile(r'("(?:\\.|[^"\\])*")|//[^\n]*|/\*.*?\*/', re.S)


def gemini_memory(folder: Path, server: Sequence[str], environ: Mapping[str, str]) -> MemoryWiring:
    # gemini (0.61) reads a system-defaults file only where root owns it and every folder
    # above it ("Parent directory '/tmp' is insecure"), so not in an attempt's folder; it reads
    # the user's settings from $GEMINI_CLI_HOME/.gemini: a home of the attempt's own holds the
    # user's settings plus the server, trusted (its tools only read) so a headless run does
    # not wait for a confirmation
    def add_server(settings: dict[str, object]) -> dict[str, object]:
        servers = settings.get("mcpServers")
        servers = dict(servers) if isinstance(servers, dict) else {}
        servers[SERVER_NAME] = {
            "command": server[0],
            "args": list(server[1:]),
            "trust": True,
            "includeTools": list(TOOL_NAMES),
        }
        mcp = settings.get("mcp")
        if isinstance(mcp, dict) and isinstance(mcp.get("allowed"), list):
            mcp = {**mcp, "allowed": [*mcp["allowed"], SERVER_NAME]}  # an allow-list of the user's
            settings = {**settings, "mcp": mcp}
        return {**settings, "mcpServers": servers}

    return gemini_home(folder / "gemini-home", environ, add_server)


def gemini_home(
    home: Path,
    environ: Mapping[str, str],
    edit: Callable[[dict[str, object]], dict[str, object]],
) -> MemoryWiring:
    """A GEMINI_CLI_HOME for one run: `.gemini/settings.json` the user's settings as `edit`
    changes them, every other entry of the user's `.gemini` (login, trusted folders, sessions)
    and of `GEMINI_BESIDE` a link to the user's own, so what gemini writes there lands where it
    would have. The user's files are read, never written."""
    user_home = Path(environ.get(GEMINI_HOME) or environ.get("HOME") or Path.home())
    source, target = user_home / ".gemini", home / ".gemini"
    settings = jsonc_object(source / "settings.json")
    links = {home / name: user_home / name for name in GEMINI_BESIDE}
    with contextlib.suppress(OSError):
        links |= {target / e.name: e for e in source.iterdir() if e.name != "settings.json"}
    text = json.dumps(edit(settings), indent=2) + "\n"
    links = {link: to for link, to in links.items() if os.path.lexists(to)}
    return MemoryWiring(
        [], {GEMINI_HOME: str(home)}, {target / "settings.json": text}, links, (home,)
    )


def jsonc_object(path: Path) -> dict[str, object]:
    """A settings file as gemini reads it (JSON with comments); {} when absent or unreadable."""
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    kept = JSON_COMMENT.sub(lambda m: m.group(1) or "", text)  # strings kept, comments gone
    try:
        data = json.loads(kept)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}
