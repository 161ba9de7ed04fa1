"""The released Gemini CLI (`@google/gemini-cli`, the version in ralph/actors/verified.py)
driven by `ralph run --actor gemini` against a loopback fake of the Gemini API
(tests/contract/gemini_api.py): a wrong edit, the failure in the second prompt, the right edit;
ralph's memory tools in every attempt's first model request, and callable; a spent daily
quota; an endpoint the agent cannot reach; with and without ralph's bubblewrap sandbox.

gemini finds the fake through `GOOGLE_GEMINI_BASE_URL` with `GEMINI_API_KEY`; 0.61 then needs
`security.auth.selectedType: "gemini-api-key"` in its settings (else it takes the endpoint for
a "gateway" and exits 41, "Invalid auth method selected."), written in a throwaway HOME.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ralph.sandbox import find
from tests.contract.conftest import released_cli
from tests.contract.gemini_api import (
    GeminiAPI,
    Request,
    Turn,
    call,
    daily_quota_exhausted,
    text,
)

RUN_TIMEOUT = 600  # node starts slowly on a busy 2-core machine; never a measured duration
SAMPLES = Path(__file__).parent / "samples"
WRONG = "    return a * b\n"
RIGHT = "    return a + b\n"
BROKEN = "    return a - b\n"
REFLECTION = {
    "reflection_text": "I changed add() in calc.py to multiply; test_add still fails.",
    "credit_assignment": {"root_cause": "add multiplies", "failure_category": "logic_error"},
    "actionable_insights": ["calc.py:2 return a + b"],
    "lessons_learned": [],
    "confidence": 0.8,
}


@pytest.fixture(scope="module")
def gemini() -> Path:
    return released_cli("gemini")


def sandboxes() -> list[str]:
    return ["none", "bwrap"] if find().works else ["none"]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A tiny committed project whose one test fails: add() subtracts."""
    root = tmp_path / "proj"
    (root / "tests").mkdir(parents=True)
    (root / "calc.py").write_text("def add(a, b):\n" + BROKEN)
    (root / "tests" / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )
    (root / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n')
    for argv in (
        ["git", "init", "-q", "-b", "main"],
        ["git", "add", "-A"],
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start"],
    ):
        subprocess.run(argv, cwd=root, check=True)
    return root


def gemini_home(tmp_path: Path) -> Path:
    """A HOME where gemini uses an API key (what `/auth` writes when the user picks one)."""
    home = tmp_path / "home"
    (home / ".gemini").mkdir(parents=True)
    settings = {"security": {"auth": {"selectedType": "gemini-api-key"}}}
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    return home


def environment(gemini: Path, home: Path, api: GeminiAPI) -> dict[str, str]:
    path = os.pathsep.join([str(gemini.parent), str(Path(sys.executable).parent), "/usr/bin:/bin"])
    env = {"PATH": path, "HOME": str(home), "LANG": "C.UTF-8", "CI": "true", **api.environ()}
    env["GIT_AUTHOR_NAME"] = env["GIT_COMMITTER_NAME"] = "t"
    env["GIT_AUTHOR_EMAIL"] = env["GIT_COMMITTER_EMAIL"] = "t@t"
    return env


def ralph(project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ralph", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )


def attempts(api: GeminiAPI) -> list[Request]:
    """The first model request of each attempt (not the reflector's, not a tool result's)."""
    return [
        r for r in api.turns if not r.function_responses and "self-reflection step" not in r.text
    ]


class Model:
    """The scripted model: attempt 1 a wrong edit, attempt 2 (the failure in its prompt) the
    right one; a memory tool call first when asked; "Done." after tool results; a JSON
    reflection for the reflector."""

    def __init__(self, project: Path, *, memory_call: bool = False) -> None:
        self.calc = str(project / "calc.py")
        self.memory_call = memory_call
        self.attempt = 0

    def __call__(self, request: Request) -> Turn:
        if "self-reflection step" in request.text:
            return Turn([text(json.dumps(REFLECTION))])
        if request.function_responses:
            names = [r.get("name") for r in request.function_responses]
            if self.memory_call and any(str(n).startswith("mcp_") for n in names):
                return self.edit()
            return Turn([text("Done.")])
        self.attempt += 1
        if self.memory_call:
            memory = next(n for n in request.tool_names if n.endswith("search_reflections"))
            return Turn([call(memory, query="add")])
        return self.edit()

    def edit(self) -> Turn:
        new = WRONG if self.attempt == 1 else RIGHT
        edit = call(
            "replace",
            file_path=self.calc,
            instruction="fix add",
            old_string=BROKEN if self.attempt == 1 else WRONG,
            new_string=new,
        )
        return Turn([text(f"Attempt {self.attempt}: editing calc.py."), edit])


@pytest.fixture
def api() -> Iterator[GeminiAPI]:
    with GeminiAPI() as server:
        yield server


def run_loop(
    project: Path, env: dict[str, str], sandbox: str, *more: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    done = ralph(
        project, env, "run", "make test_add pass", "--actor", "gemini", "--json",
        "--sandbox", sandbox, "-n", "3", "--iteration-timeout", "5m",
        "--test", f"{sys.executable} -m pytest -q -p no:cacheprovider", *more,
    )  # fmt: skip
    assert done.stdout.strip(), done.stderr
    return done, json.loads(done.stdout)


@pytest.mark.parametrize("sandbox", sandboxes())
def test_a_wrong_edit_then_the_failure_in_the_prompt_then_the_right_edit(
    gemini: Path, project: Path, tmp_path: Path, api: GeminiAPI, sandbox: str
) -> None:
    api.responder = Model(project)
    env = environment(gemini, gemini_home(tmp_path), api)
    done, result = run_loop(project, env, sandbox, "--no-memory-tools")
    assert done.returncode == 0, done.stderr[-3000:]
    assert result["iterations"] == 2 and result["stop_reason"] == "success"
    first, second = attempts(api)
    assert "assert" not in first.text.split("# Task", 1)[-1].split("# How your work", 1)[0]
    assert "test_add" in second.text and "assert 6 == 5" in second.text  # the failure
    assert {"replace", "write_file", "read_file"} <= set(first.tool_names)
    loop = result["loop_id"]
    trace = ralph(project, env, "trace", loop, "1", "--json")
    assert trace.returncode == 0, trace.stderr
    steps = json.loads(trace.stdout)["steps"]
    edits = [s for s in steps if s.get("tool") == "replace"]
    assert edits and edits[0].get("ok") is not False, steps
    record = json.loads((project / ".aiwg/ralph/reflections" / loop / "001.json").read_text())
    usage = record["ralph"]["usage"]
    assert usage["actor_tokens_in"] >= 2 * 1200 and usage["actor_tokens_out"] >= 2 * 40


@pytest.mark.parametrize("sandbox", sandboxes())
def test_the_memory_tools_are_in_every_attempts_first_request_and_callable(
    gemini: Path, project: Path, tmp_path: Path, api: GeminiAPI, sandbox: str
) -> None:
    api.responder = Model(project, memory_call=True)
    env = environment(gemini, gemini_home(tmp_path), api)
    done, _ = run_loop(project, env, sandbox, "--memory-tools")
    assert done.returncode == 0, done.stderr[-3000:]
    firsts = attempts(api)
    assert len(firsts) == 2
    for first in firsts:
        memory = [n for n in first.tool_names if "search_reflections" in n]
        assert memory, first.tool_names
    answers = [
        r["response"]
        for request in api.turns
        for r in request.function_responses
        if "search_reflections" in str(r.get("name"))
    ]
    assert len(answers) == 2 and all("error" not in a for a in answers), answers
    assert "Skipping" not in done.stderr  # no settings file gemini refused


def test_a_spent_daily_quota_is_what_gemini_prints_and_exits_with(
    gemini: Path, project: Path, tmp_path: Path, api: GeminiAPI
) -> None:
    """The released CLI's own words and exit code for a spent daily quota, in stream-json (what
    ralph reads) and in text mode: kept in samples/ for the usage-limit recognizer."""
    api.responder = lambda request: daily_quota_exhausted(request.model)
    env = environment(gemini, gemini_home(tmp_path), api)
    env["GEMINI_CLI_TRUST_WORKSPACE"] = "true"
    said = subprocess.run(
        [str(gemini), "--output-format", "stream-json", "--approval-mode", "auto_edit"],
        input="fix calc.py", cwd=project, env=env, capture_output=True, text=True,
        timeout=RUN_TIMEOUT, check=False,
    )  # fmt: skip
    assert said.returncode == 173  # 429 & 0xFF: gemini exits with the HTTP status
    (result,) = [json.loads(x) for x in said.stdout.splitlines() if '"type":"result"' in x]
    sample = (SAMPLES / "gemini-daily-quota-stream-json.txt").read_text()
    expected = next(json.loads(x) for x in sample.splitlines() if '"type":"result"' in x)
    assert result["status"] == "error" and result["error"] == expected["error"]
    assert "You have exhausted your daily quota on this model." in result["error"]["message"]
    assert "TerminalQuotaError: You have exhausted your daily quota on this model." in said.stderr


def closed_port() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


@pytest.mark.parametrize("sandbox", ["none", *(["bwrap"] if find().works else [])])
def test_a_model_gemini_cannot_reach_pauses_the_loop_with_the_clis_own_line(
    gemini: Path, project: Path, tmp_path: Path, api: GeminiAPI, sandbox: str
) -> None:
    """Before: the attempt ran out its wall timeout ("actor stopped at its wall timeout"), as
    gemini retries a refused connection with backoff for minutes."""
    env = environment(gemini, gemini_home(tmp_path), api)
    if sandbox == "none":
        env["GOOGLE_GEMINI_BASE_URL"] = closed_port()
    network = "checks" if sandbox == "bwrap" else "actor"  # the agent's network cut
    done = ralph(
        project, env, "run", "make test_add pass", "--actor", "gemini", "--no-memory-tools",
        "--sandbox", sandbox, "--sandbox-network", network, "--iteration-timeout", "20m",
        "--test", f"{sys.executable} -m pytest -q -p no:cacheprovider",
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    said = done.stdout + done.stderr
    assert (
        "gemini cannot reach its model: Attempt 1 failed. Retrying with backoff... Error: "
        "exception TypeError: fetch failed sending request"
    ) in said
    assert "wall timeout" not in said and not api.turns
    if sandbox == "bwrap":
        assert "--sandbox-network actor" in said
