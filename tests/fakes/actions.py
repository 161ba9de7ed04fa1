"""Runs a composite action's steps locally, the way a GitHub runner would, for the tests.

`run:` steps run as written (`bash --noprofile --norc -eo pipefail`, GitHub's bash) with
`${{ ... }}` expressions substituted, the step's `env`, and a fresh `$GITHUB_OUTPUT` file whose
lines become `steps.<id>.outputs`. `uses:` steps are stood in for by `stand_ins` (name ->
function of the step's evaluated `with`). `if:` conditions are evaluated with the small part of
GitHub's expression language actions use: contexts, string literals, `==`, `!=`, `&&`, `||`,
`!`, parentheses and the status functions.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<op>==|!=|&&|\|\||!|\(|\))"
    r"|(?P<call>[A-Za-z_]\w*)\(\)|(?P<name>[A-Za-z_][\w.-]*))"
)
StandIn = Callable[[dict[str, str]], None]


@dataclass
class ActionRun:
    outputs: dict[str, str]
    steps: dict[str, dict[str, str]]
    ran: list[str] = field(default_factory=list)  # names of the steps that ran
    skipped: list[str] = field(default_factory=list)
    failed: str | None = None
    logs: dict[str, str] = field(default_factory=dict)


def evaluate(expression: str, context: Mapping[str, Any], failed: bool) -> Any:
    """Evaluate a GitHub expression over `context` ({"inputs": ..., "steps": ..., ...})."""
    python: list[str] = []
    pos = 0
    functions = {"always": True, "cancelled": False, "success": not failed, "failure": failed}
    while pos < len(expression):
        match = TOKEN.match(expression, pos)
        if match is None or match.end() == pos:
            if expression[pos:].strip():
                raise ValueError(f"cannot parse {expression!r} at {expression[pos:]!r}")
            break
        pos = match.end()
        if match["str"] is not None:
            python.append(repr(match["str"][1:-1].replace("''", "'")))
        elif match["op"] is not None:
            python.append({"&&": " and ", "||": " or ", "!": " not "}.get(match["op"], match["op"]))
        elif match["call"] is not None:
            python.append(repr(functions[match["call"]]))
        else:
            python.append(repr(_lookup(context, match["name"])))
    return eval("".join(python), {"__builtins__": {}}, {})


def _lookup(context: Mapping[str, Any], name: str) -> Any:
    value: Any = context
    for part in name.split("."):
        value = value.get(part, "") if isinstance(value, Mapping) else ""
    return value


def substitute(text: str, context: Mapping[str, Any], failed: bool) -> str:
    def one(match: re.Match[str]) -> str:
        value = evaluate(match.group(1), context, failed)
        return str(value).lower() if isinstance(value, bool) else str(value)

    return EXPRESSION.sub(one, text)


def parse_output_file(text: str) -> dict[str, str]:
    """`name=value` lines and `name<<DELIMITER` ... `DELIMITER` blocks."""
    found: dict[str, str] = {}
    lines = iter(text.splitlines())
    for line in lines:
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            body = []
            for inner in lines:
                if inner == delimiter:
                    break
                body.append(inner)
            found[name] = "\n".join(body)
        elif "=" in line:
            name, value = line.split("=", 1)
            found[name] = value
    return found


def run_action(
    action_file: Path,
    *,
    inputs: Mapping[str, str],
    workspace: Path,
    runner_temp: Path,
    env: Mapping[str, str],
    stand_ins: Mapping[str, StandIn],
    skip: Mapping[str, Callable[[dict[str, Any]], None]] = {},
    github: Mapping[str, str] = {},
) -> ActionRun:
    """Run the steps of `action_file` in `workspace`; `skip` maps step ids to a check of the
    step (for what cannot run here, such as installing from an index)."""
    action = yaml.safe_load(action_file.read_text())
    values = {
        name: str(inputs.get(name, spec.get("default", "")))
        for name, spec in (action.get("inputs") or {}).items()
    }
    missing = [n for n, s in action["inputs"].items() if s.get("required") and not values[n]]
    assert not missing, f"required inputs not given: {missing}"
    steps: dict[str, dict[str, str]] = {}
    context: dict[str, Any] = {
        "inputs": values,
        "steps": {},
        "github": {"action_path": str(action_file.parent), "workspace": str(workspace), **github},
    }
    result = ActionRun(outputs={}, steps=steps)
    summary = runner_temp / "step-summary.md"
    base_env = {
        **env,
        "GITHUB_ACTION_PATH": str(action_file.parent),
        "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_STEP_SUMMARY": str(summary),
        "RUNNER_TEMP": str(runner_temp),
        "CI": "true",
        "GITHUB_ACTIONS": "true",
    }
    for number, step in enumerate(action["runs"]["steps"]):
        name = step.get("name") or step.get("id") or f"step {number}"
        condition = step.get("if", "success()")
        condition = EXPRESSION.sub(lambda m: m.group(1), str(condition))
        if not evaluate(condition, context, result.failed is not None):
            result.skipped.append(name)
            continue
        result.ran.append(name)
        if step.get("id") in skip:
            skip[step["id"]](step)
            continue
        if "uses" in step:
            action_name = step["uses"].split("@", 1)[0]
            with_values = {
                key: substitute(str(value), context, result.failed is not None)
                for key, value in (step.get("with") or {}).items()
            }
            stand_ins[action_name](with_values)
            continue
        output_file = runner_temp / f"output-{number}"
        output_file.write_text("")
        step_env = {
            **base_env,
            "GITHUB_OUTPUT": str(output_file),
            **{
                key: substitute(str(value), context, result.failed is not None)
                for key, value in (step.get("env") or {}).items()
            },
        }
        script = runner_temp / f"step-{number}.sh"
        script.write_text(substitute(step["run"], context, result.failed is not None))
        assert step["shell"] == "bash", "only bash steps are run here"
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=workspace / step.get("working-directory", "."),
            env=step_env,
            capture_output=True,
            text=True,
        )
        result.logs[name] = done.stdout + done.stderr
        outputs = parse_output_file(output_file.read_text())
        if "id" in step:
            steps[step["id"]] = outputs
            context["steps"][step["id"]] = {"outputs": outputs}
        if done.returncode != 0 and result.failed is None:
            result.failed = name
    result.outputs = {
        name: substitute(spec["value"], context, result.failed is not None)
        for name, spec in (action.get("outputs") or {}).items()
    }
    return result


def summary_of(run_temp: Path) -> str:
    path = run_temp / "step-summary.md"
    return path.read_text() if path.exists() else ""


def path_with(*folders: Path) -> str:
    return os.pathsep.join([*(str(f) for f in folders), os.environ.get("PATH", "")])
