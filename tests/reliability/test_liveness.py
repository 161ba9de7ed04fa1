"""Whether a loop runs is decided by its lock, not its pid; the state exists before the baseline;
SIGHUP saves the loop; `ralph abort` ends a running loop as aborted (exit 4)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ralph.loop import assembly as runner
from ralph.memory.store import MemoryStore
from ralph.process import kill_orphans

from ..conftest import RunCli
from .conftest import (
    arm,
    assert_invariants,
    assert_no_leftovers,
    check_command,
    finish,
    heuristic,
    leftovers,
    plan,
    start,
    write,
)

DEADLINE = 120.0  # generous: the suite runs on a busy 2-core machine


def wait_for(what: str, ready: Callable[[], bool], seconds: float = DEADLINE) -> None:
    deadline = time.monotonic() + seconds
    while not ready():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def agent_started(iteration: int) -> Callable[[], bool]:
    return lambda: (Path(os.environ["SEEN_DIR"]) / f"pid-{iteration}").exists()


def loop_id_of(project: Path) -> str:
    wait_for("the loop's state", lambda: bool(MemoryStore(project).loop_ids()))
    return MemoryStore(project).loop_ids()[0]


def status_of(ralph: RunCli, project: Path, loop_id: str) -> str:
    result = ralph("status", loop_id, "--json", cwd=project)
    assert result.code == 0, result.err
    return str(json.loads(result.out)["status"])


def set_pid(project: Path, loop_id: str, pid: int) -> None:
    store = MemoryStore(project)
    state = store.read_state(loop_id)
    state.pid = pid
    store.write_state(state)


def zombie() -> int:
    """A child that exited and was never reaped: `kill(pid, 0)` still answers for it."""
    proc = subprocess.Popen(["true"])
    stat = Path(f"/proc/{proc.pid}/stat")
    wait_for("a zombie", lambda: stat.read_text().rsplit(")", 1)[1].split()[0] == "Z")
    return proc.pid


def test_a_loop_runs_while_its_lock_is_held_whatever_its_pid(
    ralph: RunCli, project: Path, tmp_path: Path
) -> None:
    """A reused pid, a zombie, or PID 1 of a container (`unshare -p -f --mount-proc ralph run`
    then kill -9) read as "still running (pid 1)" and the loop could never be resumed.

    One loop serves every pid: while it runs, pids that are surely dead; after its kill -9,
    pids that some live process answers to."""
    gate = tmp_path / "gate"
    plan(
        project,
        {
            "1": {**write("partial"), "wait_for": str(gate)},
            "2": {**write("half"), "kill": True},
            "default": write("full"),
        },
    )
    arm("actor")  # iteration 2's agent kills ralph with SIGKILL, then ends
    proc = start(project, *heuristic())
    wait_for("iteration 1's agent", agent_started(1))
    loop_id = loop_id_of(project)
    for dead in (999_999_999, 2):  # a pid that is surely dead (2: not PID 1)...
        set_pid(project, loop_id, dead)
        assert status_of(ralph, project, loop_id) == "running"  # ...yet the loop holds its lock
    gate.write_text("")
    code, _, err = finish(proc)
    assert code == -signal.SIGKILL, err
    for name, fake in (("1", 1), ("reused", os.getpid()), ("zombie", zombie())):
        set_pid(project, loop_id, fake)  # after the kill: a pid some live process answers to
        assert status_of(ralph, project, loop_id) == "crashed", name
        listed = json.loads(ralph("reflections", "list", "--json", cwd=project).out)
        assert listed[0]["status"] == "crashed", name
    plan(project, {"default": write("full")})  # the redone iteration 2 ends the loop
    resumed = ralph("resume", "--json", cwd=project)  # finds it as the loop to resume
    assert resumed.code == 0, resumed.err
    assert json.loads(resumed.out)["status"] == "completed"
    assert_invariants(project)


def test_a_kill_during_the_baseline_leaves_a_loop_that_resumes(
    ralph: RunCli, project: Path, tmp_path: Path
) -> None:
    """The state used to be written after the baseline: `resume` said "unknown loop" and the
    baseline's check ran on."""
    hang = tmp_path / "hang-once"
    hang.write_text("")
    killer = f"{sys.executable} {os.environ['KILLER']}"
    test = f"{killer} check; if [ -e {hang} ]; then rm {hang}; sleep 300; fi; {check_command()}"
    plan(project, {"default": write("full")})
    arm("check")  # the first check run: the baseline
    code, _, err = finish(start(project, *heuristic("--test", test)))
    assert code == -signal.SIGKILL, err
    assert leftovers(), "the baseline's check runs on after the kill"
    loop_id = loop_id_of(project)
    assert status_of(ralph, project, loop_id) == "crashed"
    resumed = ralph("resume", loop_id, "--json", cwd=project)
    assert resumed.code == 0, resumed.err
    assert "process group" in resumed.err and "the crashed run (pid" in resumed.err
    summary = json.loads(resumed.out)
    assert summary["loop_id"] == loop_id and summary["status"] == "completed"
    assert_invariants(project)


def test_sighup_saves_the_loop_like_sigterm(ralph: RunCli, project: Path, tmp_path: Path) -> None:
    """A closed terminal or an ssh drop killed ralph and left the state `running`."""
    plan(project, {"1": {**write("partial"), "hang": True}, "default": write("full")})
    proc = start(project, *heuristic())
    wait_for("iteration 1's agent", agent_started(1))
    proc.send_signal(signal.SIGHUP)
    code, _, err = finish(proc)
    assert code == 130, err
    loop_id = loop_id_of(project)
    state = MemoryStore(project).read_state(loop_id)
    assert (state.status, state.stop_reason) == ("paused", "interrupted")
    assert_no_leftovers()
    plan(project, {"default": write("full")})
    resumed = ralph("resume", loop_id, "--json", cwd=project)
    assert resumed.code == 0, resumed.err
    assert_invariants(project)


def test_abort_ends_a_running_loop_as_aborted(ralph: RunCli, project: Path) -> None:
    """The loop used to say "paused ... `ralph resume` continues" and exit 130, after which
    `resume` answered "aborted: nothing to resume"."""
    plan(project, {"1": {**write("partial"), "hang": True}})
    # as `ralph run ... &` in a script starts it: with SIGINT ignored
    proc = subprocess.Popen(
        [sys.executable, "-m", "ralph", *heuristic()],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    wait_for("iteration 1's agent", agent_started(1))
    loop_id = loop_id_of(project)
    aborted = ralph("abort", loop_id, cwd=project)
    assert aborted.code == 0 and f"loop {loop_id} aborted" in aborted.out, aborted.err
    code, out, err = finish(proc)
    assert code == 4, err
    assert "aborted by `ralph abort`" in err and "ralph resume" not in err
    assert json.loads(out)["status"] == "aborted"
    state = MemoryStore(project).read_state(loop_id)
    assert (state.status, state.stop_reason) == ("aborted", "aborted by user")
    assert_no_leftovers()
    resumed = ralph("resume", loop_id, cwd=project)
    assert resumed.code == 2 and "aborted: nothing to resume" in resumed.err


def test_abort_from_where_no_signal_reaches_ends_the_loop_before_its_next_attempt(
    ralph: RunCli, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another host or pid namespace cannot signal the loop (nor can it tell a reused pid):
    the loop reads the request between attempts."""
    gate = tmp_path / "gate"
    plan(project, {"1": {**write("partial"), "wait_for": str(gate)}, "default": write("half")})
    proc = start(project, *heuristic())
    wait_for("iteration 1's agent", agent_started(1))
    loop_id = loop_id_of(project)
    monkeypatch.setattr(runner, "same_process", lambda identity: False)
    monkeypatch.setattr(runner, "ABORT_WAIT", 0.5)
    aborted = ralph("abort", loop_id, cwd=project)
    assert aborted.code == 0 and "abort requested" in aborted.out
    assert proc.poll() is None, "not signalled"
    gate.write_text("")
    code, out, err = finish(proc)
    assert code == 4, err
    summary = json.loads(out)
    assert summary["status"] == "aborted" and summary["iterations"] == 1
    assert_invariants(project, finished=False)


def test_orphans_are_told_from_a_reused_owner_pid(tmp_path: Path) -> None:
    """`kill_orphans(pid)` spares what a live, older owner runs (before: killed it), and kills
    what an owner left whose pid a younger process holds now (the pid was reused)."""
    marker = "RALPH_OWNER_PID"
    owner = subprocess.Popen(["sleep", "300"])
    child = subprocess.Popen(
        ["sleep", "300"], env={**os.environ, marker: str(owner.pid)}, start_new_session=True
    )
    owner_file = tmp_path / "owner"
    script = (
        f"while [ ! -s {owner_file} ]; do sleep 0.05; done; "
        f"export {marker}=$(cat {owner_file}); exec sleep 300"
    )
    orphan = subprocess.Popen(["sh", "-c", script], start_new_session=True)
    time.sleep(0.1)  # the orphan's start time (clock ticks) is now older than the new owner's
    younger = subprocess.Popen(["sleep", "300"])
    owner_file.write_text(str(younger.pid))
    environ = Path(f"/proc/{orphan.pid}/environ")
    wait_for("the orphan's marker", lambda: marker.encode() in environ.read_bytes())
    try:
        assert kill_orphans(owner.pid) == []  # its owner lives: not an orphan
        assert child.poll() is None
        assert kill_orphans(younger.pid) == [orphan.pid]  # younger.pid was "reused"
        assert orphan.wait(timeout=DEADLINE) == -signal.SIGKILL
    finally:
        for proc in (owner, child, orphan, younger):
            proc.kill()
            proc.wait()
