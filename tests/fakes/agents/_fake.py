"""Shared by the fake agent CLIs beside this file: argv checks, prompt edits, a call log.

A fake is run exactly as ralph runs the real tool. It refuses (exit 2, message on stderr) any
command line other than the one the preset is meant to send, applies the edits the prompt asks
for (`FAKE-EDIT: path :: old => new` lines, or the same in $FAKE_AGENT_EDIT), and prints that
tool's real machine-readable output.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

EDIT_LINE = re.compile(r"FAKE-EDIT:\s*(?P<path>\S+)\s*::\s*(?P<old>.*?)\s*=>\s*(?P<new>.*?)\s*$")
DEFAULT_ANSWER = '{"reflection_text": "the fake agent thought about it"}'


def fail(tool: str, message: str) -> None:
    print(f"fake {tool}: {message}", file=sys.stderr)
    sys.exit(2)


def split_extras(
    tool: str, argv: Sequence[str], head: Sequence[str], tail: Sequence[str] = ()
) -> list[str]:
    """argv must be `head + extras + tail`; returns the extras (the user's actor_args)."""
    argv = list(argv)
    if argv[: len(head)] != list(head):
        fail(tool, f"expected argv to start with {list(head)}, got {argv}")
    if tail and argv[len(argv) - len(tail) :] != list(tail):
        fail(tool, f"expected argv to end with {list(tail)}, got {argv}")
    return argv[len(head) : len(argv) - len(tail)]


def check_extras(tool: str, extras: Sequence[str], known: dict[str, bool]) -> None:
    """Extras must be options the real tool knows; known maps an option to 'takes a value'."""
    i = 0
    while i < len(extras):
        option = extras[i].split("=", 1)[0]
        if option not in known:
            fail(tool, f"unknown option {extras[i]!r}")
        i += 2 if known[option] and "=" not in extras[i] else 1


def read_stdin(tool: str) -> str:
    prompt = sys.stdin.read()
    if not prompt.strip():
        fail(tool, "no prompt on stdin")
    return prompt


def requested_edits(prompt: str) -> list[tuple[str, str, str]]:
    lines = prompt.splitlines() + os.environ.get("FAKE_AGENT_EDIT", "").splitlines()
    found = []
    for line in lines:
        match = EDIT_LINE.search(line)
        if match:
            found.append((match["path"], match["old"], match["new"]))
    return found


def apply_edits(prompt: str) -> list[tuple[str, str, str]]:
    """Apply the requested edits in cwd; returns those that applied (absolute path, old, new)."""
    done = []
    for rel, old, new in requested_edits(prompt):
        path = Path.cwd() / rel
        text = path.read_text() if path.exists() else ""
        if old not in text:
            continue
        path.write_text(text.replace(old, new, 1))
        done.append((str(path), old, new))
    return done


def record(tool: str, argv: Sequence[str], prompt: str, mode: str) -> None:
    """Append what this run saw to $FAKE_AGENT_LOG (one JSON object a line) for the tests."""
    log = os.environ.get("FAKE_AGENT_LOG")
    if not log:
        return
    entry = {
        "tool": tool,
        "mode": mode,
        "argv": list(argv),
        "cwd": os.getcwd(),
        "prompt": prompt,
        "env": {k: v for k, v in os.environ.items() if k.startswith("RALPH_")},
    }
    with open(log, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry) + "\n")


def answer() -> str:
    return os.environ.get("FAKE_AGENT_ANSWER", DEFAULT_ANSWER)


def emit(event: dict[str, object]) -> None:
    print(json.dumps(event, separators=(",", ":")), flush=True)


def files_to_read(prompt: str) -> list[str]:
    """The files the fake reads before it edits: those its edits name, absolute, existing."""
    seen: list[str] = []
    for rel, _, _ in requested_edits(prompt):
        path = str(Path.cwd() / rel)
        if Path(path).is_file() and path not in seen:
            seen.append(path)
    return seen


def read_text(path: str) -> str:
    return Path(path).read_text(encoding="utf-8", errors="replace")


def command_to_run() -> str | None:
    """$FAKE_AGENT_RUN: a shell command the fake runs (for real) before it edits."""
    return os.environ.get("FAKE_AGENT_RUN") or None


def run_command(command: str) -> tuple[str, int]:
    import subprocess

    done = subprocess.run(
        command, shell=True, capture_output=True, text=True, timeout=120, check=False
    )
    return done.stdout + done.stderr, done.returncode


def ask_memory(config_file: str, tool: str, arguments: dict[str, object]) -> dict[str, object]:
    """Start the MCP server the `--mcp-config` file names, as Claude Code would, with the
    SDK's stdio client, and call one tool; its JSON answer (`{"error": ...}` on a tool error)."""
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    with open(config_file, encoding="utf-8") as handle:
        (entry,) = json.load(handle)["mcpServers"].values()
    params = StdioServerParameters(command=entry["command"], args=entry.get("args", []))

    async def call() -> dict[str, object]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool(tool, arguments)
        text = result.content[0].text if result.content else ""
        return {"error": text} if result.isError else json.loads(text)

    return anyio.run(call)
