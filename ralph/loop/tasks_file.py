"""The tasks file of `ralph batch` and `ralph bench`: its format, read and checked in one place.

YAML: a list of tasks, or `{defaults: {...}, tasks: [...]}`. A task is a mapping with `task`
(the text) and optionally `name` (unique; default: from the task), `test`, `checks` (names,
commands, or mappings with a `role:` like config.yaml's), `actor`, `max_iterations` and
`allow_test_edits`; a bare string is a task. Any mistake is one line naming the entry, and
nothing starts: every task is checked before the first loop is launched, including what would
stop its process from starting (a NUL character, a task over `MAX_TASK_CHARS`). A task is
redacted (ralph.redact) as it is read, as `ralph run` redacts its own: the name, loop id and
branch derived from it, the loop's command line and `--json` never carry a token written into
the task. `ralph batch --help` (cli/many.py) and the README give this format whole; a test
holds both to `TASK_KEYS` and reads the help's example with `load_tasks`.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ralph.actors.command import anchored_spec
from ralph.config import _validate, load_yaml, parse_check
from ralph.errors import ConfigError
from ralph.redact import redact

TASK_KEYS = ("name", "task", "test", "checks", "actor", "max_iterations", "allow_test_edits")
DEFAULT_KEYS = ("test", "checks", "actor", "max_iterations", "allow_test_edits")
# A task travels as one command-line argument of `ralph run`: Linux refuses one over 128 KiB
# (E2BIG). A task is a paragraph or a page; anything longer belongs in a file the task names.
MAX_TASK_CHARS = 32_000
CHECK_KEYS: tuple[str, ...] = ("name", "command", "parser", "weight", "timeout", "role")
CHECK_KEYS += ("criteria", "model", "threshold", "dimensions")
CHECK_HINT = "e.g. {name: all-tests, command: pytest, role: guard}; keys: " + ", ".join(CHECK_KEYS)
EXAMPLE = "- {name: parser, task: 'fix the date parser', test: 'pytest -q tests/test_dates.py'}"


class TasksFileError(ConfigError):
    """A tasks file that cannot be run as written."""


@dataclass(frozen=True)
class BatchTask:
    name: str
    task: str
    test: str | None = None
    # names or commands (str), or check mappings like config.yaml's (dict)
    checks: tuple[str | dict[str, Any], ...] = ()
    actor: str | None = None
    max_iterations: int | None = None
    allow_test_edits: bool = False  # a task about the tests (loop/protect.py)

    def own_checks(self) -> list[str]:
        """The names of the checks this task named as its targets (`test` is `tests`)."""

        named = [] if self.test is None else ["tests"]
        for item in self.checks:
            if not (isinstance(item, dict) and item.get("role") == "guard"):
                named.append(item["name"] if isinstance(item, dict) else parse_check(item).name)
        return named


def load_tasks(path: Path) -> list[BatchTask]:
    """The tasks of `path`, or TasksFileError naming the first entry that is wrong."""
    import yaml

    try:
        data = load_yaml(path.read_text("utf-8"))  # a key given twice: refused
    except OSError as exc:
        raise TasksFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise TasksFileError(f"{path}: cannot read YAML: {first}") from None
    defaults: dict[str, Any] = {}
    if isinstance(data, dict):
        for key in data:
            if key not in ("tasks", "defaults"):
                raise TasksFileError(
                    f"{path}: unknown top-level key {key!r}",
                    hint="a tasks file is a list of tasks, or {defaults: {...}, tasks: [...]}",
                )
        defaults = _fields(path, "defaults", data.get("defaults") or {}, DEFAULT_KEYS)
        data = data.get("tasks")
    if not isinstance(data, list) or not data:
        raise TasksFileError(f"{path}: no tasks", hint=f"a list of tasks, e.g. {EXAMPLE}")
    tasks: list[BatchTask] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(data, start=1):
        entry = {"task": raw} if isinstance(raw, str) else raw
        name = entry.get("name") if isinstance(entry, dict) else None
        label = f"task {number}" + (f" ({name!r})" if isinstance(name, str) else "")
        if not isinstance(entry, dict):
            raise TasksFileError(
                f"{path}: {label}: expected a mapping with a `task`, got {type(raw).__name__}",
                hint=f"e.g. {EXAMPLE}",
            )
        fields = _fields(path, label, entry, TASK_KEYS)
        if "task" not in fields:
            raise TasksFileError(f"{path}: {label}: missing `task`", hint=f"e.g. {EXAMPLE}")
        if len(fields["task"]) > MAX_TASK_CHARS:
            raise TasksFileError(
                f"{path}: {label}: the task is {len(fields['task']):,} characters, over the "
                f"limit of {MAX_TASK_CHARS:,}",
                hint="put the details in a file of the repository and name it in the task",
            )
        fields["task"] = redact(fields["task"])
        fields["name"] = redact(fields["name"]) if "name" in fields else slug(fields["task"])
        if fields["name"] in seen:
            raise TasksFileError(
                f"{path}: {label}: duplicate name {fields['name']!r} "
                f"(task {seen[fields['name']]} has it too)",
                hint="give each task a `name` of its own",
            )
        seen[fields["name"]] = number
        tasks.append(BatchTask(**{**defaults, **fields}))
    return tasks


def _fields(path: Path, label: str, entry: Any, allowed: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise TasksFileError(f"{path}: {label}: expected a mapping, got {type(entry).__name__}")
    fields: dict[str, Any] = {}
    for raw_key, value in entry.items():
        key = str(raw_key).replace("-", "_")
        if key not in allowed:
            close = difflib.get_close_matches(key, allowed, n=1)
            raise TasksFileError(
                f"{path}: {label}: unknown key {raw_key!r}",
                hint=f"did you mean {close[0]!r}?" if close else f"known: {', '.join(allowed)}",
            )
        fields[key] = _checked(path, label, key, value)
    return fields


def _checked(path: Path, label: str, key: str, value: Any) -> Any:
    def wrong(expected: str) -> TasksFileError:
        return TasksFileError(f"{path}: {label}: `{key}` must be {expected}, got {value!r}")

    if key == "max_iterations":
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise wrong("a whole number of at least 1")
        return value
    if key == "allow_test_edits":
        if not isinstance(value, bool):
            raise wrong("true or false")
        return value
    if key == "checks":
        items = [value] if isinstance(value, str | dict) else value
        if not isinstance(items, list) or not all(_a_check(i) for i in items):
            raise wrong("a check name or command, a mapping like config.yaml's, or a list of them")
        if any(_has_nul(i) for i in items):
            raise TasksFileError(f"{path}: {label}: `{key}` contains a NUL character")
        _check_mappings(f"{path}: {label}", [i for i in items if isinstance(i, dict)])
        return tuple(items)
    if not isinstance(value, str) or not value.strip():
        raise wrong("a non-empty string")
    if "\x00" in value:  # no process can be given it as an argument
        raise TasksFileError(f"{path}: {label}: `{key}` contains a NUL character")
    if key == "actor":  # `cmd:./agent.sh` is the file beside the tasks file, wherever batch runs
        return anchored_spec(value, path.absolute().parent)
    return value


def _has_nul(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    return isinstance(value, str) and "\x00" in value


def _a_check(item: Any) -> bool:
    return (isinstance(item, str) and bool(item.strip())) or isinstance(item, dict)


def _check_mappings(where: str, mappings: list[dict[str, Any]]) -> None:
    """Check mappings through config's one validation (the schema: keys, types, `role`)."""

    for mapping in mappings:
        if not isinstance(mapping.get("name"), str):
            raise TasksFileError(f"{where}: a check mapping needs a `name`", hint=CHECK_HINT)
        for key in mapping:
            if key not in CHECK_KEYS:
                close = difflib.get_close_matches(str(key), CHECK_KEYS, n=1)
                raise TasksFileError(
                    f"{where}: check {mapping['name']!r}: unknown key {key!r}",
                    hint=f"did you mean {close[0]!r}?" if close else CHECK_HINT,
                )
    if mappings:
        try:
            _validate(where, {"checks": mappings})
        except ConfigError as error:
            raise TasksFileError(error.message, hint=error.hint) from None


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40].strip("-") or "task"
