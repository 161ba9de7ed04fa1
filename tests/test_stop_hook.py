"""`ralph hook claude-stop`, Claude Code's Stop hook: the project's checks decide whether Claude
may stop; and `ralph hook install claude`, merged into .claude/settings.json."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from ralph.memory.store import LoopState, MemoryStore
from ralph.testing import TEST_TEXT, VERSIONS

from .conftest import CliResult, RunCli
from .fakes.calc_project import make_calc_repo

TESTS = TEST_TEXT + "\n\ndef test_negative():\n    assert f(-2) == 2\n"
CHECK = f"{sys.executable} -m pytest -q -p no:cacheprovider tests"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """calc.py failing test_negative (f returns x), with one pytest check configured."""
    root = make_calc_repo(
        tmp_path / "repo", calc=VERSIONS["partial"], tests=TESTS, monkeypatch=monkeypatch
    )
    config = root / ".aiwg" / "ralph" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(f"checks:\n  - name: tests\n    command: {CHECK}\n")
    return root


def stop(
    ralph: RunCli,
    monkeypatch: pytest.MonkeyPatch,
    cwd: Path | str,
    *args: str,
    active: bool = False,
    where: Path | None = None,
) -> CliResult:
    """The hook as Claude Code runs it: its JSON on stdin, from a directory of its choosing."""
    data = {"session_id": "s1", "hook_event_name": "Stop", "cwd": str(cwd)}
    data["stop_hook_active"] = active  # type: ignore[assignment]
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(cwd))  # Claude Code names the project
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(data)))
    return ralph("hook", "claude-stop", *args, cwd=where)


def answer(result: CliResult) -> dict[str, Any]:
    assert result.code == 0, result.err
    data: dict[str, Any] = json.loads(result.out)
    return data


def test_failing_checks_block_the_stop_with_their_file_line_diagnostics(
    ralph: RunCli, monkeypatch: pytest.MonkeyPatch, project: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"  # Claude Code does not promise the hook's own cwd
    elsewhere.mkdir()
    (project / "tests" / "sub").mkdir()
    blocked = answer(stop(ralph, monkeypatch, project / "tests" / "sub", where=elsewhere))
    assert blocked["decision"] == "block"
    reason = blocked["reason"]
    assert "the project's checks fail: tests (1 of 2 tests failed)" in reason
    assert "- tests/test_calc.py:" in reason and "test_negative" in reason
    assert "stop blocked 1 of at most 5 times in a row" in reason


def test_passing_checks_let_claude_stop(
    ralph: RunCli, monkeypatch: pytest.MonkeyPatch, project: Path
) -> None:
    (project / "calc.py").write_text(VERSIONS["full"])
    result = stop(ralph, monkeypatch, project)
    assert (result.code, result.out) == (0, "")


def test_it_never_blocks_forever(
    ralph: RunCli, monkeypatch: pytest.MonkeyPatch, project: Path
) -> None:
    first = answer(stop(ralph, monkeypatch, project, "--max-blocks", "2"))
    second = answer(stop(ralph, monkeypatch, project, "--max-blocks", "2", active=True))
    assert first["decision"] == second["decision"] == "block"
    assert "stop blocked 2 of at most 2" in second["reason"]
    let_go = answer(stop(ralph, monkeypatch, project, "--max-blocks", "2", active=True))
    assert "decision" not in let_go
    assert "still fail after 2 blocked stops" in let_go["systemMessage"]
    # a fresh stop (Claude was prompted again) counts from the start
    again = answer(stop(ralph, monkeypatch, project, "--max-blocks", "2", active=False))
    assert again["decision"] == "block" and "stop blocked 1 of at most 2" in again["reason"]


def test_a_fresh_stop_resets_the_count_even_after_blocks(
    ralph: RunCli, monkeypatch: pytest.MonkeyPatch, project: Path
) -> None:
    for _ in range(3):
        blocked = answer(stop(ralph, monkeypatch, project, "--max-blocks", "2"))
        assert "stop blocked 1 of at most 2" in blocked["reason"]


def test_failures_the_latest_loops_baseline_had_do_not_block(
    ralph: RunCli, monkeypatch: pytest.MonkeyPatch, project: Path
) -> None:
    from ralph import config
    from ralph.evaluators.suite import CheckSuite

    store = MemoryStore(project)
    suite = CheckSuite.from_settings(config.load(project))
    baseline = suite.evaluate_baseline(project).baseline
    assert baseline is not None and baseline.checks["tests"].role == "target"
    # as a loop with --check-less defaults would: test_negative failing, a guard for this test
    data = baseline.to_json()
    data["checks"][0]["role"] = "guard"
    store.ensure()
    store.write_state(LoopState(loop_id="ralph-base-1", task="t", status="completed"))
    store.write_baseline("ralph-base-1", data)
    assert stop(ralph, monkeypatch, project).out == ""
    # a test that passed at the baseline and fails now still blocks
    (project / "calc.py").write_text(VERSIONS["zero"])
    assert answer(stop(ralph, monkeypatch, project))["decision"] == "block"


def test_a_loop_in_another_worktree_gives_no_baseline_here(
    ralph: RunCli, monkeypatch: pytest.MonkeyPatch, project: Path, tmp_path: Path
) -> None:
    from ralph.workspace.base import GitState

    store = MemoryStore(project)
    store.ensure()
    state = LoopState(loop_id="ralph-wt-1", task="t", status="completed")
    state.git = GitState(worktree=str(tmp_path / "other"))
    store.write_state(state)
    failing = ["tests/test_calc.py::test_negative"]
    guard = {"name": "tests", "kind": "tests", "role": "guard", "status": "fail",
             "error_count": 1, "why": "", "failing": failing}  # fmt: skip
    store.write_baseline("ralph-wt-1", {"success": "baseline", "checks": [guard]})
    assert answer(stop(ralph, monkeypatch, project))["decision"] == "block"


def test_when_the_checks_cannot_run_claude_may_stop_and_is_told(
    ralph: RunCli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    result = stop(ralph, monkeypatch, tmp_path)  # no checks configured here
    told = answer(result)
    assert "decision" not in told
    assert told["systemMessage"].startswith("ralph: error: no checks configured")
    assert result.err.startswith("ralph: error: no checks configured")


@pytest.mark.parametrize(
    ("stdin", "message"),
    [
        ("not json", "not JSON"),
        ("[1]", "not a JSON object"),
        ("{}", "has no `cwd`"),
        ('{"cwd": "/no/such/dir"}', "is not a directory"),
    ],
)
def test_unreadable_hook_input_is_one_line_and_exit_2(
    ralph: RunCli, monkeypatch: pytest.MonkeyPatch, stdin: str, message: str
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    result = ralph("hook", "claude-stop")
    assert result.code == 2 and message in result.err
    assert "Traceback" not in result.err and result.out == ""


# --- install --------------------------------------------------------------------------------


def test_install_merges_with_the_settings_there_and_twice_changes_nothing(
    ralph: RunCli, tmp_path: Path
) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    mine = {
        "permissions": {"allow": ["Bash(npm test:*)"]},
        "env": {"MY_TOKEN": "sk-ant-abcdefghijklmnopqrstuvwxyz012345"},
        "hooks": {
            "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "x"}]}],
        },
    }
    settings.write_text(json.dumps(mine))
    result = ralph("hook", "install", "claude", "--project", str(tmp_path))
    assert result.code == 0 and "added the Stop hook" in result.out
    data = json.loads(settings.read_text())
    assert data["permissions"] == mine["permissions"] and data["env"] == mine["env"]
    assert data["hooks"]["PreToolUse"] == mine["hooks"]["PreToolUse"]
    commands = [h["command"] for group in data["hooks"]["Stop"] for h in group["hooks"]]
    assert commands == ["notify-send done", "ralph hook claude-stop"]
    before = settings.read_bytes()
    again = ralph("hook", "install", "claude", "--project", str(tmp_path))
    assert again.code == 0 and "already in" in again.out
    assert settings.read_bytes() == before


def test_install_creates_the_settings_file(ralph: RunCli, tmp_path: Path) -> None:
    assert ralph("hook", "install", "claude", "--project", str(tmp_path)).code == 0
    data = json.loads((tmp_path / ".claude" / "settings.json").read_text())
    (group,) = data["hooks"]["Stop"]
    assert group["hooks"][0]["command"] == "ralph hook claude-stop"


def test_install_refuses_a_settings_file_it_cannot_read(ralph: RunCli, tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text("{not json")
    result = ralph("hook", "install", "claude", "--project", str(tmp_path))
    assert result.code == 2 and "cannot read it as JSON" in result.err
    assert settings.read_text() == "{not json"
