"""Nothing outlives an attempt: a daemon the agent leaves behind cannot swap the code while the
checks run, with the sandbox (its PID namespace) or without (ralph sweeps what the attempt
left, found by its mark or adopted as an orphan).

The agent leaves the bug in place and starts a daemon (`setsid nohup`, its environment
scrubbed, so no variable of ralph's marks it) that writes the fixed code whenever the checks'
pytest runs: the checks would pass while the tree the loop commits is still wrong. Before,
the daemon lived on under both modes and the loop ended green.
"""

from __future__ import annotations

import os
import signal
import sys
import uuid
from pathlib import Path

import pytest

from ralph import sandbox
from tests.conftest import RunCli
from tests.fakes.calc_project import make_calc_repo

FOUND = sandbox.find()
CALC = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return b + a  # a size of its own: no stale bytecode\n"
TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"

DAEMON = """
import os, pathlib, sys, time
tree, token, fixed = sys.argv[1], sys.argv[2], sys.argv[3]
while True:
    for entry in pathlib.Path('/proc').iterdir():
        try:
            if entry.name.isdigit() and token.encode() in (entry / 'cmdline').read_bytes():
                if str(os.getpid()) != entry.name:
                    pathlib.Path(tree, 'calc.py').write_text(fixed)
        except OSError:
            pass
    time.sleep(0.005)
"""

AGENT = """
import os, subprocess, sys
daemon = [sys.executable, '-c', DAEMON, os.getcwd(), TOKEN, FIXED]
subprocess.Popen(['setsid', 'nohup', 'env', '-i', *daemon], stdin=subprocess.DEVNULL,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
print('the fix is in')
"""


def survivors(token: str) -> list[int]:
    """The daemons still running: their command line holds the test's token."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                line = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if token.encode() in line and b"while True" in line:
                found.append(int(entry.name))
    return found


@pytest.mark.parametrize("mode", ["bwrap", "none"])
def test_a_daemon_the_agent_left_cannot_swap_the_code_while_the_checks_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ralph: RunCli, mode: str
) -> None:
    if mode == "bwrap" and not FOUND.works:
        pytest.skip(f"bubblewrap cannot run here: {FOUND.reason} ({FOUND.fix})")
    repo = make_calc_repo(tmp_path / "repo", calc=CALC, tests=TESTS, monkeypatch=monkeypatch)
    token = f"zz{uuid.uuid4().hex}"
    agent = tmp_path / "agent.py"
    script = AGENT.replace("DAEMON", repr(DAEMON)).replace("TOKEN", repr(token))
    agent.write_text(script.replace("FIXED", repr(FIXED)))
    test = f"{sys.executable} -m pytest -q -p no:cacheprovider tests -k 'not {token}'"
    try:
        result = ralph(
            "run", "make add add", "--actor", f"cmd:{sys.executable} {agent}", "--test", test,
            "--sandbox", mode, "--json", "--max-iterations", "1", cwd=repo,
        )  # fmt: skip
        left = survivors(token)
    finally:
        for pid in survivors(token):
            os.kill(pid, signal.SIGKILL)
    assert left == [], f"the daemon outlived the attempt: {left}"
    assert result.code != 0, result  # the checks saw the bug the agent left
    assert (repo / "calc.py").read_text() == CALC
    if mode == "none":
        record = next((repo / ".aiwg" / "ralph" / "reflections").rglob("001.json"))
        assert "it left running" in record.read_text()  # named in the record's notes
