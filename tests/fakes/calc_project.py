"""A tiny git project (calc.py and its pytest tests) for the end-to-end loop tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def make_calc_repo(root: Path, *, calc: str, tests: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """calc.py and tests/test_calc.py committed on `main`, with a git identity in the env."""
    (root / "tests").mkdir(parents=True)
    (root / "calc.py").write_text(calc)
    (root / "tests" / "test_calc.py").write_text(tests)
    (root / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    (root / ".gitignore").write_text("__pycache__/\n")
    for role in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{role}_NAME", "t")
        monkeypatch.setenv(f"GIT_{role}_EMAIL", "t@example.invalid")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "start")
    return root
