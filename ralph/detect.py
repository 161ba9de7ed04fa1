"""`ralph init`: find the project's pytest, mypy and ruff configuration and write config.yaml."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from ralph.config import CONFIG_FILE, CheckSpec
from ralph.errors import ConfigError
from ralph.store import MemoryStore, atomic_write_text

HEADER = """\
# ralph configuration: every key is described in the README, section Configuration.
# Precedence: defaults < this file < RALPH_* environment variables < command-line flags.
# Durations are seconds or 45s / 10m / 2h; money is US dollars.
"""

DEFAULTS = """\
actor: auto              # claude, codex, aider, gemini, opencode, cmd:"...", openai:MODEL, ...
max_iterations: 5
patience: 3              # stop after this many iterations without improvement
# reflector: heuristic   # or openai:MODEL, anthropic:MODEL, ollama:MODEL
# budget_usd: 5
# timeout: 2h            # whole loop
# iteration_timeout: 30m
# idle_timeout: 10m
"""


def _pyproject(root: Path) -> dict[str, Any]:
    path = root / "pyproject.toml"
    if not path.is_file():
        return {}
    try:
        return tomllib.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read TOML: {exc}") from None


def _ini_has(root: Path, name: str, section: str) -> bool:
    path = root / name
    try:
        return path.is_file() and f"[{section}]" in path.read_text("utf-8", errors="replace")
    except OSError:
        return False


def detect_checks(root: Path) -> list[CheckSpec]:
    """Checks whose configuration (or, for pytest, a tests folder) exists in `root`."""
    tool = _pyproject(root).get("tool", {})
    checks = []
    has_tests = (root / "tests").is_dir() or (root / "test").is_dir()
    if (
        "pytest" in tool
        or (root / "pytest.ini").is_file()
        or (root / "conftest.py").is_file()
        or _ini_has(root, "setup.cfg", "tool:pytest")
        or _ini_has(root, "tox.ini", "pytest")
        or has_tests
    ):
        checks.append(CheckSpec("pytest", "pytest", "pytest"))
    if (
        "mypy" in tool
        or (root / "mypy.ini").is_file()
        or (root / ".mypy.ini").is_file()
        or _ini_has(root, "setup.cfg", "mypy")
    ):
        files = tool.get("mypy", {}).get("files")
        checks.append(CheckSpec("mypy", "mypy" if files else "mypy .", "mypy"))
    if "ruff" in tool or (root / "ruff.toml").is_file() or (root / ".ruff.toml").is_file():
        checks.append(CheckSpec("ruff", "ruff check .", "ruff"))
    return checks


def render_config(checks: list[CheckSpec]) -> str:
    import yaml

    body = [{"name": c.name, "command": c.command, "parser": c.parser} for c in checks]
    lines = yaml.safe_dump({"checks": body}, sort_keys=False) if body else "checks: []\n"
    return HEADER + "\n" + lines + "\n" + DEFAULTS


def write_config(store: MemoryStore, *, force: bool) -> tuple[Path, list[CheckSpec]]:
    path = store.root / CONFIG_FILE
    if path.exists() and not force:
        raise ConfigError(f"{path} already exists", hint="use `ralph init --force` to overwrite")
    checks = detect_checks(store.root)
    store.ensure()
    atomic_write_text(path, render_config(checks))
    return path, checks
