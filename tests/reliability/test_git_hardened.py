"""ralph's own git commands never run what an agent planted in the repository's configuration:
a `core.fsmonitor` program, a `core.hooksPath` full of hooks, a filter driver's clean and
smudge commands (named by a new `.gitattributes`). Each would run after the attempt, outside
its sandbox and timeouts, with ralph's environment."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.conftest import RunCli

from .test_settings_fixed import IDENTITY, project

HOOKS = ("pre-commit", "post-commit", "post-checkout", "reference-transaction", "post-index-change")


def planting_agent(tmp_path: Path, marks: Path) -> str:
    """A `cmd:` agent that fixes calc.py and plants a program that leaves a mark in `marks`
    each time git runs it: as fsmonitor, as every hook, as a filter's clean and smudge."""
    spy = tmp_path / "spy.sh"
    spy.write_text(f'#!/bin/sh\ntouch "{marks}/$(basename "$0")-$$"\ncat\n')
    spy.chmod(0o755)
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    for name in HOOKS:
        (hooks / name).symlink_to(spy)
    script = tmp_path / "plant.sh"
    script.write_text(
        "#!/bin/sh\nset -e\n"
        f"git config core.fsmonitor {spy}\n"
        f"git config core.hooksPath {hooks}\n"
        f"git config filter.spy.clean {spy}\n"
        f"git config filter.spy.smudge {spy}\n"
        "echo '* filter=spy' > .gitattributes\n"
        "echo 'VALUE = 2' > calc.py\n"
        "echo planted\n"
    )
    script.chmod(0o755)
    return f"cmd:{script}"


def test_ralphs_git_runs_no_fsmonitor_hook_or_filter_the_agent_planted(
    ralph: RunCli, tmp_path: Path
) -> None:
    root = project(tmp_path)
    marks = tmp_path / "marks"
    marks.mkdir()
    agent = planting_agent(tmp_path, marks)
    result = ralph("run", "make VALUE 2", "-a", agent, "-n", "1", "--sandbox", "none", cwd=root)
    assert result.code == 0, result.err
    assert sorted(p.name.rsplit("-", 1)[0] for p in marks.iterdir()) == []
    # the loop's commit holds the file as the agent wrote it, not through the filter
    branch = subprocess.run(
        ["git", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false",
         "for-each-ref", "--format=%(refname)", "refs/heads/ralph/"],
        cwd=root, capture_output=True, text=True, check=True,
        env={**os.environ, **IDENTITY},
    ).stdout.split()  # fmt: skip
    assert branch, "the loop made no branch"
