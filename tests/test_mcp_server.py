"""`ralph mcp`: the memory's four tools over stdio, driven by the MCP SDK's own client, and the
tools as plain functions (bad arguments, redaction, the pasted-failure parser)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from ralph.errors import RalphError
from ralph.memory import tools
from ralph.memory.store import MemoryStore
from ralph.testing import make_loop, write

from .conftest import RunCli

pytest.importorskip("mcp")

LOOP = "ralph-mcp-1"


@pytest.fixture(scope="module")
def memory_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A memory written by a real loop (in-process fakes): two failed attempts, then green."""
    root = tmp_path_factory.mktemp("project")
    loop = make_loop(root, {1: write("half"), 2: write("partial"), 3: write("full")})
    result = loop.start(LOOP)
    assert result.stop_reason == "success"
    return root


async def _session(root: Path, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "ralph", "mcp", "--project", str(root)]
    )
    answers: list[Any] = []
    async with stdio_client(params) as (read, write_), ClientSession(read, write_) as session:
        await session.initialize()
        listed = await session.list_tools()
        answers.append(sorted(tool.name for tool in listed.tools))
        for name, arguments in calls:
            answers.append(await session.call_tool(name, arguments))
    return answers


def drive(root: Path, *calls: tuple[str, dict[str, Any]]) -> list[Any]:
    import anyio

    return anyio.run(_session, root, list(calls))


def payload(result: Any) -> Any:
    assert not result.isError, result.content
    return json.loads(result.content[0].text)


def test_a_session_over_stdio_lists_the_tools_and_finds_the_loops_reflection(
    memory_root: Path,
) -> None:
    names, found, loops, one, lessons = drive(
        memory_root,
        ("search_reflections", {"query": "test_negative", "limit": 3}),
        ("list_loops", {}),
        ("get_reflection", {"loop_id": LOOP, "iteration": 1}),
        ("lessons_for", {"failure": "FAILED tests/test_calc.py::test_negative - assert 0 == 1"}),
    )
    assert names == sorted(tools.TOOL_NAMES)
    results = payload(found)["results"]
    assert results and results[0]["loop_id"] == LOOP
    first = results[0]
    assert first["task"] == "make f pass its tests"
    assert {"iteration", "root_cause", "category", "lessons", "reward"} <= set(first)
    listed = payload(loops)["loops"]
    assert [row["loop_id"] for row in listed] == [LOOP]
    assert listed[0]["status"] == "completed"
    record = payload(one)
    assert (record["loop_id"], record["iteration"]) == (LOOP, 1)
    assert "lessons" in payload(lessons)  # a green loop's own failures: none from other loops


def test_a_bad_argument_is_a_tool_error_and_the_server_goes_on(memory_root: Path) -> None:
    _, bad_limit, bad_category, unknown, wrong_type, good = drive(
        memory_root,
        ("search_reflections", {"query": "negative", "limit": 0}),
        ("search_reflections", {"query": "negative", "category": "nonsense"}),
        ("get_reflection", {"loop_id": "ralph-nope", "iteration": 1}),
        ("get_reflection", {"loop_id": LOOP, "iteration": "one"}),
        ("list_loops", {"limit": 1}),
    )
    for result in (bad_limit, bad_category, unknown, wrong_type):
        assert result.isError
    assert "limit must be a whole number from 1 to 50" in bad_limit.content[0].text
    assert "unknown failure category 'nonsense'" in bad_category.content[0].text
    assert "unknown loop 'ralph-nope'" in unknown.content[0].text
    assert len(payload(good)["loops"]) == 1


def test_ralph_mcp_without_memory_still_answers_with_a_tool_error(tmp_path: Path) -> None:
    _, result = drive(tmp_path, ("list_loops", {}))
    assert result.isError and "no ralph memory here" in result.content[0].text


# --- the tools as functions ------------------------------------------------------------------


def test_answers_are_redacted_and_free_of_escapes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-live-0123456789abcdef0123"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    cleaned = tools.clean({"a": [f"key {secret}", "red \x1b[31mtext\x1b[0m"]})
    assert secret not in json.dumps(cleaned)
    assert "\x1b" not in json.dumps(cleaned)


def test_lessons_for_finds_another_loops_lesson_from_pasted_output(tmp_path: Path) -> None:
    from .test_lessons import NEGATIVE, record, save

    store = MemoryStore(tmp_path)
    save(store, record("ralph-a", 1, errors=[NEGATIVE], lessons=["Negative inputs need abs()."]))
    pasted = "FAILED tests/test_calc.py::test_negative - AssertionError: negative inputs"
    found = tools.lessons_for(store, pasted)["lessons"]
    assert [lesson["text"] for lesson in found] == ["Negative inputs need abs()."]
    assert found[0]["source"] == "ralph-a#1"
    assert tools.lessons_for(store, "F401 in app/cli.py is unrelated")["lessons"] == []


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "FAILED tests/t.py::test_x - assert 1 == 2",
            ("test_failure", "tests/t.py", "tests/t.py::test_x"),
        ),
        (
            "a/b.py:12: error: Incompatible types  [assignment]",
            ("type_error", "a/b.py", "assignment"),
        ),
        ("a/b.py:3:1: F401 `os` imported but unused", ("lint_error", "a/b.py", "F401")),
        ("a/b.py:7: ValueError: bad", ("runtime_error", "a/b.py", None)),
        ("a/b.py:7: SyntaxError: invalid syntax", ("syntax_error", "a/b.py", None)),
        ("something went wrong", ("other", None, None)),
    ],
)
def test_a_pasted_failure_becomes_the_diagnostics_the_checks_record(
    line: str, expected: tuple[str, str | None, str | None]
) -> None:
    (d,) = tools.failure_diagnostics(line)
    assert (d.type, d.file, d.rule) == expected


@pytest.mark.parametrize(
    "call",
    [
        lambda s: tools.search_reflections(s, "x", limit=51),
        lambda s: tools.search_reflections(s, "x", limit=True),
        lambda s: tools.lessons_for(s, "   "),
        lambda s: tools.get_reflection(s, LOOP, -1),
        lambda s: tools.list_loops(s, 0),
    ],
)
def test_bad_arguments_are_one_line_errors(tmp_path: Path, call: Any) -> None:
    with pytest.raises(RalphError):
        call(MemoryStore(tmp_path))


def test_ralph_mcp_without_the_sdk_is_one_line_and_exit_2(
    ralph: RunCli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)  # as if the extra were not installed
    monkeypatch.setitem(sys.modules, "mcp.server.fastmcp", None)
    result = ralph("mcp", cwd=tmp_path)
    assert result.code == 2 and "the MCP SDK is not installed" in result.err
    assert "ralph-reflexion[mcp]" in result.err and "Traceback" not in result.err
