"""ralph's git runs no fsmonitor the tree's git settings name: an agent that sets
`core.fsmonitor` (without a sandbox it can) gets no command run by ralph's status or add."""

from __future__ import annotations

from pathlib import Path

import pytest

from ralph.workspace.git import Git

from ..fakes.calc_project import git, make_calc_repo


def test_ralphs_git_runs_no_fsmonitor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = make_calc_repo(tmp_path / "repo", calc="x = 1\n", tests="", monkeypatch=monkeypatch)
    marker = tmp_path / "ran"
    git(repo, "config", "core.fsmonitor", f"touch {marker}; false")
    (repo / "calc.py").write_text("x = 2\n")
    ralph_git = Git(repo)
    ralph_git.run("status", "--porcelain")
    ralph_git.run("add", "-A")
    assert not marker.exists(), "ralph's git ran the tree's fsmonitor"
