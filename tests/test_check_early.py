"""`ralph check` starts its checks before the CLI is loaded (cli/early.py): the early evaluation
is used only when it runs the command's very checks; otherwise, or when the command fails
before it gets there, the early checks are stopped and nothing of them is reported."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ralph import config
from ralph.cli import early
from ralph.evaluators.base import CheckOutcome
from ralph.evaluators.suite import CheckSuite

# Writes its pid, then takes long enough that only a kill stops it before `late` is written.
SLOW = "echo $$ > pid; sleep 60; echo late > late"


def make_repo(path: Path, command: str) -> Path:
    path.mkdir()
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    # the probes' side files: ignored, else ralph would put back what the checks wrote
    (path / ".gitignore").write_text("runs\npid\nlate\n")
    (path / ".aiwg" / "ralph").mkdir(parents=True)
    checks = [{"name": "probe", "command": command}]
    (path / ".aiwg" / "ralph" / "config.yaml").write_text(json.dumps({"checks": checks}))
    return path


def ralph_process(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real console script's module (`python -m ralph`), as a user starts it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RALPH_")}
    return subprocess.run(
        [sys.executable, "-m", "ralph", *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def wait_for(path: Path, deadline: float = 60.0) -> str:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if path.is_file() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.02)
    raise AssertionError(f"{path} never appeared")


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.fixture
def no_pending() -> Iterator[None]:
    yield
    early.cancel()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["check"], True),
        (["check", "--json"], True),
        (["check", "--check", "lint"], False),
        (["check", "-t", "pytest"], False),
        (["check", "-c", "other.yaml"], False),
        (["check", "--help"], False),
        (["run", "task"], False),
        ([], False),
    ],
)
def test_only_a_check_whose_checks_the_flags_cannot_change_starts_early(
    args: list[str], expected: bool
) -> None:
    assert early.wanted(args) is expected


def test_ralph_check_runs_each_check_once(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", "echo run >> runs")
    result = ralph_process(repo, "check", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["passed"] is True
    assert (repo / "runs").read_text() == "run\n"  # started early and claimed, not run twice


def test_a_failing_check_exits_1_with_its_report(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", "echo broken; exit 3")
    result = ralph_process(repo, "check", "--json")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["passed"] is False and "broken" in report["results"][0]["stdout"]


def test_a_flag_that_names_other_checks_never_starts_the_configured_ones(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", "echo run >> runs")
    result = ralph_process(repo, "check", "--json", "--check", "true")
    assert result.returncode == 0, result.stderr
    assert not (repo / "runs").exists()


def test_a_config_error_stops_the_early_checks(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", SLOW)
    config_file = repo / ".aiwg" / "ralph" / "config.yaml"
    settings = json.loads(config_file.read_text())
    config_file.write_text(json.dumps({**settings, "omega": -1}))  # only the schema says no
    result = ralph_process(repo, "check", "--json")
    assert result.returncode == 2
    assert result.stderr.startswith("ralph: error:") and "omega" in result.stderr
    if (repo / "pid").exists():  # it had started: it must be stopped, not left running
        assert gone(int((repo / "pid").read_text()))
    assert not (repo / "late").exists()


def test_the_early_evaluation_serves_the_same_checks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_pending: None
) -> None:
    repo = make_repo(tmp_path / "repo", "echo run >> runs")
    monkeypatch.chdir(repo)
    early.start(repo)
    suite = CheckSuite.from_settings(config.load(repo, {}))
    running = early.claim(suite, repo.resolve())
    assert running is not None
    heard: list[CheckOutcome] = []
    evaluation = running.result(suite, on_done=heard.append)
    assert evaluation.passed and [o.spec.name for o in heard] == ["probe"]
    assert (repo / "runs").read_text() == "run\n"
    assert early.claim(suite, repo.resolve()) is None  # claimed once


def test_other_checks_stop_the_early_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_pending: None
) -> None:
    repo = make_repo(tmp_path / "repo", SLOW)
    monkeypatch.chdir(repo)
    early.start(repo)
    pid = int(wait_for(repo / "pid"))
    other = CheckSuite.from_settings(config.load(repo, {"checks": ["true"]}))
    assert early.claim(other, repo.resolve()) is None
    assert gone(pid) and not (repo / "late").exists()


def test_cancel_stops_an_unclaimed_evaluation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo", SLOW)
    monkeypatch.chdir(repo)
    early.start(repo)
    pid = int(wait_for(repo / "pid"))
    early.cancel()
    assert gone(pid) and not (repo / "late").exists()


def test_nothing_starts_early_where_the_command_would_refuse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_pending: None
) -> None:
    repo = make_repo(tmp_path / "repo", "no-such-tool-ralph --flag")
    monkeypatch.chdir(repo)
    early.start(repo)  # the preflight fails: the command will say so, nothing runs meanwhile
    suite = CheckSuite.from_settings(config.load(repo, {}))
    assert early.claim(suite, repo.resolve()) is None


def two_checks(path: Path, quick: str, slow: str) -> Path:
    repo = make_repo(path, quick)
    checks = [{"name": "quick", "command": quick}, {"name": "slow", "command": slow}]
    (repo / ".aiwg" / "ralph" / "config.yaml").write_text(json.dumps({"checks": checks}))
    return repo


def test_the_cli_waits_for_a_free_core_not_for_the_slow_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_pending: None
) -> None:
    repo = two_checks(tmp_path / "repo", "echo quick > quick", SLOW)
    monkeypatch.chdir(repo)
    early.start(repo)
    running = early._pending
    assert running is not None
    running.wait_for_a_free_core(cores=2, limit=60.0)  # returns when `quick` is done
    assert (repo / "quick").read_text() == "quick\n"
    pid = int(wait_for(repo / "pid"))
    assert not gone(pid)  # the slow one still runs: nobody waited for it


def test_the_cli_stops_waiting_after_its_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_pending: None
) -> None:
    repo = make_repo(tmp_path / "repo", SLOW)
    monkeypatch.chdir(repo)
    early.start(repo)
    running = early._pending
    assert running is not None
    running.wait_for_a_free_core(cores=1, limit=0.05)  # the one check keeps the one core
    pid = int(wait_for(repo / "pid"))
    assert not gone(pid)


def test_ctrl_c_while_the_early_checks_run_stops_them_and_says_so(tmp_path: Path) -> None:
    """Whether the interrupt finds ralph waiting for a free core, loading the CLI or waiting for
    the checks, the answer is the same: one line, exit 130, no check left running."""
    repo = make_repo(tmp_path / "repo", SLOW)
    names = "abc"
    checks = [{"name": n, "command": f"echo $$ > pid-{n}; sleep 60"} for n in names]
    (repo / ".aiwg" / "ralph" / "config.yaml").write_text(json.dumps({"checks": checks}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("RALPH_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ralph", "check", "--json"],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    pids = [int(wait_for(repo / f"pid-{n}")) for n in names]
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130
    assert err == "ralph: interrupted\n"
    assert all(gone(pid) for pid in pids)


def test_an_early_check_that_writes_is_put_back_and_reported(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", "echo x >> tracked.txt; touch made.txt")
    (repo / "tracked.txt").write_text("mine\n")
    result = ralph_process(repo, "check", "--json")
    assert result.returncode == 1, result.stderr
    assert (repo / "tracked.txt").read_text() == "mine\n"
    assert not (repo / "made.txt").exists()
    (error, *_) = json.loads(result.stdout)["errors"]
    assert error["message"] == (
        "check 'probe' changed files in the tree: made.txt, tracked.txt (put back)"
    )
