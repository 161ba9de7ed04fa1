"""Fault injection for `ralph run`: a misbehaving agent, a killer, and the invariants checked after.

Builds on the `repo` fixture of tests/test_loop.py (a git repository whose pytest check scores
0, 0.5, 0.75 or 1 by calc.py's version). Every process the test starts carries RELIABILITY_TAG
in its environment, so `leftovers()` finds anything ralph left running, however it was started.

Kill points are reached without hooks in ralph itself: `tools/killer.py POINT` SIGKILLs the
nearest ancestor that is `python -m ralph` when the arm file names POINT (after N passes), and
is called by the agent, by a check command, or by git's reference-transaction hook (`txn-*`: an
update of the loop branch, `new-*`: its creation).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ralph import schemas
from ralph.memory.store import MemoryStore

from ..test_loop import TESTS, VERSIONS, git, plan, repo, seen, write  # noqa: F401

__all__ = ["TESTS", "VERSIONS", "git", "plan", "seen", "write"]

if not Path("/proc/self/environ").exists():  # finding processes left behind needs Linux /proc
    collect_ignore_glob = ["test_*.py"]

AGENT = r"""
import json, os, subprocess, sys, time
from pathlib import Path
iteration = os.environ["RALPH_ITERATION"]
prompt = Path(os.environ["RALPH_PROMPT_FILE"]).read_text()
seen = Path(os.environ["SEEN_DIR"])
(seen / f"prompt-{iteration}.md").write_text(prompt)
(seen / f"pid-{iteration}").write_text(str(os.getpid()))
plan = json.loads(Path(os.environ["PLAN"]).read_text())
step = plan.get(iteration) or plan.get("default") or {}
for path, text in step.get("write", {}).items():
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(text)
for path in step.get("delete", []):
    subprocess.run(["rm", "-rf", path], check=True)
if step.get("read"):
    print(Path(step["read"]).read_text(), flush=True)
if step.get("shell"):
    subprocess.run(step["shell"], shell=True)
if step.get("background"):
    subprocess.Popen(["sleep", "300"], stdout=subprocess.DEVNULL)
if step.get("kill"):
    subprocess.run([sys.executable, os.environ["KILLER"], "actor"], check=True)
if step.get("flood"):
    chunk = b"x" * 1023 + b"\n"
    for _ in range(step["flood"] // 1024):
        sys.stdout.buffer.write(chunk)
    sys.stdout.flush()
if step.get("bad_utf8"):
    sys.stdout.buffer.write(b"\xff\xfe invalid \xc3\x28 utf-8 \xed\xa0\x80\n")
    sys.stdout.flush()
if step.get("wait_for"):  # a gate the test opens
    deadline = time.monotonic() + 120
    while not Path(step["wait_for"]).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
if step.get("hang"):
    time.sleep(600)
print(step.get("say", "done"), flush=True)
sys.exit(step.get("exit", 0))
"""

KILLER = r"""
import os, signal, sys
from pathlib import Path
point = sys.argv[1]
if point.startswith("txn-"):  # reference-transaction hook: only an iteration commit counts
    refs = [line.split() for line in sys.stdin.read().splitlines() if line.strip()]
    if not any(r[2].startswith("refs/heads/ralph/") and set(r[0]) != {"0"} for r in refs):
        sys.exit(0)
if point.startswith("new-"):  # reference-transaction hook: only the loop branch's creation
    refs = [line.split() for line in sys.stdin.read().splitlines() if line.strip()]
    if not any(r[2].startswith("refs/heads/ralph/") and set(r[0]) == {"0"} for r in refs):
        sys.exit(0)
arm = Path(os.environ["ARM_FILE"])
try:
    want, count = arm.read_text().split()
except (OSError, ValueError):
    sys.exit(0)
if want != point:
    sys.exit(0)
if int(count) > 1:
    arm.write_text(f"{want} {int(count) - 1}")
    sys.exit(0)
arm.unlink()
pid = os.getppid()
while pid > 1:
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    if b"-m" in argv and b"ralph" in argv:
        Path(os.environ["SEEN_DIR"], f"killed-at-{point}").write_text(str(pid))
        os.kill(pid, signal.SIGKILL)
        sys.exit(0)
    stat = Path(f"/proc/{pid}/stat").read_text()
    pid = int(stat[stat.rfind(")") + 2 :].split()[1])
sys.exit("killer: no ralph ancestor")
"""


GIT_SHIM = r"""#!/bin/sh
for arg; do
    shift
    if [ "$arg" = "core.hooksPath=/dev/null" ] && [ -d "$TEST_GIT_HOOKS" ]; then
        arg="core.hooksPath=$TEST_GIT_HOOKS"
    fi
    set -- "$@" "$arg"
done
exec REAL_GIT "$@"
"""


@pytest.fixture
def project(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:  # noqa: F811
    """`repo` plus the agent, the killer and a tag on every process; a user's files to protect."""
    tools = tmp_path / "tools"
    (tools / "agent.py").write_text(AGENT)
    (tools / "killer.py").write_text(KILLER)
    monkeypatch.setenv("KILLER", str(tools / "killer.py"))
    monkeypatch.setenv("ARM_FILE", str(tools / "arm"))
    # ralph's git runs no hook (workspace/hardened.py); the kill points a hook reaches are put
    # back by a `git` on PATH that turns ralph's `core.hooksPath=/dev/null` into this folder
    shim, real = tools / "bin", shutil.which("git")
    shim.mkdir()
    (shim / "git").write_text(GIT_SHIM.replace("REAL_GIT", shlex.quote(str(real))))
    (shim / "git").chmod(0o755)
    monkeypatch.setenv("TEST_GIT_HOOKS", str(tools / "hooks"))
    monkeypatch.setenv("PATH", f"{shim}{os.pathsep}{os.environ['PATH']}")
    # the user's own things ralph must never touch: an ignored local file, ralph's config
    (repo / ".gitignore").write_text("__pycache__/\n*.local\n")
    git(repo, "commit", "-qam", "ignore local files")
    (repo / "notes.local").write_text("my notes, not in git\n")
    return repo


USER_FILES = {"notes.local": "my notes, not in git\n"}


def agent() -> str:
    return f"cmd:{sys.executable} {Path(os.environ['KILLER']).parent / 'agent.py'}"


def check_command() -> str:
    return f"{sys.executable} -m pytest -q -p no:cacheprovider tests"


def args(*extra: str, task: str = "make f pass its tests") -> list[str]:
    return ["run", task, "--actor", agent(), "--test", check_command(), "--json", *extra]


def heuristic(*extra: str) -> list[str]:
    return args("--reflector", "heuristic", *extra)


def arm(point: str, count: int = 1) -> None:
    Path(os.environ["ARM_FILE"]).write_text(f"{point} {count}")


def start(cwd: Path, *argv: str) -> subprocess.Popen[str]:
    """`python -m ralph ...` as a separate process (so it can be killed)."""
    return subprocess.Popen(
        [sys.executable, "-m", "ralph", *argv],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen[str], timeout: float = 90) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def install_hook(root: Path, name: str, body: str) -> None:
    """A hook for ralph's own git commands (through the `project` fixture's git on PATH)."""
    hook = Path(os.environ["TEST_GIT_HOOKS"]) / name
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_text(f"#!/bin/sh\n{body}\n")
    hook.chmod(0o755)


# -- invariants ------------------------------------------------------------------------------


def leftovers(tag: str | None = None) -> list[int]:
    """Live (non-zombie) processes carrying this test's tag, other than this test process."""
    marker = f"RELIABILITY_TAG={tag or os.environ['RELIABILITY_TAG']}".encode()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = Path(entry.path, "environ").read_bytes()
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        if marker in environ.split(b"\0") and stat[stat.rfind(")") + 2] != "Z":
            found.append(int(entry.name))
    return found


def assert_no_leftovers(seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while (left := leftovers()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, f"processes left behind: {left}"


def kill_group_of(pid: int) -> None:
    """SIGKILL the process group of `pid`, or just `pid` when it shares this test's group."""
    try:
        group = os.getpgid(pid)
        if group == os.getpgrp():
            os.kill(pid, signal.SIGKILL)
        else:
            os.killpg(group, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def assert_invariants(root: Path, *, finished: bool = True) -> list[dict[str, Any]]:
    """Every record and state valid; state agrees with the records and the branch; the user's
    files intact; no temporary file left; nothing running; the loop finished or resumable."""
    store = MemoryStore(root)
    records: list[dict[str, Any]] = []
    for loop_id in store.loop_ids():
        state_data = json.loads(store.state_path(loop_id).read_text())
        assert schemas.errors(schemas.LOOP_STATE, state_data) == []
        state = store.read_state(loop_id)
        numbers = [n for n, _ in store.record_paths(loop_id)]
        mine = []
        for n, path in store.record_paths(loop_id):
            data = json.loads(path.read_text())
            assert schemas.errors(schemas.RECORD, data) == [], path
            assert data["iteration"] == n and data["loop_id"] == loop_id
            mine.append(data)
        status = store.effective_status(state)
        if finished:
            assert status in ("completed", "failed"), status
        assert status != "running", f"{loop_id} left running"
        # a record past state.iteration may exist only for an attempt killed before its
        # bookkeeping finished; a resumed loop rewrites it
        assert numbers[: state.iteration] == list(range(1, state.iteration + 1)), numbers
        if finished:
            assert numbers == list(range(1, state.iteration + 1)), numbers
            assert len(state.reward_history) == state.iteration
            assert [r["evaluator_output"].get("reward_signal") for r in mine] == [
                pytest.approx(r) for r in state.reward_history
            ]
        if state.git and finished:
            workdir = Path(state.git.worktree or root)
            for n, sha in state.git.commits.items():
                assert git(workdir, "cat-file", "-t", sha) == "commit"
                record = mine[int(n) - 1]
                if "git_commit" not in record["ralph"]:  # it changed nothing: HEAD holds it
                    assert "no changes: nothing to commit" in record["notes"]
                    continue
                assert record["ralph"]["git_commit"] == sha
            tracked = git(workdir, "ls-tree", "-r", "--name-only", str(state.git.branch))
            assert ".aiwg/" not in tracked
        records += mine
    for name, text in USER_FILES.items():
        assert (root / name).read_text() == text, f"user file {name} changed"
    temporary = [p for p in store.base.rglob("*.tmp")] if store.base.exists() else []
    assert not temporary, f"temporary files left: {temporary}"
    assert_no_leftovers()
    return records


@pytest.fixture(autouse=True)
def _tag() -> Iterator[str]:
    """Tags every process the case starts; a failing case must not leave them running."""
    tag = uuid.uuid4().hex
    os.environ["RELIABILITY_TAG"] = tag
    try:
        yield tag
    finally:
        for pid in leftovers(tag):
            kill_group_of(pid)
        del os.environ["RELIABILITY_TAG"]
