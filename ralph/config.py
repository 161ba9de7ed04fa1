"""Settings: defaults < pyproject.toml [tool.ralph] < .aiwg/ralph/config.yaml < --config FILE <
RALPH_* environment < command-line flags.

Every source is validated against `schemas/config.schema.json` before it is merged, so a typo
in any of them is named (with the closest valid key) instead of silently ignored. The project's
shared choices go in pyproject.toml, ralph's own file overrides them, a file named for one run
overrides both, and the environment and flags are the moment's choice.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from ralph.errors import ConfigError

CONFIG_FILE = Path(".aiwg/ralph/config.yaml")
Role = Literal["target", "guard"]  # how a check is judged: docs/architecture.md, Judging
ROLES: tuple[Role, ...] = ("target", "guard")
SUCCESS_MODES = ("baseline", "strict")
DURATION_KEYS = (
    "timeout",
    "iteration_timeout",
    "idle_timeout",
    "check_timeout",
    "reflector_timeout",
    "max_wait",
)
BOOLEAN_KEYS: tuple[str, ...] = ("no_git", "allow_dirty", "no_rollback", "worktree", "json")
BOOLEAN_KEYS += ("quiet", "notify", "allow_test_edits", "memory_tools", "escalate")


def validate_role(value: Any, where: str) -> Role | None:
    if value is None:
        return None
    if value not in ROLES:
        raise ConfigError(
            f"{where}: role must be target or guard, not {value!r}",
            hint="target: must end green; guard: must not get worse than before the loop",
        )
    role: Role = value
    return role


def validate_success(value: Any, where: str = "success") -> str:
    if value not in SUCCESS_MODES:
        raise ConfigError(
            f"{where}: must be baseline or strict, not {value!r}",
            hint="baseline: targets green and no guard worse; strict: every check passes",
        )
    return str(value)


@dataclass
class CheckSpec:
    """One check: a command and the parser that reads its output."""

    name: str
    command: str
    parser: str = "shell"
    weight: float | None = None
    timeout: float | None = None
    role: Role | None = None  # target or guard; None: decided from the baseline (judging.py)
    # a `judge` check (evaluators/judge.py): what it judges by, its model, pass mark, scores
    criteria: str | None = None
    model: str | None = None
    threshold: float | None = None
    dimensions: list[str] | None = None


@dataclass
class Settings:
    actor: str = "auto"
    actor_args: list[str] = field(default_factory=list)
    model: str | None = None  # the actor's model: an agent CLI's --model, a provider's MODEL
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
    # ISO time: lessons only from records written before it (`ralph bench` keeps its runs from
    # learning from each other this way)
    lessons_before: str | None = None
    # a lesson offered this many times without ever helping is retired (memory/merit.py)
    lesson_retire_after: int = 3
    budget_usd: float | None = None
    max_tokens: int | None = None
    timeout: float | None = None
    iteration_timeout: float | None = 1800.0
    idle_timeout: float | None = 600.0
    check_timeout: float | None = 900.0
    reflector_timeout: float | None = 300.0
    output_cap: int = 200_000
    no_git: bool = False
    allow_dirty: bool = False
    no_rollback: bool = False
    # an attempt's edits of the baseline's test files count (loop/protect.py: put back otherwise)
    allow_test_edits: bool = False
    # an agent CLI that speaks MCP gets `ralph mcp` (the memory's tools) in each attempt
    memory_tools: bool = True
    # the prompt offers the escalation exit, `RALPH-ESCALATE: <reason>` (loop/escalation.py)
    escalate: bool = True
    # what an attempt leaves uncommitted, reported (workspace/held.py): larger files, more files
    max_file_mb: float = 50.0
    max_new_files: int = 10_000
    worktree: bool = False
    # a shell command run in each new worktree before its baseline (`make version`)
    worktree_setup: str | None = None
    json: bool = False
    quiet: bool = False
    notify: bool = False  # say when a loop ends: bell and desktop notification, or the command
    notify_command: str | None = None
    success: str = "baseline"
    # a usage limit (loop/limits.py): wait until it resets, at most max_wait; or stop (exit 5)
    on_limit: str = "wait"
    max_wait: float | None = 21600.0
    # the actor and the checks in a sandbox (ralph/sandbox.py): auto, bwrap or none; who keeps
    # the network; what the actor may write beyond the tree (None: its preset's own
    # directories); variables passed on by name
    sandbox: str = "auto"
    sandbox_network: str = "actor"
    sandbox_write: list[str] | None = None
    pass_env: list[str] = field(default_factory=list)
    # held-out tests (files or folders, from the project's root or absolute): hidden from the
    # agent, run before a success is declared (loop/holdout.py)
    holdout: list[str] = field(default_factory=list)
    # not a setting: the checks the user named (--test, --check, RALPH_TEST/CHECK, `test:`)
    named_checks: list[str] = field(default_factory=list)

    def holdout_paths(self, root: Path) -> tuple[Path, ...]:
        """The held-out tests' paths, absolute (relative ones from the project's `root`)."""
        return tuple((root / Path(p).expanduser()).resolve() for p in self.holdout)

    def all_checks(self) -> list[CheckSpec]:
        """`test` (the `--test` shortcut) first, replacing the configured test checks (pytest
        ones): it narrows the tests that matter, it does not run them twice. Then the rest."""
        checks = list(self.checks)
        if self.test:
            checks = [c for c in checks if c.name != "tests" and c.parser != "pytest"]
            checks.insert(0, CheckSpec("tests", self.test, infer_parser(self.test)))
        return checks

    def named(self) -> list[str]:
        """The checks that are targets because the user named them."""
        return list(self.named_checks) + (["tests"] if self.test else [])

    def snapshot(self) -> dict[str, Any]:
        """JSON-ready copy for state.json, so `ralph resume` runs with the same settings."""
        return dataclasses.asdict(self)


KEYS: tuple[str, ...] = tuple(
    f.name for f in dataclasses.fields(Settings) if f.name != "named_checks"
)


def parse_duration(value: Any, key: str = "duration") -> float | None:
    """Plain seconds, or `45s`, `10m`, `2h`; None and 0 mean no limit.

    The one reader of durations, whether they come from a flag, a RALPH_* variable, the config
    file or a loop's saved settings: a negative, NaN or infinite value is refused (exit 2).
    """
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    else:
        match = re.fullmatch(r"\s*(-?\d+(?:\.\d+)?)\s*([smh]?)\s*", str(value))
        if not match:
            raise ConfigError(f"{key}: cannot read duration {value!r}", hint=DURATION_HINT)
        seconds = float(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[match.group(2)]
    if not math.isfinite(seconds) or seconds < 0:
        raise ConfigError(f"{key}: {value!r} is not a duration", hint=DURATION_HINT)
    return seconds or None


DURATION_HINT = "use seconds >= 0, or 45s, 10m, 2h; 0 means no limit"


def _non_finite(value: Any, where: str) -> str | None:
    """The first NaN or infinite number in `value` (a parsed config), as `key.subkey`."""
    if isinstance(value, float) and not math.isfinite(value):
        return where or "a value"
    if isinstance(value, dict | list):
        pairs = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in pairs:
            found = _non_finite(item, f"{where}.{key}" if where else str(key))
            if found:
                return found
    return None


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
        if item.startswith("judge:"):  # --check 'judge:CRITERIA'
            return CheckSpec("judge", "", "judge", criteria=item.removeprefix("judge:").strip())
        if item in BUILTIN_COMMANDS:
            return CheckSpec(item, BUILTIN_COMMANDS[item], item)
        parser = infer_parser(item)
        name = parser if parser != "shell" else _check_name(item)
        return CheckSpec(name, item, parser)
    name = item["name"]
    command = item.get("command") or BUILTIN_COMMANDS.get(name)
    if item.get("parser") == "judge":
        return CheckSpec(
            name,
            command or "",
            "judge",
            item.get("weight"),
            role=validate_role(item.get("role"), f"checks.{name}.role"),
            criteria=item.get("criteria"),
            model=item.get("model"),
            threshold=item.get("threshold"),
            dimensions=item.get("dimensions"),
        )
    if not command:
        raise ConfigError(f"check {name!r} has no command", hint="add `command:` to the check")
    return CheckSpec(
        name=name,
        command=command,
        parser=item.get("parser") or infer_parser(command),
        weight=item.get("weight"),
        timeout=_check_timeout(item.get("timeout"), f"checks.{name}.timeout"),
        role=validate_role(item.get("role"), f"checks.{name}.role"),
    )


def _check_timeout(value: Any, key: str) -> float | None:
    """A check's own limit: None falls back to `check_timeout`, 0 (no limit) stays 0."""
    seconds = parse_duration(value, key)
    return 0.0 if seconds is None and value is not None else seconds


def _check_name(command: str) -> str:
    words = command.split()
    return Path(words[0]).name if words else "shell"


def _validate(source: str, data: dict[str, Any], *, schema: bool = True) -> None:
    """Every rule a user is told by name, then the JSON schema (`schema=False`: not the schema,
    whose import delays `ralph check`'s early start, bench/evaluator.py's "launch -> first
    check running"; the command validates it later)."""
    for key in data:
        if key not in KEYS:
            import difflib

            close = difflib.get_close_matches(key, KEYS, n=1)
            raise ConfigError(
                f"{source}: unknown setting {key!r}",
                hint=f"did you mean {close[0]!r}?" if close else f"valid: {', '.join(KEYS)}",
            )
    for key in DURATION_KEYS:
        parse_duration(data.get(key), f"{source}: {key}")
    bad = _non_finite(data, "")
    if bad:
        raise ConfigError(
            f"{source}: {bad} is not a finite number", hint="NaN and infinity are not settings"
        )
    if data.get("lessons_before") is not None:
        if hasattr(data["lessons_before"], "isoformat"):  # YAML read an unquoted time as one
            data["lessons_before"] = data["lessons_before"].isoformat()
        lessons_cutoff(data["lessons_before"], f"{source}: lessons_before")
    # the two keys whose valid values a user must be told by name (the schema's oneOf cannot)
    if "success" in data:
        validate_success(data["success"], f"{source}: success")
    for item in data.get("checks") or []:
        if isinstance(item, dict) and "role" in item:
            validate_role(item["role"], f"{source}: checks.{item.get('name', '?')}.role")
    from ralph import schemas  # here: `ralph check` starts its checks without it

    problems = schemas.errors(schemas.CONFIG, data) if schema else []
    if problems:
        raise ConfigError(f"{source}: {problems[0]}", hint="see README section Configuration")


def read_file(path: Path, *, required: bool = False, schema: bool = True) -> dict[str, Any]:
    """A YAML config file (or a TOML one: its [tool.ralph] table, else the whole document),
    validated; a missing file is an empty config unless `required` (a file the user named)."""
    if not path.is_file():
        if required:
            raise ConfigError(
                f"config file {path} not found", hint="check the path given to --config"
            )
        return {}
    if path.suffix == ".toml":
        document = _read_toml(path)
        table = _tool_ralph(document)
        return _checked(str(path), document if table is None else table, toml=True, schema=schema)
    import yaml

    try:
        data = load_yaml(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(f"{path}: cannot read YAML: {first}") from None
    return _checked(str(path), data, schema=schema)


def load_yaml(text: str) -> Any:
    """`yaml.safe_load` that refuses a key given twice in one mapping (pyyaml keeps the last
    silently, so a setting written twice would win or lose unseen): a one-line YAMLError that
    names the key and its line. Merge keys (`<<`) may still be overridden."""
    import yaml

    return yaml.load(text, Loader=_unique_key_loader())  # a SafeLoader: no tags that run code


@functools.cache
def _unique_key_loader() -> type[Any]:
    import yaml

    class DuplicateKeyError(yaml.YAMLError):
        pass

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
            if isinstance(node, yaml.MappingNode):
                seen: dict[Any, int] = {}
                for key_node, _ in node.value:
                    if not isinstance(key_node, yaml.ScalarNode) or key_node.tag.endswith(":merge"):
                        continue
                    key = self.construct_object(key_node, deep=True)
                    line = key_node.start_mark.line + 1
                    if key in seen:
                        raise DuplicateKeyError(
                            f"duplicate key {key!r} on line {line} (first on line {seen[key]})"
                        )
                    seen[key] = line
            return super().construct_mapping(node, deep=deep)

    return UniqueKeyLoader


PYPROJECT = "pyproject.toml"


def read_pyproject(root: Path, *, schema: bool = True) -> dict[str, Any]:
    """`[tool.ralph]` of the project's pyproject.toml, validated; keys may use dashes
    (`max-iterations`), as pyproject tables usually do."""
    path = root / PYPROJECT
    if not path.is_file():
        return {}
    table = _tool_ralph(_read_toml(path))
    if table is None:
        return {}
    return _checked(f"{path} [tool.ralph]", table, toml=True, schema=schema)


def _tool_ralph(document: dict[str, Any]) -> Any:
    tool = document.get("tool")
    return tool.get("ralph") if isinstance(tool, dict) else None


def _read_toml(path: Path) -> dict[str, Any]:
    import tomllib

    try:
        return tomllib.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read TOML: {exc}") from None


def _checked(source: str, data: Any, *, toml: bool = False, schema: bool = True) -> dict[str, Any]:
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of settings, got {type(data).__name__}")
    settings = {str(key).replace("-", "_") if toml else key: v for key, v in data.items()}
    _validate(source, settings, schema=schema)
    return settings


def read_env(environ: dict[str, str] | os._Environ[str], *, schema: bool = True) -> dict[str, Any]:
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
        if key in (
            "actor",
            "reflector",
            "test",
            "lessons_before",
            "notify_command",
            "worktree_setup",
        ) or (key in DURATION_KEYS and value is not None):
            value = raw
        if key == "checks" and not isinstance(value, list):
            value = [raw]
        if key in ("actor_args", "pass_env", "sandbox_write", "holdout") and isinstance(value, str):
            value = value.split()
        if key in BOOLEAN_KEYS and raw.strip().lower() in ("1", "0", "y", "n"):
            value = raw.strip().lower() in ("1", "y")  # CI's usual RALPH_QUIET=1
        data[key] = value
    _validate("environment (RALPH_*)", data, schema=schema)
    return data


# Variables ralph sets for actors, and RALPH_CONFIG (the --config file): they are not settings.
RUNTIME_VARIABLES = frozenset(
    {"RALPH_PROMPT_FILE", "RALPH_LOOP_ID", "RALPH_ITERATION", "RALPH_WORKDIR", "RALPH_DEBUG"}
    | {"RALPH_OWNER_PID"}  # set by process.py on everything ralph starts
    | {"RALPH_CONFIG"}
)


def load(
    root: Path,
    flags: dict[str, Any] | None = None,
    environ: dict[str, str] | os._Environ[str] | None = None,
    *,
    schema: bool = True,
) -> Settings:
    """Merge every source, later ones winning; flags equal to None were not given.

    `flags` may carry `config`: the `--config FILE` (else `RALPH_CONFIG` names it). `schema=False`
    skips the JSON schema (only `ralph check`'s early start, which the command checks again)."""
    env_source = os.environ if environ is None else environ
    given = {k: v for k, v in (flags or {}).items() if v is not None}
    extra = given.pop("config", None) or env_source.get("RALPH_CONFIG", "").strip() or None
    configured: dict[str, Any] = {}
    for source in (
        read_pyproject(root, schema=schema),
        read_file(root / CONFIG_FILE, schema=schema),
    ):
        configured.update(source)
    if extra is not None:
        configured.update(read_file(Path(extra).expanduser(), required=True, schema=schema))
    merged = dict(configured)
    env = read_env(env_source, schema=schema)
    merged.update(env)
    if given:
        _validate("command line", given, schema=schema)
    merged.update(given)
    named = given.get("checks") or env.get("checks")
    if named:  # `--check NAME` selects the configured check of that name, with its command
        by_name = {parse_check(c).name: c for c in configured.get("checks") or []}
        _require_known(named, by_name, env_source.get("PATH"))
        merged["checks"] = [by_name.get(c, c) if isinstance(c, str) else c for c in named]
        merged["named_checks"] = [parse_check(c).name for c in merged["checks"]]
    return from_mapping(merged)


def _require_known(named: Sequence[Any], configured: dict[str, Any], path: str | None) -> None:
    """`--check lint` names a check: one that is neither configured, built in, nor a program
    here is a typo, and the error names the checks there are."""
    from ralph import process

    for name in named:
        if not isinstance(name, str) or name in configured or name in BUILTIN_COMMANDS:
            continue
        if re.search(r"[\s/:]", name) or process.which(name, path=path) is not None:
            continue  # a command
        there = ", ".join(configured) or "none"
        raise ConfigError(
            f"--check {name}: no check of that name (configured: {there})",
            hint="name a configured check, pytest, mypy or ruff, or give a command",
        )


def sources(
    root: Path,
    flags: dict[str, Any] | None = None,
    environ: dict[str, str] | os._Environ[str] | None = None,
) -> list[str]:
    """Where the settings `load` merges come from, lowest first (for `ralph doctor`)."""
    env = os.environ if environ is None else environ
    found = []
    if read_pyproject(root):
        found.append(f"{PYPROJECT} [tool.ralph]")
    if (root / CONFIG_FILE).is_file():
        found.append(str(CONFIG_FILE))
    extra = (flags or {}).get("config") or env.get("RALPH_CONFIG", "").strip()
    if extra:
        found.append(f"--config {extra}")
    variables = sorted(
        n for n in env if n.startswith("RALPH_") and n not in RUNTIME_VARIABLES and env[n]
    )
    if variables:
        found.append(", ".join(variables))
    given = [k for k, v in (flags or {}).items() if v is not None and k != "config"]
    if given:
        found.append("flags: " + ", ".join(given))
    return found


def from_mapping(data: dict[str, Any]) -> Settings:
    """Typed Settings from validated plain data (a config file, or a state.json snapshot)."""
    values = dict(data)
    if "checks" in values:
        values["checks"] = [parse_check(c) for c in values["checks"] or []]
    for key in DURATION_KEYS:
        if key in values:
            values[key] = parse_duration(values[key], key)
    return Settings(**values)


def model_args(actor_args: Sequence[str]) -> list[str]:
    """Only the model choice carries over to the read-only chat run, never permission flags."""
    args = list(actor_args)
    for i, arg in enumerate(args):
        if arg in ("--model", "-m") and i + 1 < len(args):
            return [arg, args[i + 1]]
        if arg.startswith("--model="):
            return ["--model", arg.split("=", 1)[1]]
    return []


def lessons_cutoff(value: Any, where: str = "lessons_before") -> float:
    """`lessons_before` as seconds since the epoch; a timestamp without a zone is UTC."""
    try:
        when = datetime.fromisoformat(str(value))
    except ValueError:
        raise ConfigError(
            f"{where}: {value!r} is not an ISO time", hint="e.g. 2026-11-23T18:00:00+00:00"
        ) from None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()
