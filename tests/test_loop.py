"""`ralph run` end to end: a real git repository, real pytest, fake actors and a fake provider.

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
    branch = f"ralph/{summary['loop_id']}"
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == branch
    log = git(repo, "log", "--format=%s", "main..HEAD").splitlines()
    assert log[0] == f"ralph: {summary['loop_id']} iteration 2 reward 1.00"
    assert ".aiwg" not in git(repo, "show", "--stat", "--format=", "HEAD")


def test_max_iterations_exit_1(ralph: RunCli, repo: Path) -> None:
    plan(repo, {"1": write("half"), "2": write("partial")})
    result = ralph(*run_args("--reflector", "heuristic", "--max-iterations", "2"), cwd=repo)
    assert result.code == 1
    summary = json.loads(result.out)
    assert summary["stop_reason"] == "limit" and summary["status"] == "failed"
    assert summary["reward_history"] == [0.5, 0.75]
    assert summary["best_iteration"] == 2
    assert_every_record_valid(repo)


def test_the_first_prompt_names_what_the_baseline_found_failing(ralph: RunCli, repo: Path) -> None:
    plan(repo, {"1": write("full")})
    assert ralph(*run_args("--reflector", "heuristic"), cwd=repo).code == 0
    first = seen("prompt-1.md")
    assert "# Checks that fail right now" in first
    assert "tests/test_calc.py:" in first and "test_negative" in first
    assert "negative inputs must give their absolute value" in first


def test_a_check_that_cannot_run_at_baseline_is_named_but_not_refused(
    ralph: RunCli, repo: Path
) -> None:
    plan(repo, {"1": write("full")})
    args = run_args("--reflector", "heuristic", "--check", "sh -c 'exit 127'")
    result = ralph(*args, "--max-iterations", "1", cwd=repo)
    assert result.code == 1  # the broken check never passes; the loop still ran its attempt
    warning = next(line for line in result.err.splitlines() if "warning:" in line)
    assert "check 'sh' could not run on the untouched tree" in warning
    assert "exit code 127" in warning and "ralph check" in warning


def test_json_and_quiet_come_from_the_environment_too(
    ralph: RunCli, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan(repo, {"1": write("full")})
    monkeypatch.setenv("RALPH_JSON", "true")
    monkeypatch.setenv("RALPH_QUIET", "1")
    args = [a for a in run_args("--reflector", "heuristic") if a != "--json"]
    result = ralph(*args, cwd=repo)
    assert result.code == 0, result.err
    assert json.loads(result.out)["stop_reason"] == "success"  # exactly one JSON object
    assert result.err == ""


def test_window_policy_and_memory_tokens_reach_the_records(ralph: RunCli, repo: Path) -> None:
    plan(repo, {"1": write("half"), "2": write("partial")})
    args = run_args("--reflector", "heuristic", "--max-iterations", "2")
    result = ralph(*args, "--window-policy", "fifo", "--memory-tokens", "300", cwd=repo)
    assert result.code == 1, result.err
    second = assert_every_record_valid(repo)[1]
    assert second["memory_metadata"]["window_policy"] == "fifo"
    assert second["memory_metadata"]["reflections_in_context"] == [1]
    state = MemoryStore(repo).read_state(json.loads(result.out)["loop_id"])
    assert state.settings.memory_tokens == 300


def test_bad_window_policy_is_a_usage_error(ralph: RunCli, repo: Path) -> None:
    result = ralph(*run_args("--window-policy", "lifo"), cwd=repo)
    assert result.code == 2
    assert "lifo" in result.err and "Traceback" not in result.err


def test_plateau_pivots_then_stops(ralph: RunCli, repo: Path) -> None:
    plan(repo, {"default": write("partial")})
    args = run_args("--reflector", "heuristic", "--patience", "2", "--max-iterations", "6")
    result = ralph(*args, cwd=repo)
    assert result.code == 1
    summary = json.loads(result.out)
    assert summary["stop_reason"] == "stalled" and summary["iterations"] == 3
    assert "Change your strategy" not in seen("prompt-2.md")
    assert "Change your strategy" in seen("prompt-3.md")


def test_regression_restores_the_best_code(ralph: RunCli, repo: Path) -> None:
    plan(repo, {"1": write("partial"), "2": write("half"), "3": {}})
    result = ralph(*run_args("--reflector", "heuristic", "--max-iterations", "3"), cwd=repo)
    assert result.code == 1
    assert json.loads(result.out)["reward_history"] == [0.75, 0.5, 0.75]
    assert seen("calc-before-3.py") == VERSIONS["partial"]
    assert "restored the code of iteration 1" in result.err


def test_no_rollback_keeps_the_regressed_code(ralph: RunCli, repo: Path) -> None:
    plan(repo, {"1": write("partial"), "2": write("half"), "3": {}})
    args = run_args("--reflector", "heuristic", "--max-iterations", "3", "--no-rollback")
    ralph(*args, cwd=repo)
    assert seen("calc-before-3.py") == VERSIONS["half"]


def test_token_budget_exit_3(ralph: RunCli, repo: Path, provider: FakeProvider) -> None:
    provider.script(kind="answer", text=json.dumps(REFLECTION), tokens_in=900, tokens_out=200)
    plan(repo, {"default": write("partial")})
    args = run_args("--reflector", "openai:gpt-4o-mini", "--max-tokens", "1000")
    result = ralph(*args, cwd=repo)
    assert result.code == 3
    summary = json.loads(result.out)
    assert summary["stop_reason"] == "budget" and summary["iterations"] == 1
    assert summary["usage"]["tokens_in"] == 900


def test_malformed_reflection_is_repaired(
    ralph: RunCli, repo: Path, provider: FakeProvider
) -> None:
    provider.script(kind="answer", text="Sure! Here is my reflection: {not json at all")
    provider.script(kind="answer", text="```json\n" + json.dumps(REFLECTION) + "\n```")
    plan(repo, {"1": write("partial"), "2": write("full")})
    result = ralph(*run_args("--reflector", "openai:gpt-4o-mini"), cwd=repo)
    assert result.code == 0
    first = assert_every_record_valid(repo)[0]
    assert first["ralph"]["reflection_source"] == "repaired"
    assert first["self_reflection"]["reflection_text"] == REFLECTION["reflection_text"]


def test_reflector_failure_falls_back_to_heuristic(
    ralph: RunCli, repo: Path, provider: FakeProvider
) -> None:
    provider.script(status=401, message="invalid api key")
    plan(repo, {"1": write("partial"), "2": write("full")})
    result = ralph(*run_args("--reflector", "openai:gpt-4o-mini"), cwd=repo)
    assert result.code == 0
    first = assert_every_record_valid(repo)[0]
    assert first["ralph"]["reflection_source"] == "heuristic"
    assert (
        "calc.py" in first["self_reflection"]["reflection_text"]
        or "test_calc.py" in (first["self_reflection"]["reflection_text"])
    )
    assert "used a heuristic reflection" in result.err


def test_hung_actor_is_killed_at_idle_timeout(ralph: RunCli, repo: Path) -> None:
    plan(repo, {"1": {"hang": True}, "2": write("full")})
    args = run_args("--reflector", "heuristic", "--idle-timeout", "1")
    result = ralph(*args, cwd=repo)
    assert result.code == 0
    first = assert_every_record_valid(repo)[0]
    assert "idle timeout" in first["notes"]
    assert not alive(int(seen("pid-1")))


def test_dirty_tree_is_refused(ralph: RunCli, repo: Path) -> None:
    (repo / "calc.py").write_text("# my uncommitted work\n")
    result = ralph(*run_args(), cwd=repo)
    assert result.code == 2
    assert "calc.py" in result.err and "--allow-dirty" in result.err
    assert "baseline" not in result.err  # refused before any check ran
    assert (repo / "calc.py").read_text() == "# my uncommitted work\n"


def test_already_green_exits_0_without_calling_the_actor(ralph: RunCli, repo: Path) -> None:
    (repo / "calc.py").write_text(VERSIONS["full"])
    git(repo, "commit", "-qam", "fixed")
    plan(repo, {"default": write("zero")})
    result = ralph(*run_args(), cwd=repo)
    assert result.code == 0
    assert json.loads(result.out)["stop_reason"] == "already_green"
    assert not (Path(os.environ["SEEN_DIR"]) / "prompt-1.md").exists()


def test_github_step_summary(
    ralph: RunCli, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    plan(repo, {"1": write("partial"), "2": write("full")})
    ralph(*run_args("--reflector", "heuristic"), cwd=repo)
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


def test_kill_9_shows_crashed_and_resume_continues(ralph: RunCli, repo: Path) -> None:
    plan(repo, {"1": write("partial"), "2": {"hang": True}})
    proc = _start(repo)
    _wait_for(Path(os.environ["SEEN_DIR"]) / "pid-2")
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    os.killpg(os.getpgid(int(seen("pid-2"))), signal.SIGKILL)  # the orphaned agent
    listed = json.loads(ralph("reflections", "list", "--json", cwd=repo).out)
    assert listed[0]["status"] == "crashed"
    assert ralph("reflections", "validate", cwd=repo).code == 0
    plan(repo, {"2": write("full")})
    resumed = ralph("resume", listed[0]["loop_id"], "--json", cwd=repo)
    assert resumed.code == 0, resumed.err
    assert json.loads(resumed.out)["iterations"] == 2


def test_abort_marks_the_loop(ralph: RunCli, repo: Path) -> None:
    plan(repo, {"default": write("partial")})
    first = json.loads(ralph(*run_args("--max-iterations", "1"), cwd=repo).out)
    result = ralph("abort", first["loop_id"], cwd=repo)
    assert result.code == 0
    assert json.loads(ralph("status", "--json", cwd=repo).out)["status"] == "aborted"
    again = ralph("resume", first["loop_id"], cwd=repo)
    assert again.code == 2 and "aborted" in again.err
