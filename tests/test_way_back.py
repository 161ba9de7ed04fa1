"""After any failure once the loop's branch exists, the last lines give the way back and
`ralph resume`. Before: a provider that failed for good (23 s of retries, exit 2) left the
checkout on the loop's branch with only "ralph: error: ..." and its hint printed."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from ralph.cli.live import next_steps
from ralph.loop.result import LoopResult

from .conftest import RunCli
from .fakes.calc_project import git, make_calc_repo
from .fakes.provider_server import FakeProvider
from .test_loop import TESTS, VERSIONS


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CI", "true")
    return make_calc_repo(
        tmp_path / "repo", calc=VERSIONS["zero"], tests=TESTS, monkeypatch=monkeypatch
    )


def test_a_provider_failing_for_good_ends_with_resume_and_the_way_back(
    ralph: RunCli, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeProvider() as fake:
        for name, value in fake.environ().items():
            monkeypatch.setenv(name, value)
        fake.script(status=400, message="model gpt-nope does not exist")  # no retry for a 400
        test = "python -m pytest -q -p no:cacheprovider tests"
        result = ralph(
            "run", "make f pass", "-a", "openai:gpt-nope", "-t", test, "--reflector",
            "heuristic", cwd=repo,
        )  # fmt: skip
    assert result.code == 2, result.err
    lines = result.err.splitlines()
    error = next(i for i, line in enumerate(lines) if line.startswith("ralph: error: "))
    loop_id = json.loads(next((repo / ".aiwg/ralph/loops").glob("*/state.json")).read_text())[
        "loop_id"
    ]
    assert git(repo, "branch", "--show-current") != "main"  # left on the loop's branch
    after = lines[error + 1 :]
    assert f"resume  ralph resume {loop_id}" in after, result.err
    assert "switch  git switch main" in after, result.err
    command = "git switch main"  # pasted, it goes back
    subprocess.run(command.split(), cwd=repo, check=True, capture_output=True, env=os.environ)
    assert git(repo, "branch", "--show-current") == "main"


def paused(**fields: object) -> LoopResult:
    base = {
        "loop_id": "ralph-x-00000001", "status": "paused", "stop_reason": "interrupted",
        "exit_code": 130, "iterations": 1, "best_iteration": 1, "best_reward": 0.5,
        "reward_history": [0.5], "usage": {}, "reflections_dir": "",
        "branch": "ralph/x-00000001", "base_branch": "main", "base_commit": "a" * 40,
    }  # fmt: skip
    return LoopResult(**{**base, **fields})  # type: ignore[arg-type]


def test_a_paused_loop_ends_with_resume_and_the_way_back() -> None:
    assert next_steps(paused()) == [
        "resume  ralph resume ralph-x-00000001",
        "switch  git switch main",
    ]
    assert next_steps(paused(worktree="/w")) == ["resume  ralph resume ralph-x-00000001"]
    assert next_steps(paused(base_branch=None)) == [
        "resume  ralph resume ralph-x-00000001",
        f"switch  git switch --detach {'a' * 12}",
    ]
    assert next_steps(paused(branch=None)) == []  # stopped before its branch: nothing to undo
