"""`ralph init`: find the project's pytest, mypy and ruff configuration, run those checks once
to see where the project stands, and write config.yaml with each check's role.

A real project's mypy or ruff often fails before any change: such a check is written as a
guard (it must not get worse), so the loop never takes 338 old findings for its task. Failing
tests need no role: the tests failing before the loop are its targets (judging.py).
"""

from __future__ import annotations

import re
import shlex
import shutil
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ralph.config import CONFIG_FILE, CheckSpec, Role, load_yaml
from ralph.errors import ConfigError
from ralph.evaluators.base import CheckOutcome
from ralph.evaluators.describe import check_summary
from ralph.evaluators.suite import CheckSuite
from ralph.evaluators.tools import runnable_checks
from ralph.files import atomic_write_text
from ralph.memory.store import MemoryStore

HEADER = """\
# ralph configuration: every key is described in the README, section Configuration.
# Precedence: defaults < pyproject.toml [tool.ralph] < this file < --config FILE <
# RALPH_* environment variables < command-line flags.
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


ROLES_NOTE = """\
# role: guard = failing before the loop; it must not get worse, its old findings are not the
# task. To make the loop fix a guard, set `role: target`, name it (--check NAME), or use --strict.
"""


@dataclass
class Probe:
    """What running one detected check once said: kept (with its role) or left out, and why."""

    spec: CheckSpec
    status: str  # pass, fail, error (could not run), missing (tool not installed)
    detail: str
    count: int = 0  # its failing tests or findings

    @property
    def kept(self) -> bool:
        return self.status in ("pass", "fail")


def probe_checks(
    root: Path, checks: list[CheckSpec], *, on_output: Callable[[str, str], None] | None = None
) -> list[Probe]:
    """Run every detected check once (in parallel); a check that cannot run is left out, after
    mypy's other ways of running (`mypy_alternatives`) are tried, one at a time."""
    suite = CheckSuite(checks)
    probes: dict[str, Probe] = {}
    runnable, missing = runnable_checks(suite.checks)
    for check, (message, _) in missing:
        probes[check.spec.name] = Probe(check.spec, "missing", message)
    if runnable:
        evaluation = CheckSuite.from_checks(runnable).evaluate(root, on_output=on_output)
        for outcome in evaluation.outcomes:
            probe = _probe(outcome)
            if probe.status == "error" and probe.spec.parser == "mypy":
                probe = _other_mypy(root, probe, on_output)
            probes[outcome.spec.name] = probe
    return [probes[c.name] for c in checks]


def _probe(outcome: CheckOutcome) -> Probe:
    status = outcome.result.status
    detail = "passes" if status == "pass" else check_summary(outcome)
    return Probe(outcome.spec, status, detail, outcome.error_count)


MAX_TRIES = 3  # each is a whole mypy run: init stays quick on a project where none runs


def _other_mypy(root: Path, failed: Probe, on_output: Callable[[str, str], None] | None) -> Probe:
    """The first of the project's other mypy commands that runs, said with why; else `failed`
    with what was tried. `mypy .` stops at the first duplicate module name (two `conftest.py`,
    a `tests/x.py` beside a `docs/x.py`), while the code lives in `src/`."""
    said = failed.detail.removeprefix("could not run: ").removeprefix("mypy cannot run: ")
    why = said.split("; point it at the code")[0]  # the fix is what is tried here
    tried = []
    for command, source in mypy_alternatives(root, failed.spec.command)[:MAX_TRIES]:
        spec = CheckSpec(failed.spec.name, command, failed.spec.parser)
        (outcome,) = CheckSuite([spec]).evaluate(root, on_output=on_output).outcomes
        probe = _probe(outcome)
        if probe.kept:
            probe.detail += (
                f" with `{command}` ({source}; `{failed.spec.command}` cannot run: {why})"
            )
            return probe
        tried.append(f"`{command}`")
    also = f"; tried {', '.join(tried)} too" if tried else ""
    return replace(failed, detail=f"could not run: {why}{also}")


def unprobed(root: Path, checks: list[CheckSpec]) -> list[CheckSpec]:
    """`checks` for `init --no-run`: the mypy command probing would most likely end at, chosen
    without running anything (the project's own command, `src/`, the one package) in place of
    `mypy .`, which stops at the first duplicate module name."""
    chosen = []
    for spec in checks:
        others = mypy_alternatives(root, spec.command) if spec.parser == "mypy" else []
        if spec.command == "mypy ." and others:
            spec = replace(spec, command=others[0][0])
        chosen.append(spec)
    return chosen


def mypy_alternatives(root: Path, tried: str) -> list[tuple[str, str]]:
    """mypy commands the project itself states (tox.ini, noxfile.py, Makefile), then `mypy src`
    for a `src/` layout, then `mypy PKG` for a single top-level package; each with where it
    came from, without `tried` or repeats."""
    found = [(c, "as tox.ini runs it") for c in _tox_commands(_text(root / "tox.ini"))]
    nox = _text(root / "noxfile.py").splitlines()
    found += [(c, "as noxfile.py runs it") for c in map(_nox_command, nox) if c]
    make = _text(root / "Makefile").splitlines()
    found += [(c, "as the Makefile runs it") for c in map(_make_command, make) if c]
    if (root / "src").is_dir():
        found.append(("mypy src", "the src/ layout"))
    skip = {"tests", "test", "docs", "doc", "examples", "build", "dist", "src"}
    packages = [
        p.name
        for p in sorted(root.iterdir())
        if p.is_dir() and p.name not in skip and (p / "__init__.py").is_file()
    ]
    if len(packages) == 1 and packages[0].isidentifier():
        found.append((f"mypy {packages[0]}", "the one top-level package"))
    seen = {tried}
    unique = []
    for command, source in found:
        if command not in seen:
            seen.add(command)
            unique.append((command, source))
    return unique


def _text(path: Path) -> str:
    try:
        return path.read_text("utf-8", errors="replace") if path.is_file() else ""
    except OSError:
        return ""


MYPY_WORDS = re.compile(r"^(?:-\s*)?(?:\S*python3?\S*\s+-m\s+)?mypy(?:\s+(?P<args>.*))?$")


def _mypy_words(line: str) -> str | None:
    """`mypy ARGS` from a command line that runs mypy (bare or `python -m`), else None; so is a
    line with a variable ralph cannot expand, or without arguments (what `mypy .` was tried
    for: the configured `files`, else nothing to check)."""
    match = MYPY_WORDS.match(line.strip())
    args = (match["args"] or "").strip() if match else ""
    if not args or any(c in args for c in "${}`;&|<>"):
        return None
    return f"mypy {args}"


def _tox_commands(text: str) -> list[str]:
    """The mypy lines of tox's `commands =` values (`mypy {posargs:src}` -> `mypy src`)."""
    found, inside = [], False
    for line in text.splitlines():
        key = re.match(r"^\s*commands\s*=(.*)$", line)
        if key is not None:
            inside, line = True, key[1]
        elif not line[:1].isspace():
            inside = False
        if not inside:
            continue
        line = re.sub(r"\{posargs:([^{}]*)\}", r"\1", line).replace("{posargs}", "")
        command = _mypy_words(line.replace("{toxinidir}/", "").replace("{toxinidir}", "."))
        if command:
            found.append(command)
    return found


def _make_command(line: str) -> str | None:
    """A Makefile recipe line (a tab, then `@mypy src` or `-mypy src`)."""
    return _mypy_words(line.lstrip("\t@")) if line.startswith("\t") else None


NOX_RUN = re.compile(r"session\.run\((?P<args>[^)]*)\)")


def _nox_command(line: str) -> str | None:
    """`session.run("mypy", "src")`: its string arguments up to the first that is not one."""
    match = NOX_RUN.search(line)
    if match is None:
        return None
    words = []
    for arg in match["args"].split(","):
        arg = arg.strip()
        if len(arg) < 2 or arg[0] not in "'\"" or arg[-1] != arg[0]:
            break
        words.append(arg[1:-1])
    return _mypy_words(shlex.join(words)) if words else None


def role_for(probe: Probe) -> Role | None:
    """A failing type checker, linter or command is a guard; tests split by test, no role."""
    if probe.status == "fail" and probe.spec.parser != "pytest":
        return "guard"
    return None


def render_config(checks: list[CheckSpec], kept: dict[str, Any] | None = None) -> str:
    """The file `init` writes: the detected checks, then the settings `kept` from the file it
    replaces (`init --force` re-detects the checks, never the user's other choices), then the
    default lines for the keys not kept."""
    import yaml

    body: list[dict[str, Any]] = []
    for c in checks:
        item: dict[str, Any] = {"name": c.name, "command": c.command, "parser": c.parser}
        if c.role:
            item["role"] = c.role
        body.append(item)
    lines = yaml.safe_dump({"checks": body}, sort_keys=False) if body else "checks: []\n"
    note = ROLES_NOTE if any(c.role == "guard" for c in checks) else ""
    settings = ""
    if kept:
        dumped = yaml.safe_dump(kept, sort_keys=False, allow_unicode=True)
        settings = "# kept from the previous config.yaml\n" + dumped + "\n"
    defaults = "".join(
        line
        for line in DEFAULTS.splitlines(keepends=True)
        if line.lstrip("# ").split(":", 1)[0] not in (kept or {})
    )
    return HEADER + "\n" + note + lines + "\n" + settings + defaults


def previous_settings(path: Path) -> dict[str, Any]:
    """The settings of an existing config.yaml other than its checks (what `init --force`
    keeps); a file that cannot be read keeps nothing (its bytes are saved beside it)."""

    try:
        data = load_yaml(path.read_text("utf-8"))
    except Exception:  # unreadable or not YAML: nothing to keep, the backup holds it
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): v for k, v in data.items() if k != "checks"}


def config_path(store: MemoryStore, *, force: bool) -> Path:
    """Where `ralph init` writes; refused when it exists (before any check runs)."""
    path = store.root / CONFIG_FILE
    if path.exists() and not force:
        raise ConfigError(f"{path} already exists", hint="use `ralph init --force` to overwrite")
    return path


def write_config(
    store: MemoryStore, path: Path, checks: list[CheckSpec], kept: dict[str, Any] | None = None
) -> Path | None:
    """Write the config; a file it replaces is first copied to `config.yaml.bak` (returned), so
    `init --force` loses nothing, comments included."""
    store.ensure()
    backup = None
    if path.is_file():
        backup = path.with_name(path.name + ".bak")
        shutil.copy2(path, backup)  # byte for byte: comments and odd encodings kept
    atomic_write_text(path, render_config(checks, kept))
    return backup
