"""What a batch task's loop is judged by (README: Many tasks, many machines).

A task's `test` (run as the check `tests`) and its own `checks` are its targets. With a `test`
and no `checks`, the project's configured checks run beside it as guards (no test that passed
may fail, no new finding), so a task scoped to its own tests cannot break the rest unseen, and
the other tasks' failing tests are not its work. A configured check whose config sets `role:`
keeps it. `checks` select, as `--check` does; a mapping among them carries its own `role:`.

A loop is a `ralph run` process of its own: the checks reach it as `RALPH_CHECKS` (a YAML list
in config.yaml's form, which, unlike a flag, carries a role; it selects like `--check`), and
`RALPH_TEST` is emptied so that a configured `test` cannot replace them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ralph.loop.tasks_file import CHECK_KEYS

if TYPE_CHECKING:
    from ralph.config import CheckSpec, Settings
    from ralph.loop.tasks_file import BatchTask
    from ralph.records import IterationRecord

TASK_TEST = "tests"  # the check a task's `test` runs as, as `--test`'s
RENAMED = "project-tests"  # a configured `test` beside a task's own


def loop_checks(task: BatchTask, configured: Settings) -> list[str | dict[str, Any]] | None:
    """The checks of the task's loop in config.yaml's form; None when the task names none (the
    loop runs the configured checks, roles from the baseline, as `ralph run` does)."""
    if task.test is None and not task.checks:
        return None
    chosen: list[str | dict[str, Any]] = []
    if task.test is not None:  # no role: a target, like `--test`
        chosen.append({"name": TASK_TEST, "command": task.test})
    if task.checks:
        known = {spec.name: spec for spec in configured.all_checks()}
        chosen += [_resolved(item, known) for item in task.checks]
        return chosen
    for spec in configured.all_checks():
        if spec.command == task.test:
            continue  # the same command: it runs once, as the target
        guard = as_mapping(spec)
        guard["role"] = spec.role or "guard"
        if guard["name"] == TASK_TEST:
            guard["name"] = RENAMED
        chosen.append(guard)
    return chosen


def _resolved(item: str | dict[str, Any], known: dict[str, CheckSpec]) -> str | dict[str, Any]:
    """`{name: mypy, role: guard}`: the configured check of that name, with the task's keys."""
    if isinstance(item, dict) and not item.get("command") and item.get("name") in known:
        return {**as_mapping(known[item["name"]]), **item}
    return item


def as_mapping(spec: CheckSpec) -> dict[str, Any]:
    """A check as config.yaml writes it (what `config.parse_check` reads back)."""
    values = {key: getattr(spec, key) for key in CHECK_KEYS}
    return {key: value for key, value in values.items() if value is not None}


def loop_env(task: BatchTask, configured: Settings) -> dict[str, str]:
    """The variables that give the task's loop its checks; none when the task names none."""
    checks = loop_checks(task, configured)
    if checks is None:
        return {}
    return {"RALPH_CHECKS": json.dumps(checks), "RALPH_TEST": ""}


def task_settings(root: Path, task: BatchTask, configured: Settings) -> Settings:
    """The settings the task's `ralph run` will load: its flags over its environment."""
    from ralph import config

    flags = {
        "actor": task.actor,
        "max_iterations": task.max_iterations,
        "allow_test_edits": task.allow_test_edits or None,
        "worktree": True,
    }
    return config.load(root, flags, {**os.environ, **loop_env(task, configured)})


def held_back(record: IterationRecord, task: BatchTask) -> str | None:
    """Why a failed loop's best attempt was no success, in the task's terms: its own checks pass
    but it broke what worked, or another target fails; for a task that names no check, how many
    of the failures it had to fix are left (other tasks' bugs may be among them)."""
    from ralph.glyphs import plural

    ext = record.ralph
    if ext is None or ext.check_roles is None:
        return None  # a loop from before roles
    status = {r.tool: r.status for r in record.evaluator_output.results or []}
    regressions = ext.regressions or 0
    broke = f"it broke what worked: {plural(regressions, 'new failure')}"
    if regressions:
        guards = [n for n, role in ext.check_roles.items() if role == "guard"]
        failing = [n for n in guards if status.get(n) != "pass"]
        broke += f" ({', '.join(failing)})" if failing else ""
    own = task.own_checks()
    if not own:
        parts = [broke] if regressions else []
        if ext.fixed and ext.remaining:
            parts.insert(
                0,
                f"fixed {ext.fixed} of the {plural(ext.fixed + ext.remaining, 'failure')} "
                "it had to fix; "
                "those left may be other tasks' (a task without `test:` must fix every failing "
                "test)",
            )
        return "; ".join(parts) or None
    if any(status.get(name) != "pass" for name in own):
        return None
    passing = f"its own checks pass ({', '.join(own)})"
    if regressions:
        return f"{passing}, but {broke}"
    others = [n for n, role in ext.check_roles.items() if role == "target" and n not in own]
    others = [n for n in others if status.get(n) != "pass"]
    return f"{passing}; other targets fail: {', '.join(others)}" if others else passing
