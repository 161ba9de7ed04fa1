"""`ralph mcp`: the memory's four tools (memory/tools.py) as an MCP server over stdio, built on
the official Python SDK (the optional extra `ralph-reflexion[mcp]`), so an agent can ask mid-attempt
whether a failure was met before and what worked.

Read-only: no tool writes a record (the search index, a cache, is brought up to date as
`ralph reflections search` does). A tool's bad argument is a tool error, never the end of the
server. The SDK is imported only here, when the server starts.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from io import TextIOWrapper
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from ralph.errors import PreflightError, RalphError
from ralph.memory import tools

if TYPE_CHECKING:
    from mcp.server.fastmcp import FastMCP

    from ralph.memory.store import MemoryStore

INSTRUCTIONS = (
    "ralph's episodic memory of this repository: reflections on earlier attempts (what failed, "
    "the root cause, the lessons). Ask it when you meet a failure you do not understand: "
    "search_reflections for words of the error, lessons_for with the failing output."
)
INSTALL_HINT = "pip install 'ralph-reflexion[mcp]' (the MCP Python SDK, mcp>=1.10,<2)"


def server_command(root: Path) -> list[str]:
    """How an agent starts this server for the memory at `root`: this ralph, this Python."""
    return [sys.executable, "-m", "ralph", "mcp", "--project", str(root)]


def sdk_available() -> bool:
    """Whether the MCP SDK is installed (the loop offers the tools only then)."""
    return importlib.util.find_spec("mcp") is not None


def build_server(store: MemoryStore) -> FastMCP:
    """The FastMCP server with the four tools over `store`."""
    try:
        from mcp.server.fastmcp import FastMCP
        from mcp.server.fastmcp.exceptions import ToolError
    except ImportError:
        raise PreflightError("the MCP SDK is not installed", hint=INSTALL_HINT) from None

    server = FastMCP(tools.SERVER_NAME, instructions=INSTRUCTIONS, log_level="WARNING")

    def answer(call: Any, *args: Any) -> dict[str, Any]:
        try:
            result: dict[str, Any] = call(store, *args)
        except RalphError as error:  # the one-line message, as the CLI would print it
            raise ToolError(tools.clean(error.message)) from None
        return result

    @server.tool()
    def search_reflections(
        query: str, limit: int = 5, category: str | None = None
    ) -> dict[str, Any]:
        """Past reflections of every loop ranked by relevance to the query's words (BM25): loop
        id, iteration, task, root cause, failure category, lessons and reward."""
        return answer(tools.search_reflections, query, limit, category)

    @server.tool()
    def lessons_for(failure: str) -> dict[str, Any]:
        """Lessons from past loops whose failures resemble this one. Paste the failing output:
        pytest ids, file:line: messages, mypy or ruff lines."""
        return answer(tools.lessons_for, failure)

    @server.tool()
    def get_reflection(loop_id: str, iteration: int) -> dict[str, Any]:
        """One iteration's whole record: what the agent did, what failed, the reflection."""
        return answer(tools.get_reflection, loop_id, iteration)

    @server.tool()
    def list_loops(limit: int = 20) -> dict[str, Any]:
        """The most recent loops, newest first: task, status, iterations, best reward."""
        return answer(tools.list_loops, limit)

    return server


def serve(store: MemoryStore, stdin: BinaryIO, stdout: BinaryIO) -> None:
    """Serve until the client closes stdin: every line gets its answer (one that is not a
    JSON-RPC message a JSON-RPC error, `not_a_message`), and the end of input ends it cleanly."""
    import anyio

    anyio.run(_serve_stdio, build_server(store), stdin, stdout)


async def _serve_stdio(server: FastMCP, raw_in: BinaryIO, raw_out: BinaryIO) -> None:
    """The SDK's stdio transport, but a line that does not parse is answered here, never
    handed to the session as an exception (the SDK's gets no reply, and end of input right
    after one ended in an ExceptionGroup)."""
    import anyio
    from mcp import types
    from mcp.shared.message import SessionMessage

    stdin = anyio.wrap_file(TextIOWrapper(raw_in, encoding="utf-8", errors="replace"))
    stdout = anyio.wrap_file(TextIOWrapper(raw_out, encoding="utf-8"))
    to_server, server_reads = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    server_writes, from_server = anyio.create_memory_object_stream[SessionMessage](0)
    lock = anyio.Lock()

    async def write(line: str) -> None:
        async with lock:
            await stdout.write(line + "\n")
            await stdout.flush()

    async def read_lines() -> None:
        async with to_server:
            async for line in stdin:
                if not line.strip():
                    continue
                try:
                    message = types.JSONRPCMessage.model_validate_json(line)
                except ValueError:  # pydantic's ValidationError too
                    await write(not_a_message(line))
                    continue
                await to_server.send(SessionMessage(message))

    async def write_answers() -> None:
        async with from_server:
            async for answer in from_server:
                await write(answer.message.model_dump_json(by_alias=True, exclude_none=True))

    low = server._mcp_server  # the SDK's own server under FastMCP (mcp<2)
    async with anyio.create_task_group() as group:
        group.start_soon(read_lines)
        group.start_soon(write_answers)
        async with server_writes:
            await low.run(server_reads, server_writes, low.create_initialization_options())


def not_a_message(line: str) -> str:
    """The JSON-RPC error for a line that is no message: -32700 when it is not JSON, -32600
    (with its id, when it has a usable one) when it is JSON but not a JSON-RPC message."""
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        code, text, ident = -32700, "Parse error: the line is not JSON", None
    else:
        code, text = -32600, "Invalid Request: not a JSON-RPC 2.0 message"
        ident = data.get("id") if isinstance(data, dict) else None
        if not isinstance(ident, str | int) or isinstance(ident, bool):
            ident = None
    error = {"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": text}}
    return json.dumps(error)
