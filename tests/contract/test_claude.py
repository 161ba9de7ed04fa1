"""The released Claude Code CLI (ralph/actors/verified.py) driven by ralph against a loopback
Messages API (anthropic_api.py) that scripts the model's turns: a wrong edit, then the right one
once the failure is in the prompt; ralph's memory tools present from each attempt's first model
request and answering for real; the Stop hook that blocks claude until the checks pass; a plan
limit and a model out of reach, as claude reports them. Each loop runs with and without the
sandbox."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ralph import sandbox
from tests.contract.anthropic_api import (
    FakeAnthropic,
    Limit,
    Request,
    Text,
    ToolUse,
    Turn,
)
from tests.contract.conftest import released_cli

SAMPLES = Path(__file__).parent / "samples"
CHECK = f"{sys.executable} -m pytest -q -p no:cacheprovider tests"
TESTS = (
    "from calc import f\n\n\ndef test_negative():\n    assert f(-2) == 2\n\n\n"
    "def test_positive():\n    assert f(3) == 3\n"
)
FIXED = "def f(x):\n    return abs(x)\n"
WRONG_FAILURE = "-3 == 3"  # what the wrong edit (return -x) breaks: in prompt 2
MEMORY_TOOLS = {f"mcp__ralph__{t}" for t in ("search_reflections", "lessons_for", "get_reflection")}
MEMORY_TOOLS.add("mcp__ralph__list_loops")
TIMEOUT = 600


@pytest.fixture
def claude() -> Path:
    return released_cli("claude")


def make_project(root: Path, env: dict[str, str]) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "calc.py").write_text("def f(x):\n    return x\n")
    (root / "tests" / "test_calc.py").write_text(TESTS)
    (root / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    (root / ".gitignore").write_text("__pycache__/\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "start"]):
        subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)
    return root


def environment(tmp_path: Path, claude: Path, api: FakeAnthropic) -> dict[str, str]:
    """Only what the run needs: this Python's `ralph` and the released claude on PATH, a HOME
    of its own, the fake's endpoint and key."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    path = os.pathsep.join([str(Path(sys.executable).parent), str(claude.parent), "/usr/bin:/bin"])
    return {
        "PATH": path,
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TZ": "UTC",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        **{f"GIT_{who}_{what}": value for who in ("AUTHOR", "COMMITTER")
           for what, value in (("NAME", "t"), ("EMAIL", "t@example.invalid"))},
        **api.environ(),
    }  # fmt: skip


def ralph(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ralph", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def plan_by_prompt(root: Path) -> Callable[[Request], Turn | Limit | None]:
    """The model: the wrong edit until the prompt shows what it broke, then the right one
    (asking ralph's memory first); each turn picked by the attempt's prompt and how many turns
    the conversation already has, so claude's own retries cannot shift the script."""
    calc = str(root / "calc.py")
    wrong = [
        Turn(Text("Reading calc.py."), ToolUse("Read", {"file_path": calc})),
        Turn(ToolUse("Edit", {"file_path": calc, "old_string": "n x", "new_string": "n -x"})),
        Turn(Text("Negated x."), tokens_in=120, tokens_out=30),
    ]  # fmt: skip
    right = [
        Turn(
            Text("The test failed; asking the memory."),
            ToolUse("mcp__ralph__search_reflections", {"query": "assert f 3"}),
            ToolUse("Read", {"file_path": calc}),
        ),
        Turn(ToolUse("Write", {"file_path": calc, "content": FIXED})),
        Turn(Text("Used abs(x)."), tokens_in=140, tokens_out=40),
    ]

    def answer(request: Request) -> Turn | None:
        plan = right if WRONG_FAILURE in request.user_text else wrong
        turns = sum(1 for m in request.messages if m.get("role") == "assistant")
        return plan[turns] if turns < len(plan) else Turn(Text("Done."))

    return answer


def sandbox_modes() -> list[Any]:
    bwrap = pytest.mark.skipif(not sandbox.find().works, reason="bubblewrap cannot run here")
    return [pytest.param("bwrap", marks=bwrap), "none"]


@pytest.mark.parametrize("mode", sandbox_modes())
def test_a_wrong_edit_then_the_right_one_with_memory_tools_from_the_first_request(
    claude: Path, tmp_path: Path, mode: str
) -> None:
    root = tmp_path / "repo"
    with FakeAnthropic() as api:
        env = environment(tmp_path, claude, api)
        # a user's own claude setting, seen at the API: kept in the sandbox
        env["ANTHROPIC_CUSTOM_HEADERS"] = "x-ralph-contract: kept"
        make_project(root, env)
        api.responder = plan_by_prompt(root)
        task = "make f return the absolute value"
        done = ralph(
            "run", task, "--actor", "claude", "--test", CHECK, "--reflector", "heuristic",
            "-n", "3", "--sandbox", mode, "--json", cwd=root, env=env,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        result = json.loads(done.stdout)
        assert (result["stop_reason"], result["iterations"]) == ("success", 2), result
        attempts = api.attempts()
        requests = api.requests

    assert [len(a) for a in attempts] == [3, 3], api.paths
    first, second = attempts
    # the prompts: the task in the first, what the wrong edit broke in the second
    assert task in first[0].user_text and WRONG_FAILURE not in first[0].user_text
    assert WRONG_FAILURE in second[0].user_text
    # claude's real tools, as its requests declare them
    tools = first[0]
    assert {"Read", "Edit", "Write", "Bash"} <= set(tools.tool_names)
    assert set(tools.tool("Edit")["input_schema"]["required"]) == {
        "file_path", "old_string", "new_string"
    }  # fmt: skip
    assert set(tools.tool("Write")["input_schema"]["required"]) == {"file_path", "content"}
    assert "command" in tools.tool("Bash")["input_schema"]["required"]
    # ralph's memory tools in the FIRST model request of every attempt
    for attempt in attempts:
        assert set(attempt[0].tool_names) >= MEMORY_TOOLS, attempt[0].tool_names
    # the memory tool's result is real: iteration 1's reflection, found by its failure
    (answer,) = [r for r in second[1].tool_results if r["tool_use_id"].endswith("_1")]
    assert not answer.get("is_error"), answer
    found = json.loads(second[1].result_text(answer))
    assert found["results"] and found["results"][0]["iteration"] == 1, found
    # the Edit's and the Write's results: claude changed the file
    assert "updated successfully" in first[2].result_text(first[2].tool_results[-1])
    # nothing but the agent's turns: no title-generation or other side request
    posts = [r for r in requests if r.method == "POST"]
    assert all(r.is_agent_turn for r in posts), [r.body.get("model") for r in posts]
    # the user's claude setting reached the API through the sandbox
    assert all(r.headers.get("x-ralph-contract") == "kept" for r in posts)

    trace = json.loads(ralph("trace", "latest", "2", "--json", cwd=root, env=env).stdout)
    steps = [(s.get("tool"), s.get("kind")) for s in trace["steps"]]
    assert steps == [
        ("mcp__ralph__search_reflections", "other"),
        ("Read", "read"),
        ("Write", "edit"),
        (None, None),  # the closing text: a thought without an action
    ], steps
    assert trace["steps"][0]["thought"] == "The test failed; asking the memory."
    assert trace["steps"][0]["ok"] is True and trace["steps"][0]["tokens_in"] == 100
    records = sorted((root / ".aiwg" / "ralph" / "reflections").glob("*/00*.json"))
    usage = [json.loads(p.read_text())["ralph"]["usage"] for p in records]
    # claude's result event: the input of the attempt's three requests, their output
    assert [(u["actor_tokens_in"], u["actor_tokens_out"]) for u in usage] == [
        (320, 70),
        (340, 80),
    ]


def test_the_stop_hook_keeps_claude_working_until_the_checks_pass(
    claude: Path, tmp_path: Path
) -> None:
    root = tmp_path / "repo"
    calc = str(root / "calc.py")
    with FakeAnthropic() as api:
        env = environment(tmp_path, claude, api)
        make_project(root, env)
        config = root / ".aiwg" / "ralph" / "config.yaml"
        config.parent.mkdir(parents=True)
        config.write_text(f"checks:\n  - {{name: tests, command: '{CHECK}', parser: pytest}}\n")
        installed = ralph("hook", "install", "claude", cwd=root, env=env)
        assert installed.returncode == 0, installed.stderr

        def model(request: Request) -> Turn:
            blocked = "test_calc.py" in request.user_text and "Stop hook" in request.user_text
            if not blocked:
                return Turn(Text("All done, nothing to change."))  # a premature stop
            fix = [
                Turn(ToolUse("Read", {"file_path": calc})),
                Turn(ToolUse("Write", {"file_path": calc, "content": FIXED})),
            ]
            done = sum(1 for b in request.blocks("user") if b.get("type") == "tool_result")
            return fix[done] if done < len(fix) else Turn(Text("Fixed with abs()."))

        api.responder = model
        ran = subprocess.run(
            [str(claude), "-p", "--output-format", "stream-json", "--verbose",
             "--permission-mode", "acceptEdits"],
            input="make f return the absolute value", cwd=root, env=env,
            capture_output=True, text=True, timeout=TIMEOUT, check=False,
        )  # fmt: skip
        turns = api.agent_requests
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    assert (root / "calc.py").read_text() == "def f(x):\n    return abs(x)\n"
    # stopped once with the test failing: blocked, the failing test in what claude sent next
    assert "Stop hook" not in turns[0].user_text
    blocked = turns[1].user_text
    assert "test_calc.py" in blocked and "assert -2 == 2" in blocked, blocked[-1500:]
    # blocked once (the fix: Read, Write, a closing text), then let through: no fifth request
    assert len(turns) == 4, [t.user_text[-300:] for t in turns]
    events = [json.loads(line) for line in ran.stdout.splitlines() if line.startswith("{")]
    assert events[-1]["type"] == "result" and events[-1]["result"] == "Fixed with abs()."


def session_limit(reset: int) -> Limit:
    """A subscription's 5-hour limit, as Anthropic refuses a request over it."""
    return Limit(
        message="This request would exceed your account's rate limit. Please try again later.",
        headers={
            "anthropic-ratelimit-unified-status": "rejected",
            "anthropic-ratelimit-unified-reset": str(reset),
            "anthropic-ratelimit-unified-representative-claim": "five_hour",
        },
    )


def test_a_plan_limit_as_the_released_cli_reports_it(claude: Path, tmp_path: Path) -> None:
    reset = int(time.time()) + 3 * 3600
    with FakeAnthropic(lambda request: session_limit(reset)) as api:
        env = environment(tmp_path, claude, api)
        # a subscription login (claude reads plan limits only then), not an API key
        env.update({"CLAUDE_CODE_OAUTH_TOKEN": "sk-ant-oat01-fake", "ANTHROPIC_API_KEY": ""})
        ran = subprocess.run(
            [str(claude), "-p", "--output-format", "stream-json", "--verbose"],
            input="hi", cwd=tmp_path, env=env, capture_output=True, text=True,
            timeout=TIMEOUT, check=False,
        )  # fmt: skip
    assert ran.returncode == 1
    events = [json.loads(line) for line in ran.stdout.splitlines() if line.startswith("{")]
    (limit,) = [e for e in events if e["type"] == "rate_limit_event"]
    assert limit["rate_limit_info"] == {
        "status": "rejected",
        "resetsAt": reset,
        "rateLimitType": "five_hour",
        "isUsingOverage": False,
    }
    result = events[-1]
    assert result["type"] == "result" and result["is_error"] is True
    assert result["api_error_status"] == 429
    assert result["result"].startswith("You've hit your session limit · resets ")
    assert result["result"].endswith("(UTC)")
    # the samples another part of ralph is tested on have the same shape
    sample = [
        json.loads(line)
        for line in (SAMPLES / "claude-session-limit.stream-json.txt").read_text().splitlines()
    ]
    assert [e["type"] for e in sample] == [e["type"] for e in events]


def test_a_model_out_of_reach_is_named_with_claudes_own_line(claude: Path, tmp_path: Path) -> None:
    root = tmp_path / "repo"
    with FakeAnthropic() as api:
        env = environment(tmp_path, claude, api)
        make_project(root, env)
    # the fake is closed: nothing listens at ANTHROPIC_BASE_URL any more
    env["CLAUDE_CODE_MAX_RETRIES"] = "1"
    done = ralph(
        "run", "make f return the absolute value", "--actor", "claude", "--test", CHECK,
        "--reflector", "heuristic", "-n", "1", "--sandbox", "none", cwd=root, env=env,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-2000:]
    line = "claude could not reach its model: API Error: Unable to connect to API"
    assert line in done.stderr, done.stderr[-2000:]
    assert "wall timeout" not in done.stderr
