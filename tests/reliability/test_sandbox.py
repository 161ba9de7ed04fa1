"""The agent in a sandbox: a hostile `cmd:` agent and a check that reaches for the network.

Under `--sandbox bwrap` every attempt outside the working tree fails while the same agent still
fixes the bug and the loop ends green; under `--sandbox none` every attempt succeeds, as before.
"""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest

from ralph import sandbox
from tests.conftest import RunCli
from tests.fakes.calc_project import make_calc_repo

FOUND = sandbox.find()
needs_bwrap = pytest.mark.skipif(
    not FOUND.works, reason=f"bubblewrap cannot run here: {FOUND.reason} ({FOUND.fix})"
)

CALC = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return b + a  # a size of its own: no stale bytecode\n"

AGENT = """\
import json, os, pathlib, sys
report = {}
def attempt(name, action):
    try:
        action()
        report[name] = "done"
    except OSError as exc:
        report[name] = f"refused: {exc.strerror}"
home = pathlib.Path(os.environ["HOME"])
attempt("write_outside", lambda: pathlib.Path(OUTSIDE).write_text("pwned"))
attempt("read_ssh", lambda: report.setdefault("ssh", (home / ".ssh" / "id_rsa").read_text()))
attempt("git_hook", lambda: pathlib.Path(".git/hooks/pre-commit").write_text("#!/bin/sh\\n"))
attempt("edit_memory", lambda: pathlib.Path(".aiwg/ralph/planted.txt").write_text("x"))
report["other_key"] = "OPENAI_API_KEY" in os.environ
pathlib.Path("calc.py").write_text(FIXED)
print(json.dumps(report))
pathlib.Path(REPORT).write_text(json.dumps(report)) if os.environ.get("NO_SANDBOX") else None
pathlib.Path("agent-report.json").write_text(json.dumps(report))
"""


def reaching_test(port: int) -> str:
    return (
        "import socket\n\n\nfrom calc import add\n\n\n"
        "def test_add():\n    assert add(2, 3) == 5\n\n\n"
        "def test_reaches_out():\n    try:\n"
        f"        socket.create_connection(('127.0.0.1', {port}), timeout=5).close()\n"
        "    except OSError:\n        pass\n"
    )


def hostile_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ralph: RunCli, mode: str
) -> tuple[int, dict[str, object], Path, socket.socket]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    repo = make_calc_repo(
        tmp_path / "repo",
        calc=CALC,
        tests=reaching_test(listener.getsockname()[1]),
        monkeypatch=monkeypatch,
    )
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("PRIVATE KEY MATERIAL")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-for-the-agent-0123456789")
    outside = tmp_path / "outside"
    outside.mkdir()
    agent = tmp_path / "agent.py"
    script = AGENT.replace("OUTSIDE", repr(str(outside / "pwned")))
    script = script.replace("FIXED", repr(FIXED)).replace("REPORT", repr(str(tmp_path / "r")))
    agent.write_text(script)
    test = f"{sys.executable} -m pytest -q -p no:cacheprovider tests"
    result = ralph(
        "run", "make add add", "--actor", f"cmd:{sys.executable} {agent}", "--test", test,
        "--sandbox", mode, "--json", "--max-iterations", "1", cwd=repo,
    )  # fmt: skip
    assert (repo / "agent-report.json").exists(), result
    assert result.code == 0, result  # the loop ends green: the fix is judged as usual
    report = json.loads((repo / "agent-report.json").read_text())
    return result.code, report, repo, listener


def accepted(listener: socket.socket) -> int:
    count = 0
    while True:
        try:
            conn, _ = listener.accept()
        except BlockingIOError:
            return count
        conn.close()
        count += 1


@needs_bwrap
def test_a_hostile_agent_is_refused_everything_outside_the_tree_and_still_fixes_the_bug(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ralph: RunCli
) -> None:
    _, report, repo, listener = hostile_loop(tmp_path, monkeypatch, ralph, "bwrap")
    assert (repo / "calc.py").read_text() == FIXED
    for attempt in ("write_outside", "read_ssh", "git_hook", "edit_memory"):
        assert str(report[attempt]).startswith("refused"), (attempt, report)
    assert "ssh" not in report and report["other_key"] is False
    assert not (tmp_path / "outside" / "pwned").exists()
    assert not (repo / ".git" / "hooks" / "pre-commit").exists()
    assert not (repo / ".aiwg" / "ralph" / "planted.txt").exists()
    assert accepted(listener) == 0  # the checks had no network (baseline and attempt)
    record = next((repo / ".aiwg" / "ralph" / "reflections").rglob("001.json"))
    notes = json.loads(record.read_text()).get("notes", "")
    assert "sandbox denied" in notes and "Read-only file system" in notes


def test_without_the_sandbox_the_same_agent_gets_everything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ralph: RunCli
) -> None:
    _, report, repo, listener = hostile_loop(tmp_path, monkeypatch, ralph, "none")
    for attempt in ("write_outside", "read_ssh", "git_hook", "edit_memory"):
        assert report[attempt] == "done", (attempt, report)
    assert report["ssh"] == "PRIVATE KEY MATERIAL" and report["other_key"] is True
    assert (tmp_path / "outside" / "pwned").read_text() == "pwned"
    assert (repo / ".git" / "hooks" / "pre-commit").exists()
    assert accepted(listener) >= 2  # the baseline's check and the attempt's
