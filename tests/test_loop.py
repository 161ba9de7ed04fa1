"""`ralph run` end to end: a real git repository, real pytest, fake actors and a fake provider.

The loop's logic (stops, rollback, the window, resume, abort) is tested in process, over fakes,
in test_loop_runner.py; these runs check what only a whole run shows: the reflection reaching
the next prompt through a real provider and pytest, commits on the loop branch, the CLI's
output in CI, a hung agent killed with its process group, Ctrl-C and resume.

The actor is a small script run through `cmd:`; it plays a per-iteration plan, optionally only
when given text is in its prompt, and keeps a copy of every prompt it received outside the
repository so tests can read what ralph told it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ralph import schemas
from ralph.memory.store import MemoryStore

from .conftest import RunCli
from .fakes.calc_project import git, make_calc_repo
from .fakes.processes import alive
from .fakes.provider_server import FakeProvider

ACTOR = r"""
import json, os, sys, time
from pathlib import Path
iteration = os.environ["RALPH_ITERATION"]
prompt = Path(os.environ["RALPH_PROMPT_FILE"]).read_text()
stdin = sys.stdin.read()
assert stdin == prompt, "the prompt on stdin differs from RALPH_PROMPT_FILE"
seen = Path(os.environ["SEEN_DIR"])
(seen / f"prompt-{iteration}.md").write_text(prompt)
(seen / f"calc-before-{iteration}.py").write_text(Path("calc.py").read_text())
(seen / f"pid-{iteration}").write_text(str(os.getpid()))
plan = json.loads(Path(os.environ["PLAN"]).read_text())
step = plan.get(iteration) or plan.get("default") or {}
if step.get("needs") and not all(text in prompt for text in step["needs"]):
    step = step.get("else", {})
for path, text in step.get("write", {}).items():
    Path(path).write_text(text)
if step.get("hang"):
    print("thinking...", flush=True)
    time.sleep(600)
print(step.get("say", "done"))
"""

VERSIONS = {
    "zero": "def f(x: int) -> int:\n    return 0\n",
    "half": "def f(x: int) -> int:\n    return x if x < 3 else 0\n",
    "partial": "def f(x: int) -> int:\n    return x\n",
    "full": "def f(x: int) -> int:\n    return abs(x)\n",
}
TESTS = """\
from calc import f


def test_one() -> None:
    assert f(1) == 1


def test_two() -> None:
    assert f(2) == 2


def test_three() -> None:
    assert f(3) == 3


def test_negative() -> None:
    assert f(-1) == 1, "negative inputs must give their absolute value"
"""


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git repository whose single test check scores 0, 0.5, 0.75 or 1 by calc.py's version."""
    root = make_calc_repo(
        tmp_path / "repo", calc=VERSIONS["zero"], tests=TESTS, monkeypatch=monkeypatch
    )
    tools = tmp_path / "tools"
    (tools / "seen").mkdir(parents=True)
    (tools / "actor.py").write_text(ACTOR)
    monkeypatch.setenv("SEEN_DIR", str(tools / "seen"))
    monkeypatch.setenv("PLAN", str(tools / "plan.json"))
    monkeypatch.setenv("CI", "true")
    return root


def plan(repo: Path, steps: dict[str, Any]) -> None:
    """What the fake actor does per iteration ("1", "2", ... or "default")."""
    Path(os.environ["PLAN"]).write_text(json.dumps(steps))


def seen(name: str) -> str:
    return (Path(os.environ["SEEN_DIR"]) / name).read_text()


def write(version: str) -> dict[str, Any]:
    return {"write": {"calc.py": VERSIONS[version]}}


def run_args(*extra: str) -> list[str]:
    actor = f"cmd:{sys.executable} {Path(os.environ['PLAN']).parent / 'actor.py'}"
    test = f"{sys.executable} -m pytest -q -p no:cacheprovider tests"
    return ["run", "make f pass its tests", "--actor", actor, "--test", test, "--json", *extra]


def assert_every_record_valid(repo: Path) -> list[dict[str, Any]]:
    store = MemoryStore(repo)
    records = []
    for loop_id in store.loop_ids():
        for _, path in store.record_paths(loop_id):
            data = json.loads(path.read_text())
            assert schemas.errors(schemas.RECORD, data) == [], path
            records.append(data)
    return records


REFLECTION = {
    "reflection_text": "I returned x unchanged, so f(-1) gives -1: calc.py ignores the sign. "
    "MARKER-reflection-text",
    "credit_assignment": {
        "failing_action_indices": [0],
        "root_cause": "calc.py returns x instead of its absolute value",
        "failure_category": "edge_case_miss",
    },
    "causal_reasoning": "test_negative feeds -1 and expects 1.",
    "actionable_insights": ["Return abs(x) in calc.py:2 MARKER-insight"],
    "lessons_learned": ["Check negative inputs"],
    "confidence": 0.9,
}


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProvider]:
    with FakeProvider(default_text=json.dumps(REFLECTION)) as fake:
        for name, value in fake.environ().items():
            monkeypatch.setenv(name, value)
        yield fake


def test_success_at_iteration_two_because_the_reflection_reached_the_prompt(
    ralph: RunCli, repo: Path, provider: FakeProvider
) -> None:
    plan(
        repo,
        {
            "1": write("partial"),
            "2": {
                **write("full"),
                "needs": ["MARKER-reflection-text", "MARKER-insight"],
                "else": write("partial"),
            },
        },
    )
    result = ralph(*run_args("--reflector", "openai:gpt-4o-mini"), cwd=repo)
    assert result.code == 0, result.err
    summary = json.loads(result.out)
    assert summary["status"] == "completed" and summary["stop_reason"] == "success"
    assert summary["iterations"] == 2 and summary["reward_history"] == [0.75, 1.0]
    second = seen("prompt-2.md")
    assert REFLECTION["reflection_text"] in second
    assert REFLECTION["actionable_insights"][0] in second
    assert "MARKER" not in seen("prompt-1.md")
    records = assert_every_record_valid(repo)
    assert [r["ralph"]["reflection_source"] for r in records] == ["llm", "success"]
    assert records[1]["memory_metadata"]["reflections_in_context"] == [1]
    assert provider.requests and "test_negative" in provider.requests[0].prompt
    branch = summary["branch"]
    assert branch == f"ralph/{summary['loop_id'].removeprefix('ralph-')}"
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == branch
    log = git(repo, "log", "--format=%s", "main..HEAD").splitlines()
    assert log[0] == f"ralph({summary['loop_id'][-8:]}): iteration 2 — tests pass"
    assert ".aiwg" not in git(repo, "show", "--stat", "--format=", "HEAD")


def test_bad_window_policy_is_a_usage_error(ralph: RunCli, repo: Path) -> None:
    result = ralph(*run_args("--window-policy", "lifo"), cwd=repo)
    assert result.code == 2
    assert "lifo" in result.err and "Traceback" not in result.err


def test_dirty_tree_is_refused(ralph: RunCli, repo: Path) -> None:
    (repo / "calc.py").write_text("# my uncommitted work\n")
    result = ralph(*run_args(), cwd=repo)
    assert result.code == 2
    assert "calc.py" in result.err and "--allow-dirty" in result.err
    assert "baseline" not in result.err  # refused before any check ran
    assert (repo / "calc.py").read_text() == "# my uncommitted work\n"


def test_ci_gets_one_json_object_and_the_step_summary(
    ralph: RunCli, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--json and --quiet from the environment: exactly one JSON object on stdout, nothing on
    stderr; the GitHub step summary is written all the same."""
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("RALPH_JSON", "true")
    monkeypatch.setenv("RALPH_QUIET", "1")
    plan(repo, {"1": write("partial"), "2": write("full")})
    args = [a for a in run_args("--reflector", "heuristic") if a != "--json"]
    result = ralph(*args, cwd=repo)
    assert result.code == 0, result.err
    assert json.loads(result.out)["stop_reason"] == "success"
    assert result.err == ""
    text = summary.read_text()
    assert "| 1 | 0.75 |" in text and "| 2 | 1.00 |" in text


def _start(repo: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "ralph", *run_args("--reflector", "heuristic", *extra)],
        cwd=repo,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(path: Path, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_ctrl_c_pauses_and_resume_finishes(ralph: RunCli, repo: Path) -> None:
    plan(repo, {"1": write("partial"), "2": {"hang": True, "write": {"calc.py": "broken("}}})
    proc = _start(repo)
    _wait_for(Path(os.environ["SEEN_DIR"]) / "pid-2")
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    summary = json.loads(out)
    assert summary["status"] == "paused" and summary["iterations"] == 1
    assert not alive(int(seen("pid-2")))
    status = json.loads(ralph("status", summary["loop_id"], "--json", cwd=repo).out)
    assert status["status"] == "paused"
    plan(repo, {"2": write("full")})
    resumed = ralph("resume", "--json", cwd=repo)
    assert resumed.code == 0, resumed.err
    assert json.loads(resumed.out)["reward_history"] == [0.75, 1.0]
    assert seen("calc-before-2.py") == VERSIONS["partial"]  # leftovers rescued, not kept
    assert "# Checks that fail right now" in seen("prompt-2.md")  # re-evaluated on resume
    refs = git(repo, "for-each-ref", "--format=%(refname)", "refs/ralph/rescue")
    assert refs.endswith(f"{summary['loop_id']}/2")
    assert_every_record_valid(repo)
