"""Checks that hang, crash or vanish; a full disk; a memory directory ralph cannot write."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from ralph.memory.store import MemoryStore

from ..conftest import RunCli
from .conftest import VERSIONS, assert_invariants, git, heuristic, plan, write

GOOD_CHECK = "exit 0\n"
BAD_CHECKS = {
    "hang": "sleep 60\n",
    "crash": "kill -SEGV $$\n",
    "deleted": None,  # the agent deletes the check's script
}


@pytest.mark.parametrize("fault", sorted(BAD_CHECKS))
def test_a_broken_check_fails_the_attempt_not_the_loop(
    fault: str, ralph: RunCli, project: Path
) -> None:
    (project / "check.sh").write_text(GOOD_CHECK)
    git(project, "add", "check.sh")
    git(project, "commit", "-qm", "a shell check")
    config = project / ".aiwg" / "ralph" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text("checks:\n  - {name: shell, command: sh check.sh, timeout: 1}\n")
    script = BAD_CHECKS[fault]
    broken = {"delete": ["check.sh"]} if script is None else {"write": {"check.sh": script}}
    broken["write"] = {**broken.get("write", {}), "calc.py": VERSIONS["partial"]}
    plan(project, {"1": broken, "2": {"write": {"check.sh": GOOD_CHECK, **write("full")["write"]}}})
    result = ralph(*heuristic(), cwd=project)
    assert result.code == 0, result.err
    first = assert_invariants(project)[0]
    shell = next(r for r in first["evaluator_output"]["results"] if r["tool"] != "pytest")
    assert shell["status"] in ("fail", "error")
    if fault == "hang":
        assert any(e["type"] == "timeout" for e in first["evaluator_output"]["errors"])


def test_a_full_disk_is_a_clear_error_without_partial_files(ralph: RunCli, project: Path) -> None:
    """RLIMIT_FSIZE makes every write past 64 KiB fail as a full disk would (EFBIG)."""
    noisy = (
        "import sys\n"
        "if 'abs' not in open('calc.py').read():\n"
        "    sys.exit(sys.stdout.write('line of check output\\n' * 20000) and 1)\n"
    )
    (project / "noisy.py").write_text(noisy)
    git(project, "add", "noisy.py")
    git(project, "commit", "-qm", "a noisy check")
    plan(project, {"default": write("partial")})
    limit = 64 << 10
    proc = subprocess.run(
        [sys.executable, "-m", "ralph", *heuristic("--check", f"{sys.executable} noisy.py")],
        cwd=project,
        capture_output=True,
        text=True,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)),
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("ralph: error: "))
    error = lines[at : at + 2]  # then the way back: `ralph resume`, `git switch main`
    assert error[0].startswith("ralph: error: cannot write ") and "too large" in error[0]
    assert error[1].startswith("hint: free disk space") and "Traceback" not in proc.stderr
    store = MemoryStore(project)
    loop_id = store.loop_ids()[0]
    assert lines[at + 2 :] == [f"resume  ralph resume {loop_id}", "switch  git switch main"]
    state = store.read_state(loop_id)
    assert state.status == "paused" and (state.stop_reason or "").startswith("error: cannot")
    assert_invariants(project, finished=False)  # includes: no temporary file left
    plan(project, {"default": write("full")})
    resumed = ralph("resume", loop_id, "--json", cwd=project)
    assert resumed.code == 0, resumed.err
    assert_invariants(project)


def test_memory_directory_that_cannot_be_created(ralph: RunCli, project: Path) -> None:
    (project / ".aiwg").mkdir()
    (project / ".aiwg" / "ralph").write_text("a file where ralph's directory should be\n")
    result = ralph(*heuristic(), cwd=project)
    assert result.code == 2
    assert result.err.startswith("ralph: error: cannot create the loop lock")
    assert "hint: ralph needs to write to" in result.err and "Traceback" not in result.err
    assert git(project, "branch", "--list", "ralph/*") == ""


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to read-only directories anyway")
def test_read_only_memory_directory(ralph: RunCli, project: Path) -> None:
    plan(project, {"default": write("partial")})
    base = project / ".aiwg" / "ralph"
    base.mkdir(parents=True)
    (base / "config.yaml").write_text("max_iterations: 2\n")
    before = sorted(p.name for p in base.rglob("*"))
    base.chmod(0o555)
    try:
        result = ralph(*heuristic(), cwd=project)
    finally:
        base.chmod(0o755)
    assert result.code == 2 and "ralph: error: cannot" in result.err
    assert "Traceback" not in result.err
    assert sorted(p.name for p in base.rglob("*")) == before
    assert git(project, "branch", "--list", "ralph/*") == ""
