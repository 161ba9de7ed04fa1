"""`--notify`: the end of a loop is announced by the configured command or a desktop notifier."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import RunCli


def project(tmp_path: Path) -> Path:
    """A git repository whose one test fails until calc.py says 2."""
    root = tmp_path / "proj"
    root.mkdir()
    (root / "calc.py").write_text("VALUE = 1\n")
    (root / "test_calc.py").write_text(
        "from calc import VALUE\n\ndef test_value():\n    assert VALUE == 2\n"
    )
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "init"]):
        subprocess.run(["git", *args], cwd=root, check=True, env={**os.environ, **IDENTITY})
    return root


IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}
FIX = f"cmd:{sys.executable} -c \"open('calc.py', 'w').write('VALUE = 2\\n')\""
TEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"


def test_notify_runs_the_configured_command_with_the_outcome(
    ralph: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = project(tmp_path)
    seen = tmp_path / "seen.json"
    dump = (
        "import json, os, sys; json.dump({k: v for k, v in os.environ.items()"
        " if k.startswith('RALPH_NOTIFY')}, open(sys.argv[1], 'w'))"
    )
    monkeypatch.setenv("RALPH_NOTIFY_COMMAND", f'{sys.executable} -c "{dump}" {seen}')
    result = ralph("run", "make VALUE 2", "-a", FIX, "-t", TEST, "--notify", "--json", cwd=root)
    assert result.code == 0, result.err
    loop_id = json.loads(result.out)["loop_id"]
    told = json.loads(seen.read_text())
    assert told["RALPH_NOTIFY_STATUS"] == "completed"
    assert told["RALPH_NOTIFY_MESSAGE"] == f"{loop_id} completed (success), best reward 1.00"


def test_notify_without_a_command_uses_the_desktop_notifier(
    ralph: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = project(tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shown = tmp_path / "shown.txt"
    fake = bin_dir / "notify-send"
    fake.write_text(f'#!/bin/sh\nprintf \'%s|%s\' "$1" "$2" > {shown}\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("RALPH_NOTIFY", "1")
    result = ralph("run", "make VALUE 2", "-a", FIX, "-t", TEST, "--json", cwd=root)
    assert result.code == 0, result.err
    title, text = shown.read_text().split("|")
    assert title == "ralph" and text.endswith("completed (success), best reward 1.00")


def test_no_notification_unless_asked(
    ralph: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = project(tmp_path)
    seen = tmp_path / "seen.txt"
    monkeypatch.setenv("RALPH_NOTIFY_COMMAND", f"touch {seen}")
    result = ralph("run", "make VALUE 2", "-a", FIX, "-t", TEST, "--json", cwd=root)
    assert result.code == 0, result.err
    assert not seen.exists()
