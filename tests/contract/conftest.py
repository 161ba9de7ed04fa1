"""Contract tests: the released agent CLIs, at the versions in `ralph/actors/verified.py`,
driven by ralph against loopback fakes of their providers' wire APIs.

They run on their own (`pytest tests/contract`, a step of `.ci/run`), not in the main suite:
each starts real Node.js programs. `.ci/agent-clis` installs the CLIs into a cache folder
(`RALPH_AGENT_CLIS`, default `~/.cache/ralph-agent-clis`); where one is missing or at another
version, its tests are skipped with a line saying why.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ralph.actors.verified import VERIFIED


def clis_folder() -> Path:
    cache = os.environ.get("RALPH_AGENT_CLIS") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ralph-agent-clis"
    )
    return Path(cache) / "node_modules" / ".bin"


# read at collection: each test's isolation (tests/conftest.py) moves XDG_CACHE_HOME to a
# temporary folder and drops RALPH_* variables, where no CLI is installed
FOLDER = clis_folder()


def released_cli(preset: str) -> Path:
    """The pinned released CLI of a preset, or skip the test saying why it cannot run."""
    package, version = VERIFIED[preset]
    binary = FOLDER / preset
    if not binary.exists():
        pytest.skip(f"{package}@{version} is not installed: run .ci/agent-clis")
    if shutil.which("node") is None:
        pytest.skip("node is not installed")
    said = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, timeout=60, check=False
    ).stdout
    if version not in said:
        pytest.skip(f"{binary} is not {package}@{version} ({said.strip()!r}): run .ci/agent-clis")
    return binary
