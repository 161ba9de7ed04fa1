"""What git ignored when the loop started: never committed, never removed by a rollback, even
after the agent edits or deletes `.gitignore` (before: `.env` with its key and the user's notes
were committed on the loop branch, and the rollback that followed deleted them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ralph.ids import loop_branch
from ralph.workspace.git import GitWorkspace
from ralph.workspace.ignored import literal, rebase

from ..conftest import RunCli
from .conftest import VERSIONS, assert_invariants, git, heuristic, plan, write

SECRET = "OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz0123456789\n"
NOTES = b"my notes, not in git\n"
CACHE = b"\x00compiled, byte for byte\xff"


def prepared(project: Path) -> dict[str, bytes]:
    """calc.py at 'partial' (so a worse attempt is rolled back to the start); `.env` ignored;
    ignored files the user keeps: notes, a key, a compiled file in an ignored directory."""
    (project / "calc.py").write_text(VERSIONS["partial"])
    (project / ".gitignore").write_text("__pycache__/\n*.local\n.env\nbuild/\n")
    git(project, "commit", "-qam", "calc at partial; ignore .env and build/")
    files = {
        "notes.local": NOTES,
        ".env": SECRET.encode(),
        "build/out.bin": CACHE,
        "sub/deep/also.local": b"nested\n",
    }
    for name, data in files.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_bytes(data)
    return files


GITIGNORE = {
    "edited": {"write": {".gitignore": "__pycache__/\n", "calc.py": VERSIONS["zero"]}},
    "deleted": {"write": {"calc.py": VERSIONS["zero"]}, "delete": [".gitignore"]},
    "re-included": {
        "write": {
            ".gitignore": "__pycache__/\n*.local\n.env\nbuild/\n!.env\n!notes.local\n",
            "calc.py": VERSIONS["zero"],
        },
        "shell": "git add -f build/out.bin",
    },
}


@pytest.mark.parametrize("how", sorted(GITIGNORE))
def test_files_ignored_at_start_are_never_committed_and_survive_rollback(
    how: str, ralph: RunCli, project: Path
) -> None:
    files = prepared(project)
    # iteration 1 breaks the tests and the ignore rules: rolled back to the start; 2 fixes f
    plan(project, {"1": GITIGNORE[how], "default": write("full")})
    result = ralph(*heuristic(), cwd=project)
    assert result.code == 0, result.err
    summary = json.loads(result.out)
    assert summary["reward_history"][0] < 0.75, "iteration 1 was worse: rolled back"
    assert "restored the code of the starting point" in result.err
    branch = loop_branch(summary["loop_id"])
    committed = git(project, "log", "--format=", "--name-only", branch).split()
    for name in files:
        assert name not in committed, f"{name} was committed"
        assert (project / name).read_bytes() == files[name], f"{name} changed"
    assert "sk-proj-" not in git(project, "log", "-p", branch)
    assert ".gitignore" in committed  # the agent's change to it is an ordinary change
    assert_invariants(project)


def test_a_resumed_loop_keeps_the_rules_of_its_start(ralph: RunCli, project: Path) -> None:
    """The record of what was ignored lives in the git directory: `resume` reads it again."""
    files = prepared(project)
    plan(project, {"1": GITIGNORE["deleted"], "default": write("full")})
    first = ralph(*heuristic("--max-iterations", "1"), cwd=project)
    loop_id = json.loads(first.out)["loop_id"]
    assert not (project / ".gitignore").exists(), "no rollback yet: the deletion stands"
    resumed = ralph("resume", loop_id, "--max-iterations", "3", "--json", cwd=project)
    assert resumed.code == 0, resumed.err
    committed = git(project, "log", "--format=", "--name-only", loop_branch(loop_id)).split()
    for name, data in files.items():
        assert name not in committed and (project / name).read_bytes() == data
    assert_invariants(project)


def test_a_new_file_an_old_rule_ignores_stays_out(tmp_path: Path) -> None:
    """The rules are kept too, nested ones rebased: a compiled file the checks write after the
    agent deleted every `.gitignore` is no part of the attempt; a new source file is."""
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / ".gitignore").write_text("*.pyc\n")
    (root / "pkg" / ".gitignore").write_text("cache/\n/local.txt\n")
    (root / "pkg" / "a.py").write_text("x = 1\n")
    git(root.parent, "init", "-q", str(root))
    git(root, "add", "-A")
    git(root, "commit", "-qm", "init")
    workspace = GitWorkspace(root)
    workspace.start_loop("ralph-ignore-rules-00000001", allow_dirty=False)
    workspace.begin_iteration()
    (root / ".gitignore").unlink()
    (root / "pkg" / ".gitignore").unlink()
    for name in ("m.pyc", "pkg/deep/n.pyc", "pkg/cache/c", "pkg/local.txt", "pkg/b.py"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("new\n")
    created = sorted(f.path for f in workspace.changes().files if f.kind == "created")
    assert created == ["pkg/b.py"]
    sha = workspace.commit_iteration("iteration 1")
    assert sha is not None
    tracked = git(root, "ls-tree", "-r", "--name-only", sha).split()
    assert sorted(tracked) == ["pkg/a.py", "pkg/b.py"]


def test_rules_rebased_onto_the_top() -> None:
    assert rebase("*.pyc", "") == "*.pyc"
    assert rebase("cache/", "pkg") == "/pkg/**/cache/"
    assert rebase("/local.txt", "pkg") == "/pkg/local.txt"
    assert rebase("a/b", "p[1]") == "/p\\[1]/a/b"
    assert rebase("!keep.pyc", "pkg") == "!/pkg/**/keep.pyc"
    assert rebase("# a comment", "pkg") is None and rebase("   ", "") is None
    assert literal("we*ird name ") == "/we\\*ird name\\ "
    assert literal("build/") == "/build/"
