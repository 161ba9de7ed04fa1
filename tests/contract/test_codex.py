"""The released Codex CLI (ralph/actors/verified.py) driven by ralph against a loopback Responses
API (openai_responses_api.py) that scripts the model's turns: a wrong edit, then the right one
once the failure is in the prompt; ralph's memory tools present from each attempt's first model
request, approved and answering for real; the user's OPENAI_BASE_URL reaching codex; a usage
limit and a model out of reach, as codex reports them. The loop runs with and without ralph's
sandbox (codex's own runs inside it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ralph import sandbox
from tests.contract.conftest import released_cli
from tests.contract.openai_responses_api import (
    Call,
    FakeResponses,
    Limit,
    Patch,
    Request,
    Say,
    Shell,
    Turn,
)

SAMPLES = Path(__file__).parent / "samples"
CHECK = f"{sys.executable} -m pytest -q -p no:cacheprovider tests"
TESTS = (
    "from calc import f\n\n\ndef test_negative():\n    assert f(-2) == 2\n\n\n"
    "def test_positive():\n    assert f(3) == 3\n"
)
WRONG_FAILURE = "-3 == 3"  # what the wrong edit (return -x) breaks: in prompt 2
MEMORY_TOOLS = {"search_reflections", "lessons_for", "get_reflection", "list_loops"}
TIMEOUT = 600


@pytest.fixture
def codex() -> Path:
    return released_cli("codex")


def make_project(root: Path, env: dict[str, str]) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "calc.py").write_text("def f(x):\n    return x\n")
    (root / "tests" / "test_calc.py").write_text(TESTS)
    (root / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    (root / ".gitignore").write_text("__pycache__/\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "start"]):
        subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)
    return root


def environment(tmp_path: Path, codex: Path, api: FakeResponses) -> dict[str, str]:
    """Only what the run needs: this Python's `ralph` and the released codex on PATH, a HOME
    of its own with codex's configuration in ~/.codex, the fake's key. TMPDIR is not above
    ~/.codex: codex refuses to make its helper links under its temporary folder."""
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True, exist_ok=True)
    (home / ".codex" / "config.toml").write_text(f'model = "{api.model}"\n')
    scratch = tmp_path / "tmp"
    scratch.mkdir(exist_ok=True)
    path = os.pathsep.join([str(Path(sys.executable).parent), str(codex.parent), "/usr/bin:/bin"])
    return {
        "PATH": path,
        "HOME": str(home),
        "TMPDIR": str(scratch),
        "LANG": "C.UTF-8",
        "TZ": "UTC",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        **{f"GIT_{who}_{what}": value for who in ("AUTHOR", "COMMITTER")
           for what, value in (("NAME", "t"), ("EMAIL", "t@example.invalid"))},
        **api.environ(),
        # the user's endpoint, as they would set it: ralph passes it on to codex's config
        "OPENAI_BASE_URL": api.url,
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


def patch(old: str, new: str) -> Patch:
    return Patch(f"*** Begin Patch\n*** Update File: calc.py\n@@\n-{old}\n+{new}\n*** End Patch\n")


def plan_by_prompt(request: Request) -> Turn | None:
    """The model: the wrong edit until the prompt shows what it broke, then the right one
    (asking ralph's memory first); each turn picked by the attempt's prompt and how many tool
    results the conversation already has, so codex's own retries cannot shift the script."""
    wrong = [
        Turn(Shell("cat calc.py")),
        Turn(patch("    return x", "    return -x")),
        Turn(Say("Negated x."), tokens_in=120, tokens_out=30),
    ]
    right = [
        Turn(Call("mcp__ralph__search_reflections", {"query": "assert f 3"})),
        Turn(patch("    return -x", "    return abs(x)")),
        Turn(Say("Used abs(x)."), tokens_in=140, tokens_out=40),
    ]
    plan = right if WRONG_FAILURE in request.user_text else wrong
    done = len(request.outputs)
    return plan[done] if done < len(plan) else Turn(Say("Done."))


def sandbox_modes() -> list[Any]:
    bwrap = pytest.mark.skipif(not sandbox.find().works, reason="bubblewrap cannot run here")
    return [pytest.param("bwrap", marks=bwrap), "none"]


@pytest.mark.parametrize("mode", sandbox_modes())
def test_a_wrong_edit_then_the_right_one_with_memory_tools_from_the_first_request(
    codex: Path, tmp_path: Path, mode: str
) -> None:
    root = tmp_path / "repo"
    with FakeResponses(plan_by_prompt) as api:
        env = environment(tmp_path, codex, api)
        env["RUST_LOG"] = "warn"  # one of codex's own settings: kept in the sandbox
        make_project(root, env)
        task = "make f return the absolute value"
        done = ralph(
            "run", task, "--actor", "codex", "--test", CHECK, "--reflector", "heuristic",
            "-n", "3", "--sandbox", mode, "--json", cwd=root, env=env,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        result = json.loads(done.stdout)
        assert (result["stop_reason"], result["iterations"]) == ("success", 2), done.stderr[-3000:]
        attempts = api.attempts()
        paths = set(api.paths)

    # all codex asks of the API: a WebSocket (declined: 426), then the Responses stream
    assert paths == {"GET /v1/responses", "POST /v1/responses"}, paths
    # the user's OPENAI_BASE_URL reached codex: every model call came here
    assert [len(a) for a in attempts] == [3, 3], [r.path for a in attempts for r in a]
    first, second = attempts
    # the prompts: the task in the first, what the wrong edit broke in the second
    assert task in first[0].user_text and WRONG_FAILURE not in first[0].user_text
    assert WRONG_FAILURE in second[0].user_text
    # codex's real tools, as its requests declare them
    command = first[0].tool("exec_command")
    assert command is not None and command["parameters"]["required"] == ["cmd"]
    # every command and edit worked: under ralph's sandbox codex's own bwrap starts
    for attempt in attempts:
        assert not any("bwrap:" in out for out in attempt[-1].outputs), attempt[-1].outputs
    assert "Process exited with code 0" in first[1].outputs[0], first[1].outputs
    assert "Success. Updated the following files" in first[2].outputs[1], first[2].outputs
    # ralph's four memory tools, and no other of its server's, in the FIRST request of each
    for attempt in attempts:
        offered = {t["name"] for t in attempt[0].tools if t["qualified"].startswith("mcp__ralph.")}
        assert offered == MEMORY_TOOLS, attempt[0].flat_tool_names
    # the memory tool's answer is real (approved, not "requires approval"): iteration 1's record
    answer = second[1].outputs[0]  # "Wall time: ...\nOutput:\n" and the tool's JSON
    found = json.loads(answer[answer.index("{") :])
    assert found["results"] and found["results"][0]["iteration"] == 1, found
    assert (root / "calc.py").read_text() == "def f(x):\n    return abs(x)\n"

    trace = json.loads(ralph("trace", "latest", "2", "--json", cwd=root, env=env).stdout)
    steps = [(s.get("tool"), s.get("kind")) for s in trace["steps"]]
    assert steps == [
        ("mcp:ralph/search_reflections", "other"),
        ("file_change", "edit"),
        (None, None),  # the closing message: a thought without an action
    ], steps
    assert trace["steps"][0]["ok"] is True and trace["steps"][1]["files"] == [str(root / "calc.py")]
    records = sorted((root / ".aiwg" / "ralph" / "reflections").glob("*/00*.json"))
    usage = [json.loads(p.read_text())["ralph"]["usage"] for p in records]
    # turn.completed: the input and output of the attempt's three responses
    assert [(u["actor_tokens_in"], u["actor_tokens_out"]) for u in usage] == [
        (320, 70),
        (340, 80),
    ]


def codex_exec(codex: Path, tmp_path: Path, api: FakeResponses) -> subprocess.CompletedProcess[str]:
    """One `codex exec --json` as the preset runs it, the user's config pointing at the fake."""
    env = environment(tmp_path, codex, api)
    root = tmp_path / "repo"
    root.mkdir(exist_ok=True)
    (Path(env["HOME"]) / ".codex" / "config.toml").write_text(api.config_toml())
    return subprocess.run(
        [str(codex), "exec", "--json", "--sandbox", "workspace-write", "--skip-git-repo-check",
         "-c", "features.unbounded_connection_retries=false", "-"],
        input="say hi", cwd=root, env={**env, "OPENAI_BASE_URL": ""}, capture_output=True,
        text=True, timeout=TIMEOUT, check=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("name", "limit", "said"),
    [
        ("usage-limit-days", Limit(), "try again at "),
        ("usage-limit-hour", Limit(resets_in_seconds=3600), "try again at "),
        ("usage-limit-no-reset", Limit(resets_in_seconds=None), "try again later."),
        ("usage-not-included", Limit(error_type="usage_not_included"), "upgrade to Plus"),
    ],
)
def test_a_usage_limit_as_codex_prints_it(
    codex: Path, tmp_path: Path, name: str, limit: Limit, said: str
) -> None:
    """The samples under samples/codex-*.txt, for the limit recognizer: exec --json's events
    (the first, `thread.started`, carries a fresh id) and codex's exit code, 1."""
    with FakeResponses() as api:
        api.script(*[limit] * 8)
        done = codex_exec(codex, tmp_path, api)
        calls = len(api.model_requests)
    assert done.returncode == 1, done.stdout
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    failed = [e for e in events if e["type"] == "turn.failed"]
    assert len(failed) == 1 and said in failed[0]["error"]["message"], events
    assert calls == 1  # a limit is not retried
    sample = SAMPLES / f"codex-{name}.txt"
    if os.environ.get("WRITE_CONTRACT_SAMPLES"):
        sample.write_text(done.stdout)
    assert sample.is_file()
    kept = [json.loads(line)["type"] for line in sample.read_text().splitlines()]
    assert kept == [e["type"] for e in events]


def test_a_model_out_of_reach_is_named_with_codex_own_line(codex: Path, tmp_path: Path) -> None:
    """No server at the endpoint: codex gives up after its retries (not the wall timeout) and
    the record names the model out of reach with codex's own line."""
    root = tmp_path / "repo"
    with FakeResponses() as api:
        env = environment(tmp_path, codex, api)
    env["OPENAI_BASE_URL"] = api.url  # closed: nothing listens there any more
    make_project(root, env)
    done = ralph(
        "run", "make f return the absolute value", "--actor", "codex", "--test", CHECK,
        "--reflector", "heuristic", "-n", "1", "--sandbox", "none",
        cwd=root, env=env,
    )  # fmt: skip
    assert done.returncode != 0
    said = done.stderr
    assert "iteration 1: codex could not reach its model: Connection failed" in said, said[-3000:]
    assert "timeout" not in said, said[-3000:]
