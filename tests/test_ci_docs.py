"""docs/ci.md and examples/: the workflows shown are the files shipped, and they hold together."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from ralph.loop.tasks_file import load_tasks

from .conftest import EXAMPLE_LOOP, REPO

EXAMPLES = REPO / "examples"
WORKFLOWS = {
    "on-demand": EXAMPLES / "workflows" / "ralph-on-demand.yml",
    "matrix": EXAMPLES / "workflows" / "ralph-matrix.yml",
}


def workflow(name: str) -> dict[str, Any]:
    data = yaml.safe_load(WORKFLOWS[name].read_text())
    assert isinstance(data, dict)
    return data


def ralph_steps(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        step
        for job in data["jobs"].values()
        for step in job["steps"]
        if str(step.get("uses", "")).endswith("/ralph@v0.1.0")
    ]


def test_the_docs_show_the_example_workflows_verbatim() -> None:
    blocks = re.findall(r"^```yaml\n(.*?)^```$", (REPO / "docs" / "ci.md").read_text(), re.S | re.M)
    assert blocks[:2] == [WORKFLOWS["on-demand"].read_text(), WORKFLOWS["matrix"].read_text()]
    assert "[docs/ci.md](docs/ci.md)" in (REPO / "README.md").read_text()


def test_the_workflows_give_the_action_only_inputs_it_has() -> None:
    inputs = set(yaml.safe_load((REPO / "action.yml").read_text())["inputs"])
    for name in WORKFLOWS:
        steps = ralph_steps(workflow(name))
        assert steps, name
        for step in steps:
            assert "task" in step["with"] and set(step["with"]) <= inputs, step


def test_the_on_demand_workflow_answers_comments_and_dispatches() -> None:
    data = workflow("on-demand")
    triggers = data[True]  # YAML 1.1 reads the key `on` as true
    assert set(triggers) == {"workflow_dispatch", "issue_comment"}
    job = data["jobs"]["ralph"]
    assert "author_association" in job["if"] and "/ralph " in job["if"]
    (step,) = ralph_steps(data)
    assert step["with"]["open-pr"] is True


def test_the_matrix_workflow_merges_every_memory_and_publishes_the_analysis(
    tmp_path: Path,
) -> None:
    """The merge job's own commands, run against memories laid out as download-artifact does."""
    data = workflow("matrix")
    assert len(data["jobs"]["loop"]["strategy"]["matrix"]["include"]) >= 2
    job = data["jobs"]["memory"]
    assert job["needs"] == "loop" and "cancelled()" in job["if"]
    download = next(s for s in job["steps"] if "download-artifact" in s.get("uses", ""))
    assert download["with"] == {"pattern": "ralph-*", "path": "memories"}
    upload = next(s for s in job["steps"] if "upload-artifact" in s.get("uses", ""))
    # the artifacts: memories/<artifact name>/<loop id>/NNN.json, from the action's export
    project = tmp_path / "project"
    project.mkdir()
    artifact = project / "memories" / EXAMPLE_LOOP / EXAMPLE_LOOP
    shutil.copytree(REPO / ".aiwg" / "ralph" / "reflections" / EXAMPLE_LOOP, artifact)
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
    }
    for step in job["steps"]:
        if "run" in step and "pip install" not in step["run"]:
            done = subprocess.run(
                ["bash", "-eo", "pipefail", "-c", step["run"]],
                cwd=project,
                env=env,
                capture_output=True,
                text=True,
            )
            assert done.returncode == 0, (step["name"], done.stderr)
    for path in upload["with"]["path"].split():
        assert (project / path).stat().st_size > 0
    assert EXAMPLE_LOOP in (tmp_path / "summary.md").read_text()
    assert (project / ".aiwg" / "ralph" / "reflections" / EXAMPLE_LOOP / "003.json").exists()


def test_the_example_tasks_file_and_the_readme_one_are_valid(tmp_path: Path) -> None:
    names = [task.name for task in load_tasks(EXAMPLES / "tasks.yaml")]
    assert names == ["dates", "billing-types", "api-lint"]
    readme = (REPO / "README.md").read_text()
    snippet = re.search(r"```yaml\n(# tasks\.yaml.*?)```", readme, re.S)
    assert snippet is not None
    (tmp_path / "tasks.yaml").write_text(snippet.group(1))
    tasks = load_tasks(tmp_path / "tasks.yaml")
    assert [t.name for t in tasks] == ["dates", "lint", "make-mypy-pass"]
    assert all(t.actor == "claude" and t.max_iterations == 5 for t in tasks)
