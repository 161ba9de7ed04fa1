"""Worktree parity: a package that imports a git-ignored generated module (`_version.py`, written
at install time) collects in the user's checkout but not in a fresh worktree. `--worktree` and
`batch` stop before any agent call and name the file and both fixes; `.worktreeinclude` and
`worktree_setup` are those fixes."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest
import yaml

from ralph.config import CheckSpec
from ralph.errors import PreflightError
from ralph.loop.parity import check_parity_of
from ralph.memory.store import MemoryStore
from ralph.workspace.parity import (
    copy_included,
    editable_install_warning,
    included_files,
    missing_ignored,
    run_setup,
)
from ralph.workspace.worktree import add_worktree

from ..conftest import RunCli
from ..fakes.calc_project import git

VERSION_FILE = "pkg/_version.py"
PACKAGE = "from pkg._version import VERSION\n\n\ndef add(a, b):\n    return a - b\n"
TESTS = (
    "from pkg import VERSION, add\n\n\n"
    "def test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_version():\n    assert VERSION\n"
)
# the agent: leaves a mark (it was called), then fixes the bug
AGENT = """
import os
from pathlib import Path
Path(os.environ["AGENT_MARK"]).write_text("called")
init = Path("pkg/__init__.py")
init.write_text(init.read_text().replace("a - b", "a + b"))
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The package committed, `pkg/_version.py` ignored and present (as after an install)."""
    root = tmp_path / "project"
    (root / "pkg").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "pkg" / "__init__.py").write_text(PACKAGE)
    (root / "tests" / "test_pkg.py").write_text(TESTS)
    (root / ".gitignore").write_text("__pycache__/\n.pytest_cache/\npkg/_version.py\n")
    for role in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{role}_NAME", "t")
        monkeypatch.setenv(f"GIT_{role}_EMAIL", "t@example.invalid")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "start")
    (root / VERSION_FILE).write_text('VERSION = "1.0"\n')  # the install wrote it
    (tmp_path / "agent.py").write_text(AGENT)
    monkeypatch.setenv("AGENT_MARK", str(tmp_path / "agent-called"))
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    return root


def run_args(*extra: str) -> list[str]:
    agent = Path(os.environ["AGENT_MARK"]).parent / "agent.py"
    test = f"{sys.executable} -m pytest -q -p no:cacheprovider tests"
    return [
        "run",
        "fix add",
        "--actor",
        f"cmd:{sys.executable} {agent}",
        "--test",
        test,
        "--reflector",
        "heuristic",
        "--json",
        *extra,
    ]


def agent_called() -> bool:
    return Path(os.environ["AGENT_MARK"]).exists()


def worktrees(root: Path) -> list[str]:
    listing = git(root, "worktree", "list", "--porcelain")
    return [line for line in listing.splitlines() if line.startswith("worktree ")]


def assert_both_fixes_named(err: str) -> None:
    assert "ModuleNotFoundError" in err and "pkg._version" in err, err
    assert VERSION_FILE in err, err
    assert ".worktreeinclude" in err and "worktree_setup" in err, err
    # the setup it proposes copies from the checkout; an editable install would re-point the
    # user's environment at the worktree (python-dateutil: the checkout's imports broke)
    assert f'cp "$RALPH_CHECKOUT"/{VERSION_FILE} {VERSION_FILE}' in err, err
    assert "pip install -e" not in err, err
    assert "Traceback" not in err


def test_a_worktree_whose_tests_cannot_import_stops_before_the_agent(
    ralph: RunCli, project: Path
) -> None:
    result = ralph(*run_args("--worktree"), cwd=project)
    assert result.code == 2, result.err
    assert_both_fixes_named(result.err)
    assert not agent_called()
    assert len(worktrees(project)) == 1  # the fresh worktree went away again
    assert MemoryStore(project).loop_ids() == []
    assert git(project, "status", "--porcelain") == ""  # nothing of the checkout changed
    assert not (project / ".pytest_cache").exists()  # collecting there wrote nothing
    assert not (project / "pkg" / "__pycache__").exists()


def test_the_preflight_reads_coloured_pytest_output(ralph: RunCli, project: Path) -> None:
    """`--color=yes` in the project's addopts (humanize's trait): the collection errors are
    still read, so the worktree is still refused before the agent."""
    (project / "pytest.ini").write_text("[pytest]\naddopts = --color=yes\n")
    git(project, "add", "pytest.ini")
    git(project, "commit", "-q", "-m", "colour")
    result = ralph(*run_args("--worktree"), cwd=project)
    assert result.code == 2, result.err
    assert_both_fixes_named(result.err)
    assert not agent_called()


def test_worktreeinclude_copies_the_ignored_file_and_the_loop_goes_green(
    ralph: RunCli, project: Path
) -> None:
    (project / ".worktreeinclude").write_text("# generated at install\npkg/_version.py\n")
    (project / VERSION_FILE).chmod(0o640)
    result = ralph(*run_args("--worktree"), cwd=project)
    assert result.code == 0, result.err
    assert "copied from .worktreeinclude: pkg/_version.py" in result.err
    loop_id = json.loads(result.out)["loop_id"]
    state = MemoryStore(project).read_state(loop_id)
    worktree = Path(str(state.git and state.git.worktree))
    copied = worktree / VERSION_FILE
    assert copied.read_text() == 'VERSION = "1.0"\n'
    assert stat.S_IMODE(copied.stat().st_mode) == 0o640
    assert "_version" not in git(worktree, "show", "--stat", "HEAD")  # never committed
    assert (project / "pkg" / "__init__.py").read_text() == PACKAGE


def test_worktree_setup_makes_the_file_and_the_loop_goes_green(
    ralph: RunCli, project: Path
) -> None:
    config = project / ".aiwg" / "ralph" / "config.yaml"
    config.parent.mkdir(parents=True)
    command = "echo generating; printf 'VERSION = \"2\"\\n' > pkg/_version.py"
    config.write_text(yaml.safe_dump({"worktree_setup": command}))
    result = ralph(*run_args("--worktree"), cwd=project)
    assert result.code == 0, result.err
    assert "generating" in result.err  # its output is shown
    loop_id = json.loads(result.out)["loop_id"]
    state = MemoryStore(project).read_state(loop_id)
    assert (Path(str(state.git and state.git.worktree)) / VERSION_FILE).is_file()
    assert (project / VERSION_FILE).read_text() == 'VERSION = "1.0"\n'


def test_the_proposed_setup_copies_from_the_checkout_and_the_loop_goes_green(
    ralph: RunCli, project: Path
) -> None:
    config = project / ".aiwg" / "ralph" / "config.yaml"
    config.parent.mkdir(parents=True)
    command = f'cp "$RALPH_CHECKOUT"/{VERSION_FILE} {VERSION_FILE}'
    config.write_text(yaml.safe_dump({"worktree_setup": command}))
    result = ralph(*run_args("--worktree"), cwd=project)
    assert result.code == 0, result.err
    assert "warning" not in result.err


def test_an_editable_install_as_setup_is_warned_about() -> None:
    for command in (
        "pip install -e .",
        "uv pip install --editable=.",
        "python -m pip install -q -e .",
    ):
        warning = editable_install_warning(command)
        assert warning is not None and "environment your checkout uses" in warning, command
    for command in ("pip install -r requirements.txt", "make version", "cp a b && pip list"):
        assert editable_install_warning(command) is None, command


def test_a_failing_worktree_setup_is_one_line_naming_the_command_and_its_output(
    ralph: RunCli, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RALPH_WORKTREE_SETUP", "echo cannot build the version file; exit 3")
    result = ralph(*run_args("--worktree"), cwd=project)
    assert result.code == 2, result.err
    error = next(line for line in result.err.splitlines() if line.startswith("ralph: error"))
    assert "echo cannot build the version file; exit 3" in error
    assert "exit code 3" in error and error.endswith("cannot build the version file")
    assert not agent_called()
    assert len(worktrees(project)) == 1


def test_a_batch_stops_once_before_any_loop_starts_and_runs_green_with_the_include_file(
    ralph: RunCli, project: Path, tmp_path: Path
) -> None:
    agent = tmp_path / "agent.py"
    test = f"{sys.executable} -m pytest -q -p no:cacheprovider tests"
    tasks = tmp_path / "tasks.yaml"
    defaults = {"actor": f"cmd:{sys.executable} {agent}", "test": test}
    tasks.write_text(yaml.safe_dump({"defaults": defaults, "tasks": ["fix add", "fix add again"]}))
    result = ralph("batch", str(tasks), "--jobs", "2", cwd=project)
    assert result.code == 2, result.err
    assert_both_fixes_named(result.err)
    assert not agent_called()
    assert len(worktrees(project)) == 1
    assert MemoryStore(project).loop_ids() == []
    assert not (project / ".aiwg" / "ralph" / "loops" / "batches").exists()  # nothing planned
    (project / ".worktreeinclude").write_text("pkg/_version.py\n")
    result = ralph("batch", str(tasks), "--jobs", "2", "--json", cwd=project)
    assert result.code == 0, result.err
    loops = json.loads(result.out)["loops"]
    assert [entry["status"] for entry in loops] == ["completed", "completed"]
    for entry in loops:
        assert (Path(entry["worktree"]) / VERSION_FILE).is_file()


def test_a_bench_stops_once_before_any_run_starts(
    ralph: RunCli, project: Path, tmp_path: Path
) -> None:
    agent = tmp_path / "agent.py"
    test = f"{sys.executable} -m pytest -q -p no:cacheprovider tests"
    tasks = tmp_path / "tasks.yaml"
    defaults = {"actor": f"cmd:{sys.executable} {agent}", "test": test}
    tasks.write_text(yaml.safe_dump({"defaults": defaults, "tasks": ["fix add"]}))
    result = ralph("bench", str(tasks), "--repeats", "1", cwd=project)
    assert result.code == 2, result.err
    assert_both_fixes_named(result.err)
    assert not agent_called()
    assert MemoryStore(project).loop_ids() == []


# --- the parts --------------------------------------------------------------------------------


def test_only_ignored_files_the_include_file_names_are_copied(project: Path) -> None:
    (project / ".worktreeinclude").write_text("pkg/_version.py\nnotes.txt\ntests/\n.aiwg/\n")
    (project / "notes.txt").write_text("untracked, not ignored\n")  # never copied
    (project / ".gitignore").write_text((project / ".gitignore").read_text() + ".aiwg/\n")
    (project / ".aiwg" / "ralph").mkdir(parents=True)  # ralph's memory stays where it is
    (project / ".aiwg" / "ralph" / "state.json").write_text("{}")
    assert included_files(project) == [VERSION_FILE]  # tests/ is tracked: never copied
    assert included_files(project / "pkg") == []  # the file lives at the top only


def test_copies_keep_symlinks_as_links(project: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (project / "pkg" / "link.py").symlink_to("_version.py")
    (project / "elsewhere").symlink_to(outside)
    (project / ".gitignore").write_text(
        (project / ".gitignore").read_text() + "pkg/link.py\nelsewhere\n"
    )
    (project / ".worktreeinclude").write_text("pkg/\nelsewhere\n")
    workdir = add_worktree(project, "ralph-copy-00000001")
    done = copy_included(project, workdir)
    assert sorted(done.copied) == ["elsewhere", "pkg/_version.py", "pkg/link.py"]
    assert (workdir / VERSION_FILE).read_text() == 'VERSION = "1.0"\n'
    assert os.readlink(workdir / "pkg" / "link.py") == "_version.py"
    assert os.readlink(workdir / "elsewhere") == str(outside)  # the link, not what it holds


def test_a_copy_never_writes_through_a_symlink_out_of_the_worktree(
    project: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (project / "data").symlink_to(outside)  # committed as a link to a folder outside
    git(project, "add", "data")
    git(project, "commit", "-q", "-m", "data elsewhere")
    (project / "data").unlink()  # in the checkout a real folder with an ignored file
    (project / "data").mkdir()
    (project / "data" / "local.cfg").write_text("mine\n")
    (project / ".gitignore").write_text((project / ".gitignore").read_text() + "*.cfg\n")
    (project / ".worktreeinclude").write_text("*.cfg\n")
    workdir = add_worktree(project, "ralph-escape-00000001")
    done = copy_included(project, workdir)
    assert done.copied == []
    assert done.skipped == ["data/local.cfg (outside the repository)"]
    assert list(outside.iterdir()) == []


def test_missing_ignored_names_what_the_worktree_lacks_without_caches(project: Path) -> None:
    for cache in ("__pycache__/x.pyc", ".venv/bin/python", "pkg.egg-info/PKG-INFO"):
        (project / cache).parent.mkdir(parents=True, exist_ok=True)
        (project / cache).write_text("")
    (project / ".gitignore").write_text(
        (project / ".gitignore").read_text() + ".venv/\n*.egg-info/\n"
    )
    workdir = add_worktree(project, "ralph-missing-00000001")
    assert missing_ignored(project, workdir) == [VERSION_FILE]
    (workdir / VERSION_FILE).write_text("")
    assert missing_ignored(project, workdir) == []


def test_a_setup_past_its_time_limit_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PreflightError, match=r"timed out after 0\.5s"):
        run_setup("sleep 30", tmp_path, tmp_path, timeout=0.5)


def test_the_preflight_collects_nothing_when_the_worktree_lacks_no_ignored_file(
    project: Path, tmp_path: Path
) -> None:
    mark = tmp_path / "collected"
    shim = tmp_path / "bin" / "pytest"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\necho "$@" >> {mark}\n')
    shim.chmod(0o755)
    spec = CheckSpec("tests", f"{shim} -q tests", "pytest")
    workdir = add_worktree(project, "ralph-free-00000001")
    (project / ".worktreeinclude").write_text("pkg/_version.py\n")
    copy_included(project, workdir)
    check_parity_of([spec], project, workdir, dict(os.environ), None)
    assert not mark.exists()
    (workdir / VERSION_FILE).unlink()
    check_parity_of([spec], project, workdir, dict(os.environ), None)
    assert mark.read_text() == "--collect-only -p no:cacheprovider -q tests\n"
