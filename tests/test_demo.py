"""`ralph demo`: the real loop on the demo repository, where memory makes the difference."""

from __future__ import annotations

import json
from pathlib import Path

from ralph import schemas
from ralph.memory.store import MemoryStore
from ralph.templates import load_template

from .conftest import RunCli


def test_demo_reaches_green_at_iteration_two_through_its_reflection(
    ralph: RunCli, tmp_path: Path
) -> None:
    repo = tmp_path / "demo"
    result = ralph("demo", "--keep", str(repo), "--json", cwd=tmp_path)
    assert result.code == 0, result.err
    summary = json.loads(result.out)
    assert summary["stop_reason"] == "success" and summary["iterations"] == 2
    assert summary["reward_history"][-1] == 1.0
    assert "SCRIPTED actor" in result.err
    assert "learning curve" in result.err and str(repo) in result.err
    store = MemoryStore(repo)
    records = store.read_records(summary["loop_id"])
    assert [f.problems for f in records] == [[], []]
    for f in records:
        assert schemas.errors(schemas.RECORD, json.loads(f.path.read_text())) == []
    prompt = (store.artifacts_dir(summary["loop_id"], 2) / "prompt.md").read_text()
    first = records[0].record
    assert first is not None and first.self_reflection.reflection_text in prompt


def test_without_the_reflection_in_the_prompt_the_demo_does_not_get_there(
    ralph: RunCli, tmp_path: Path
) -> None:
    repo = tmp_path / "demo"
    from ralph.cli.demo import build_repository

    build_repository(repo)
    # A user prompt override that drops the reflections section: the memory never reaches
    # the actor, and the scripted actor cannot find the fix.
    template = load_template("actor", project_root=None)
    start = template.index("{{#has_reflections}}")
    end = template.index("{{/has_reflections}}") + len("{{/has_reflections}}")
    override = repo / ".aiwg/ralph/prompts/actor.mustache"
    override.parent.mkdir(parents=True, exist_ok=True)
    override.write_text(template[:start] + template[end:])
    # only the tests judge (the first test runs all three checks): they alone stay red
    args = ["--actor", "script:demo-actor.yaml", "--reflector", "heuristic", "--check", "pytest"]
    result = ralph("run", "fix the parser", *args, "--max-iterations", "2", "--json", cwd=repo)
    assert result.code == 1, result.err
    summary = json.loads(result.out)
    assert summary["iterations"] == 2 and summary["reward_history"][-1] < 1.0
