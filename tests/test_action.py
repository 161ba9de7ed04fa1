"""action.yml: valid action metadata, and its steps, run as a script, do what they promise."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from ralph.ids import loop_branch
from ralph.memory.store import MemoryStore
from ralph.memory.validation import validate_file

from .conftest import REPO
from .fakes import AGENT_CREDENTIALS
from .fakes.actions import path_with, run_action, summary_of
from .fakes.calc_project import git, make_calc_repo

ACTION = REPO / "action.yml"
FAKES = Path(__file__).resolve().parent / "fakes"

# GitHub's action metadata schema, as far as this action uses it: the rules of "Metadata syntax
# for GitHub Actions" (docs.github.com) that SchemaStore's github-action.json also encodes —
# written out here rather than vendored. Unknown keys are errors at every level, as on GitHub.
ID = "^[_a-zA-Z][a-zA-Z0-9_-]*$"
COLORS = ["white", "yellow", "blue", "green", "orange", "red", "purple", "gray-dark"]
STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
STEP = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "id": {"type": "string", "pattern": ID},
        "if": {"type": "string"},
        "run": {"type": "string"},
        "shell": {"type": "string"},
        "uses": {"type": "string", "pattern": r"^[^@\s]+@[^@\s]+$|^\./"},
        "with": {"type": "object"},
        "env": STRING_MAP,
        "working-directory": {"type": "string"},
        "continue-on-error": {"type": ["boolean", "string"]},
    },
    "oneOf": [{"required": ["run", "shell"]}, {"required": ["uses"]}],
    "additionalProperties": False,
}
ACTION_SCHEMA: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "required": ["name", "description", "runs"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string"},
        "author": {"type": "string"},
        "description": {"type": "string"},
        "inputs": {
            "type": "object",
            "additionalProperties": False,
            "patternProperties": {
                ID: {
                    "type": "object",
                    "required": ["description"],
                    "additionalProperties": False,
                    "properties": {
                        "description": {"type": "string"},
                        "required": {"type": "boolean"},
                        "default": {"type": "string"},
                        "deprecationMessage": {"type": "string"},
                    },
                }
            },
        },
        "outputs": {
            "type": "object",
            "additionalProperties": False,
            "patternProperties": {
                ID: {  # composite actions: each output maps a value
                    "type": "object",
                    "required": ["description", "value"],
                    "additionalProperties": False,
                    "properties": {"description": {"type": "string"}, "value": {"type": "string"}},
                }
            },
        },
        "runs": {
            "type": "object",
            "required": ["using", "steps"],
            "additionalProperties": False,
            "properties": {
                "using": {"const": "composite"},
                "steps": {"type": "array", "items": STEP},
            },
        },
        "branding": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "icon": {"type": "string"},
                "color": {"enum": COLORS},
            },
        },
    },
}


def metadata() -> dict[str, Any]:
    data = yaml.safe_load(ACTION.read_text())
    assert isinstance(data, dict)
    return data


def test_action_yml_is_valid_action_metadata() -> None:
    data = metadata()
    jsonschema.Draft7Validator.check_schema(ACTION_SCHEMA)
    errors = [e.message for e in jsonschema.Draft7Validator(ACTION_SCHEMA).iter_errors(data)]
    assert errors == []
    inputs = data["inputs"]
    assert [name for name, spec in inputs.items() if spec.get("required")] == ["task"]
    assert set(inputs) == {
        "task", "actor", "model", "test", "checks", "max-iterations", "budget-usd", "timeout",
        "args", "python-version", "open-pr", "upload-memory",
    }  # fmt: skip
    assert inputs["open-pr"]["default"] == "false" and inputs["upload-memory"]["default"] == "true"
    assert set(data["outputs"]) == {"loop-id", "status", "exit-code", "branch", "best-reward"}
    # every expression names an input or a step that exists
    text = ACTION.read_text()
    ids = {step.get("id") for step in data["runs"]["steps"]}
    assert set(re.findall(r"inputs\.([\w-]+)", text)) <= set(inputs)
    assert set(re.findall(r"steps\.([\w-]+)\.", text)) <= ids
    # the action installs its own checkout: a tagged action runs its own version of ralph
    install = next(s for s in data["runs"]["steps"] if s.get("id") == "install")
    assert '"$GITHUB_ACTION_PATH"' in install["run"]
    # inputs reach the shell only through the environment, never pasted into a script
    for step in data["runs"]["steps"]:
        assert "${{" not in step.get("run", "")


def test_the_wrong_metadata_is_caught_by_the_schema() -> None:
    data = metadata()
    data["inputs"]["task"]["requird"] = True
    data["outputs"]["status"].pop("value")
    data["runs"]["steps"][1].pop("shell")
    messages = [e.message for e in jsonschema.Draft7Validator(ACTION_SCHEMA).iter_errors(data)]
    assert len(messages) == 3, messages


ANSWER = {
    "reflection_text": "I added one too many.",
    "credit_assignment": {"root_cause": "an off-by-one in add", "failure_category": "logic_error"},
    "lessons_learned": ["check sums against the test's numbers"],
    "confidence": 0.8,
}


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository with a bug in add, pushed to a local `origin`."""
    calc = "def add(a, b):\n    return a - b\n"
    repo = make_calc_repo(tmp_path / "workspace", calc=calc, tests="", monkeypatch=monkeypatch)
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", str(origin)], check=True)
    git(repo, "remote", "add", "origin", str(origin))
    git(repo, "push", "-q", "origin", "main")
    return repo


def run_it(workspace: Path, tmp_path: Path, **inputs: str) -> tuple[Any, Path, dict[str, Any]]:
    temp, artifacts = tmp_path / "runner-temp", tmp_path / "artifacts"
    temp.mkdir()
    seen: dict[str, Any] = {}

    def setup_python(with_: dict[str, str]) -> None:
        seen["python-version"] = with_["python-version"]

    def upload_artifact(with_: dict[str, str]) -> None:
        shutil.copytree(with_["path"], artifacts / with_["name"])

    def installed(step: dict[str, Any]) -> None:  # ralph is installed here already
        seen["installed"] = True

    env = {
        **__import__("os").environ,
        "PATH": path_with(FAKES / "agents", FAKES / "bin", Path(sys.executable).parent),
        "FAKE_AGENT_ANSWER": json.dumps(ANSWER),
        "FAKE_AGENT_LOG": str(tmp_path / "agent.log"),
        "FAKE_GH_LOG": str(tmp_path / "gh.log"),
        **AGENT_CREDENTIALS,  # a workflow passes the agent's key from its secrets
    }
    run = run_action(
        ACTION,
        inputs=inputs,
        workspace=workspace,
        runner_temp=temp,
        env=env,
        stand_ins={
            "actions/setup-python": setup_python,
            "actions/upload-artifact": upload_artifact,
        },
        skip={"install": installed},
        github={"token": "ghs_faketoken"},
    )
    return run, artifacts, seen


def test_the_action_runs_a_loop_and_publishes_its_outcome(workspace: Path, tmp_path: Path) -> None:
    task = (
        "fix add\n"  # the fake agent applies these lines: the second now, the first next time
        "FAKE-EDIT: calc.py :: a + b + 1 => a + b\n"
        "FAKE-EDIT: calc.py :: a - b => a + b + 1"
    )
    run, artifacts, seen = run_it(
        workspace,
        tmp_path,
        task=task,
        actor="claude",
        model="claude-test-model",
        test=f'{sys.executable} -c "import calc, sys; sys.exit(calc.add(2, 3) != 5)"',
        **{"max-iterations": "3", "open-pr": "true", "args": "--iteration-timeout '5m'"},
    )
    assert run.failed is None, run.logs
    assert seen == {"python-version": "3.12", "installed": True}
    loop_id = run.outputs["loop-id"]
    assert re.fullmatch(r"ralph-fix-add-[a-z0-9-]+-[0-9a-f]{8}", loop_id)
    assert run.outputs == {
        "loop-id": loop_id,
        "status": "completed",
        "exit-code": "0",
        "branch": loop_branch(loop_id),
        "best-reward": "1.0",
    }
    assert run.skipped == ["Fail unless the checks pass"]
    # the artifact: the loop's records, valid, under the loop's name
    records = sorted((artifacts / loop_id).rglob("*.json"))
    assert [p.relative_to(artifacts / loop_id).as_posix() for p in records] == [
        f"{loop_id}/001.json",
        f"{loop_id}/002.json",
    ]
    assert all(validate_file(p) == [] for p in records)
    # the branch went to origin
    pushed = git(tmp_path / "origin.git", "rev-parse", f"refs/heads/{loop_branch(loop_id)}")
    assert pushed == git(workspace, "rev-parse", loop_branch(loop_id))
    # the pull request: onto main, with the loop's story as its body; the same in the summary
    (pr,) = [json.loads(line) for line in (tmp_path / "gh.log").read_text().splitlines()]
    argv = pr["argv"]
    assert argv[argv.index("--base") + 1] == "main" and "--draft" not in argv
    assert argv[argv.index("--head") + 1] == loop_branch(loop_id) and pr["token"]
    assert argv[argv.index("--title") + 1] == "ralph: fix add"
    for part in ("**completed** (success) after 2 iterations", "Reward curve", "0.00 → 1.00",
                 "an off-by-one in add", "check sums against the test's numbers"):  # fmt: skip
        assert part in pr["body"], pr["body"]
    assert summary_of(tmp_path / "runner-temp") == pr["body"]
    # the inputs arrived: the model as --model, the extra args parsed as the shell would
    acts = [json.loads(line) for line in (tmp_path / "agent.log").read_text().splitlines()]
    assert all("--model" in a["argv"] and "claude-test-model" in a["argv"] for a in acts)
    state = MemoryStore(workspace).read_state(loop_id)
    assert state.settings.iteration_timeout == 300 and state.settings.max_iterations == 3


def test_a_loop_that_cannot_start_fails_the_action_with_nothing_to_upload(
    workspace: Path, tmp_path: Path
) -> None:
    run, artifacts, _ = run_it(workspace, tmp_path, task="fix it", actor="nonsense-actor")
    assert run.outputs["exit-code"] == "2" and run.outputs["loop-id"] == ""
    assert run.failed == "Fail unless the checks pass"
    assert "Upload the loop's memory" in run.skipped and "Push the loop's branch" in run.skipped
    assert not artifacts.exists()
    assert "the loop did not start" in run.logs["Run the loop"]


def test_an_already_green_repository_leaves_nothing_to_push_or_upload(
    workspace: Path, tmp_path: Path
) -> None:
    green = f'{sys.executable} -c "import calc"'
    run, artifacts, _ = run_it(workspace, tmp_path, task="fix add", actor="claude", test=green,
                               **{"open-pr": "true"})  # fmt: skip
    assert run.failed is None, run.logs
    assert run.outputs["status"] == "completed" and run.outputs["exit-code"] == "0"
    assert run.outputs["branch"] == ""
    assert set(run.skipped) == {
        "Upload the loop's memory",
        "Push the loop's branch",
        "Open a pull request",
        "Fail unless the checks pass",
    }
    assert not artifacts.exists() and not (tmp_path / "gh.log").exists()
    assert "after 0 iterations" in summary_of(tmp_path / "runner-temp")
