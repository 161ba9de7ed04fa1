"""An agent that misbehaves in every way we could think of; the loop carries on and stays sane."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ralph.memory.store import MemoryStore

from ..conftest import RunCli
from .conftest import (
    assert_invariants,
    assert_no_leftovers,
    heuristic,
    plan,
    write,
)

FULL = write("full")


def run_ok(ralph: RunCli, project: Path, *extra: str) -> dict[str, object]:
    result = ralph(*heuristic(*extra), cwd=project)
    assert result.code == 0, result.err
    summary: dict[str, object] = json.loads(result.out)
    return summary


def test_silent_hang_is_killed_at_the_idle_timeout(ralph: RunCli, project: Path) -> None:
    plan(project, {"1": {**write("partial"), "hang": True}, "2": FULL})
    run_ok(ralph, project, "--idle-timeout", "1")
    first = assert_invariants(project)[0]
    assert "idle timeout" in first["notes"]
    assert_no_leftovers(seconds=0)  # the hung agent was killed with its attempt


def test_background_children_do_not_outlive_the_attempt(ralph: RunCli, project: Path) -> None:
    plan(project, {"1": {**FULL, "background": True}})
    run_ok(ralph, project)
    assert_no_leftovers(seconds=0)  # at once: killed with the attempt's process group
    assert_invariants(project)


# Starts ralph and reports its ru_maxrss. A child started straight from the test process would
# report that process's peak (the kernel keeps the high-water mark of the image it replaces at
# exec, and after vfork that is the parent's), so ralph is started from this small one.
MEASURED = """
import os, subprocess, sys
proc = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(proc.pid, 0)
open(sys.argv[1], "w").write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def test_100_mb_of_output_stays_bounded_in_memory_and_on_disk(project: Path) -> None:
    plan(project, {"1": {**FULL, "flood": 100 << 20}})
    out, err = project.parent / "out.txt", project.parent / "err.txt"
    maxrss = project.parent / "maxrss.txt"
    argv = [sys.executable, "-c", MEASURED, str(maxrss), sys.executable, "-m", "ralph"]
    with out.open("w") as stdout, err.open("w") as stderr:
        done = subprocess.run([*argv, *heuristic()], cwd=project, stdout=stdout, stderr=stderr)
    assert done.returncode == 0, err.read_text()
    assert json.loads(out.read_text())["reward_history"] == [1.0]
    # ru_maxrss (KiB) covers ralph and the children it waited for: far below the 100 MB
    assert int(maxrss.read_text()) < 90 * 1024, maxrss.read_text()
    memory = MemoryStore(project).base
    on_disk = sum(p.stat().st_size for p in memory.rglob("*") if p.is_file())
    assert on_disk < 2 << 20, on_disk
    assert err.stat().st_size < 100_000
    log = next(memory.rglob("001/actor.log")).read_text()
    assert "bytes elided by ralph" in log
    assert_invariants(project)


def test_invalid_utf8_in_output_contents_and_file_names(ralph: RunCli, project: Path) -> None:
    bad_name = os.fsdecode(b"notes-\xff\xfe.txt")
    step = {
        **write("partial"),
        "bad_utf8": True,
        "shell": f"printf 'caf\\351 \\377\\n' > latin1.txt; printf x > '{bad_name}'",
    }
    plan(project, {"1": step, "2": FULL})
    run_ok(ralph, project)
    first = assert_invariants(project)[0]
    described = json.dumps(first)
    assert "latin1.txt" in described and "notes-" in described


def test_non_zero_exit_is_one_failed_attempt(ralph: RunCli, project: Path) -> None:
    plan(project, {"1": {**write("partial"), "exit": 3}, "2": FULL})
    summary = run_ok(ralph, project)
    assert summary["reward_history"] == [0.75, 1.0]
    first = assert_invariants(project)[0]
    assert "exited 3" in first["actor_output"]["rationale"]


def test_deleting_the_tests_never_counts_as_success(ralph: RunCli, project: Path) -> None:
    plan(project, {"1": write("partial"), "2": {"delete": ["tests"]}, "3": FULL})
    summary = run_ok(ralph, project, "--max-iterations", "4")
    history = summary["reward_history"]
    assert isinstance(history, list) and history[1] < 1.0 and history[-1] == 1.0
    records = assert_invariants(project)
    assert records[1]["evaluator_output"]["passed"] is False
    assert (project / "tests" / "test_calc.py").exists()  # rolled back, then kept
    assert records[1]["evaluator_output"]["errors"]  # the missing tests are a failure, named


def test_editing_ralphs_memory_is_undone(ralph: RunCli, project: Path) -> None:
    shell = (
        'for f in .aiwg/ralph/reflections/*/001.json; do echo garbage > "$f"; done; '
        "rm -f .aiwg/ralph/loops/*/state.json"
    )
    plan(project, {"1": write("half"), "2": {**write("partial"), "shell": shell}, "3": FULL})
    result = ralph(*heuristic(), cwd=project)
    assert result.code == 0, result.err
    assert "changed ralph's records (001.json): restored" in result.err
    records = assert_invariants(project)
    assert [r["iteration"] for r in records] == [1, 2, 3]
    assert (
        "+    return x if x < 3 else 0"
        in records[0]["actor_output"]["actions"][0]["changes"]["diff"]
    )
