"""Whether a check can run here: its program on PATH, and the Python module a `python -m`
check names importable by that Python. The suite's preflight refuses a loop on the first
missing one; `ralph init` and `ralph doctor` run the others and list these."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from ralph import process
from ralph.evaluators.base import Check
from ralph.process import SHELL_WORDS

PACKAGES = {"pytest": "pytest", "py.test": "pytest", "mypy": "mypy", "dmypy": "mypy"}
DROP_HINT = (
    "or drop the check: name only the checks you want with --check NAME|CMD, "
    "or remove it from `checks:` in .aiwg/ralph/config.yaml"
)


def runnable_checks(
    checks: Sequence[Check],
) -> tuple[list[Check], list[tuple[Check, tuple[str, str]]]]:
    """The checks whose tool is installed, and the others with what is missing (`missing_tool`):
    `ralph init` and `ralph doctor` run the first and list the second."""
    runnable: list[Check] = []
    missing: list[tuple[Check, tuple[str, str]]] = []
    for check in checks:
        problem = missing_tool(check)
        if problem is None:
            runnable.append(check)
        else:
            missing.append((check, problem))
    return runnable, missing


def missing_tool(check: Check) -> tuple[str, str] | None:
    """(message, package to install) when the check's program or Python module is missing."""
    spec = check.spec
    tool = check.tool()
    if tool in SHELL_WORDS or tool == "sh":
        return None
    name = Path(tool).name
    package = PACKAGES.get(name, name)
    resolved = process.which(tool)
    if resolved is None:
        return (
            f"check {spec.name!r} needs `{tool}`, which is not installed (not found on PATH)",
            package,
        )
    module = _python_module(spec.command, name)
    if module is not None and not _has_module(resolved, module):
        return (
            f"check {spec.name!r} needs the Python module `{module}`, "
            f"which is not installed for {resolved}",
            PACKAGES.get(module, module),
        )
    return None


def _python_module(command: str, program: str) -> str | None:
    """`mod` in `python -m mod ...`, the form that fails late when the module is missing."""
    if not program.startswith("python"):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    for i, word in enumerate(words[:-1]):
        if word == "-m":
            return words[i + 1].split(".")[0]
    return None


def _has_module(python: str, module: str) -> bool:
    import importlib.util

    if os.path.realpath(python) == os.path.realpath(sys.executable):
        return importlib.util.find_spec(module) is not None
    probe = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    res = process.run([python, "-c", probe], cwd=Path.cwd(), wall_timeout=60)
    return res.exit_code == 0
