"""Settings: defaults < .aiwg/ralph/config.yaml < RALPH_* environment < command-line flags.

Every source is validated against `schemas/config.schema.json` before it is merged, so a typo
in any of them is named (with the closest valid key) instead of silently ignored.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ralph import schemas
from ralph.errors import ConfigError

CONFIG_FILE = Path(".aiwg/ralph/config.yaml")
CHECK_PARSERS = ("pytest", "mypy", "ruff", "shell")
DURATION_KEYS = ("timeout", "iteration_timeout", "idle_timeout", "check_timeout")
BOOLEAN_KEYS = ("no_git", "allow_dirty", "no_rollback", "worktree", "json", "quiet")


@dataclass
class CheckSpec:
    """One check: a command and the parser that reads its output."""

    name: str
    command: str
    parser: str = "shell"
    weight: float | None = None
    timeout: float | None = None


@dataclass
class Settings:
    actor: str = "auto"
    actor_args: list[str] = field(default_factory=list)
    reflector: str | None = None
    test: str | None = None
    checks: list[CheckSpec] = field(default_factory=list)
    weights: dict[str, float] = field(default_factory=dict)
    max_iterations: int = 5
    omega: int | None = None
    window_policy: str = "recency"
    memory_tokens: int = 2000
    patience: int = 3
    lessons: int = 3
    budget_usd: float | None = None
    max_tokens: int | None = None
    timeout: float | None = None
    iteration_timeout: float | None = 1800.0
    idle_timeout: float | None = 600.0
    check_timeout: float | None = 900.0
    output_cap: int = 200_000
    no_git: bool = False
    allow_dirty: bool = False
    no_rollback: bool = False
    worktree: bool = False
    json: bool = False
    quiet: bool = False

    def all_checks(self) -> list[CheckSpec]:
        """`test` (the `--test` shortcut) first, then the configured checks."""
        checks = list(self.checks)
        if self.test:
            checks = [c for c in checks if c.name != "tests"]
            checks.insert(0, CheckSpec("tests", self.test, infer_parser(self.test)))
        return checks

    def snapshot(self) -> dict[str, Any]:
        """JSON-ready copy for state.json, so `ralph resume` runs with the same settings."""
        return dataclasses.asdict(self)


KEYS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Settings))


def parse_duration(value: Any, key: str = "duration") -> float | None:
    """Plain seconds, or `45s`, `10m`, `2h`; None stays None (no limit)."""
    if value is None or isinstance(value, int | float):
        return None if value is None else float(value)
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", str(value))
    if not match:
        raise ConfigError(
            f"{key}: cannot read duration {value!r}", hint="use seconds, or 45s, 10m, 2h"
        )
    return float(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[match.group(2)]


def infer_parser(command: str) -> str:
    """Which parser reads a command's output, from the tool it starts."""
    words = command.split()
    for word in words[:3]:
        name = Path(word).name
        if name in ("pytest", "py.test"):
            return "pytest"
        if name in ("mypy", "dmypy"):
            return "mypy"
        if name == "ruff":
            return "ruff"
    if "-m" in words:
        module = words[words.index("-m") + 1] if words.index("-m") + 1 < len(words) else ""
        if module in ("pytest", "mypy", "ruff"):
            return module
    return "shell"


BUILTIN_COMMANDS = {"pytest": "pytest", "mypy": "mypy .", "ruff": "ruff check ."}


def parse_check(item: str | dict[str, Any]) -> CheckSpec:
    """`pytest`, `mypy`, `ruff`, any shell command, or a mapping with name/command/parser."""
    if isinstance(item, str):
        if item in BUILTIN_COMMANDS:
            return CheckSpec(item, BUILTIN_COMMANDS[item], item)
        parser = infer_parser(item)
        name = parser if parser != "shell" else _check_name(item)
        return CheckSpec(name, item, parser)
    name = item["name"]
    command = item.get("command") or BUILTIN_COMMANDS.get(name)
    if not command:
        raise ConfigError(f"check {name!r} has no command", hint="add `command:` to the check")
    return CheckSpec(
        name=name,
        command=command,
        parser=item.get("parser") or infer_parser(command),
        weight=item.get("weight"),
        timeout=parse_duration(item.get("timeout"), f"checks.{name}.timeout"),
    )


def _check_name(command: str) -> str:
    words = command.split()
    return Path(words[0]).name if words else "shell"


def _validate(source: str, data: dict[str, Any]) -> None:
    for key in data:
        if key not in KEYS:
            import difflib

            close = difflib.get_close_matches(key, KEYS, n=1)
            raise ConfigError(
                f"{source}: unknown setting {key!r}",
                hint=f"did you mean {close[0]!r}?" if close else f"valid: {', '.join(KEYS)}",
            )
    problems = schemas.errors(schemas.CONFIG, data)
    if problems:
        raise ConfigError(f"{source}: {problems[0]}", hint="see README section Configuration")


def read_file(path: Path, *, validate: bool = True) -> dict[str, Any]:
    """The YAML config file, validated; a missing file is an empty config."""
    import yaml

    if not path.exists():
        return {}
    try:
        data = yaml.safe_load(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"{path}: cannot read YAML: {first}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of settings, got {type(data).__name__}")
    if validate:
        _validate(str(path), data)
    return data


def read_env(
    environ: dict[str, str] | os._Environ[str], *, validate: bool = True
) -> dict[str, Any]:
    """`RALPH_<KEY>` variables, typed by the setting they name; unknown RALPH_* are errors."""
    import yaml

    data: dict[str, Any] = {}
    for name, raw in environ.items():
        if not name.startswith("RALPH_") or name in RUNTIME_VARIABLES:
            continue
        key = name.removeprefix("RALPH_").lower()
        if key == "check":
            key = "checks"
        try:
            value = yaml.safe_load(raw) if raw.strip() else None
        except yaml.YAMLError:
            value = raw
        if key in ("actor", "reflector", "test") or (key in DURATION_KEYS and value is not None):
            value = raw
        if key == "checks" and not isinstance(value, list):
            value = [raw]
        if key == "actor_args" and isinstance(value, str):
            value = value.split()
        if key in BOOLEAN_KEYS and raw.strip().lower() in ("1", "0", "y", "n"):
            value = raw.strip().lower() in ("1", "y")  # CI's usual RALPH_QUIET=1
        data[key] = value
    if validate:
        _validate("environment (RALPH_*)", data)
    return data


# Variables ralph sets for actors; they are not settings.
RUNTIME_VARIABLES = frozenset(
    {"RALPH_PROMPT_FILE", "RALPH_LOOP_ID", "RALPH_ITERATION", "RALPH_WORKDIR", "RALPH_DEBUG"}
    | {"RALPH_OWNER_PID"}  # set by process.py on everything ralph starts
)


def load(
    root: Path,
    flags: dict[str, Any] | None = None,
    environ: dict[str, str] | os._Environ[str] | None = None,
    *,
    validate: bool = True,
) -> Settings:
    """Merge every source, later ones winning; flags equal to None were not given.

    `validate=False` skips the schema (and its ~80 ms jsonschema import): only for a guess that
    is checked against a validated load before it counts (`ralph check`'s early start).
    """
    merged: dict[str, Any] = {}
    merged.update(read_file(root / CONFIG_FILE, validate=validate))
    merged.update(read_env(os.environ if environ is None else environ, validate=validate))
    given = {k: v for k, v in (flags or {}).items() if v is not None}
    if given and validate:
        _validate("command line", given)
    merged.update(given)
    return from_mapping(merged)


def from_mapping(data: dict[str, Any]) -> Settings:
    """Typed Settings from validated plain data (a config file, or a state.json snapshot)."""
    values = dict(data)
    if "checks" in values:
        values["checks"] = [parse_check(c) for c in values["checks"] or []]
    for key in DURATION_KEYS:
        if key in values:
            values[key] = parse_duration(values[key], key)
    return Settings(**values)
