"""Judging against the baseline, end to end: a git repository whose ruff already fails, real
pytest and ruff, `ralph init`, and a fake agent (a `cmd:` script following a plan per call)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import RunCli, copy_project, isolated_environment, ralph_subprocess
from .fakes.calc_project import git, make_calc_repo

AGENT = r"""
import json, os, sys
from pathlib import Path
n = os.environ["RALPH_ITERATION"]
seen = Path(os.environ["SEEN_DIR"])
(seen / f"prompt-{n}.md").write_text(Path(os.environ["RALPH_PROMPT_FILE"]).read_text())
for name in ("calc.py", "legacy.py"):
    (seen / f"{name}-before-{n}").write_text(Path(name).read_text())
step = json.loads(Path(os.environ["PLAN"]).read_text()).get(n, {})
for path, text in step.items():
    Path(path).write_text(text)
print("done")
"""

BUGGY = "def absolute(x: int) -> int:\n    return x\n"
FIXED = "def absolute(x: int) -> int:\n    return -x if x < 0 else x\n"
FIXED_WITH_NEW_FINDING = "import json\n\n\n" + FIXED
BROKEN = "def absolute(x: int) -> int\n    return x\n"
LEGACY = "import os\nimport sys\n\n\ndef old() -> None:\n    pass\n"  # two F401, old
TESTS = """\
from calc import absolute


def test_positive() -> None:
    assert absolute(2) == 2


def test_zero() -> None:
    assert absolute(0) == 0


def test_negative() -> None:
    assert absolute(-3) == 3
"""
PYPROJECT = """\
[tool.ruff]
cache-dir = "/tmp/ralph-test-ruff-cache"

[tool.ruff.lint]
select = ["F"]
"""


def on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """`ralph init` writes the bare `pytest` and `ruff` commands: this interpreter's must answer."""
    bin_dir = str(Path(sys.executable).parent)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Made once for the module, copied by each test: "plain", calc.py with one bug
    (test_negative fails) and legacy.py with two old ruff findings; "initialised", the same
    after `ralph init`, committed."""
    folder = tmp_path_factory.mktemp("judging")
    with isolated_environment(tmp_path_factory) as monkeypatch:
        on_path(monkeypatch)
        root = make_calc_repo(folder / "plain", calc=BUGGY, tests=TESTS, monkeypatch=monkeypatch)
        (root / "legacy.py").write_text(LEGACY)
        (root / "pyproject.toml").write_text(PYPROJECT)
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "legacy code and lint configuration")
        initialised = copy_project(root, folder / "initialised")
        init = ralph_subprocess("init", cwd=initialised)
        assert init.code == 0, init.err
        git(initialised, "add", "-A")
        git(initialised, "commit", "-q", "-m", "ralph init")
    return {"plain": root, "initialised": initialised}


def prepare(template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = copy_project(template, tmp_path / "repo")
    for role in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{role}_NAME", "t")
        monkeypatch.setenv(f"GIT_{role}_EMAIL", "t@example.invalid")
    tools = tmp_path / "tools"
    (tools / "seen").mkdir(parents=True)
    (tools / "agent.py").write_text(AGENT)
    monkeypatch.setenv("SEEN_DIR", str(tools / "seen"))
    monkeypatch.setenv("PLAN", str(tools / "plan.json"))
    monkeypatch.setenv("CI", "true")
    on_path(monkeypatch)
    return root


@pytest.fixture
def project(templates: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """calc.py with one bug (test_negative fails), legacy.py with two old ruff findings."""
    return prepare(templates["plain"], tmp_path, monkeypatch)


@pytest.fixture
def initialised(
    templates: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """`project` after `ralph init`, committed."""
    return prepare(templates["initialised"], tmp_path, monkeypatch)


def plan(steps: dict[str, dict[str, str]]) -> None:
    Path(os.environ["PLAN"]).write_text(json.dumps(steps))


def seen(name: str) -> str:
    return (Path(os.environ["SEEN_DIR"]) / name).read_text()


def run(ralph: RunCli, root: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    actor = f"cmd:{sys.executable} {Path(os.environ['PLAN']).parent / 'agent.py'}"
    args = ["run", "fix absolute() for negative numbers", "--actor", actor, "--json"]
    result = ralph(*args, "--reflector", "heuristic", *extra, cwd=root)
    return result.code, json.loads(result.out) if result.out.strip() else {}, result.err


def records(root: Path, loop_id: str) -> list[dict[str, Any]]:
    folder = root / ".aiwg/ralph/reflections" / loop_id
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


def test_init_writes_the_failing_linter_as_a_guard_and_the_loop_ends_green_at_iteration_two(
    ralph: RunCli, project: Path
) -> None:
    init = ralph("init", cwd=project)
    assert init.code == 0, init.err
    said = " ".join(init.out.split())
    assert "; a guard (must not get worse): 2 findings before the loop, not your task" in said
    assert "pytest: 1 of 3 tests failed; a target (must end green): the tests failing" in said
    config = (project / ".aiwg/ralph/config.yaml").read_text()
    assert "role: guard" in config and "set `role: target`" in config
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "ralph init")

    plan({"1": {}, "2": {"calc.py": FIXED}})
    code, summary, err = run(ralph, project)
    assert code == 0, err
    assert summary["stop_reason"] == "success" and summary["iterations"] == 2
    assert summary["targets"] == ["pytest"] and summary["guards"] == ["ruff"]
    assert summary["regressions"] == 0
    assert "guard ruff: 2 findings before the loop, not your task" in err
    for n in ("1", "2"):
        prompt = seen(f"prompt-{n}.md")
        assert "legacy.py" not in prompt  # an old finding is never itemised as work
        assert "ruff: 2 errors that were already there before the loop; not your task" in prompt
        assert "tests/test_calc.py::test_negative" in prompt
    first, second = records(project, summary["loop_id"])
    assert first["ralph"]["check_roles"] == {"pytest": "target", "ruff": "guard"}
    assert (first["ralph"]["fixed"], first["ralph"]["remaining"]) == (0, 1)
    assert second["evaluator_output"]["passed"] is True
    assert second["evaluator_output"]["reward_signal"] == 1.0
    assert (second["ralph"]["fixed"], second["ralph"]["regressions"]) == (1, 0)
    assert "were not the task" in second["self_reflection"]["reflection_text"]
    state = json.loads(
        (project / ".aiwg/ralph/loops" / summary["loop_id"] / "state.json").read_text()
    )
    assert state["baseline"]["roles"] == {"pytest": "target", "ruff": "guard"}


def test_a_fix_that_adds_a_new_finding_is_not_done_and_the_next_prompt_names_exactly_it(
    ralph: RunCli, initialised: Path
) -> None:
    plan({"1": {"calc.py": FIXED_WITH_NEW_FINDING}, "2": {"calc.py": FIXED}})
    code, summary, err = run(ralph, initialised)
    assert code == 0, err
    assert summary["iterations"] == 2 and summary["reward_history"][1] == 1.0
    status = json.loads(ralph("status", summary["loop_id"], "--json", cwd=initialised).out)
    assert summary["reward_history"][0] < status["baseline_reward"]  # fixed one, broke one
    second = seen("prompt-2.md")
    failing = second.split("# Checks that fail right now")[1].split("Already failing before")[0]
    new_lines = [line for line in failing.splitlines() if line.startswith("- ")]
    assert len(new_lines) == 1
    assert new_lines[0].startswith("- calc.py:1: ") and "`json` imported but unused" in new_lines[0]
    assert "new: not there before your change" in new_lines[0]
    assert "legacy.py" not in second
    first = records(initialised, summary["loop_id"])[0]
    assert first["evaluator_output"]["passed"] is False
    assert (first["ralph"]["fixed"], first["ralph"]["regressions"]) == (1, 1)
    reflection = first["self_reflection"]
    assert (
        "My change fixed 1 target failure (tests/test_calc.py::test_negative)"
        in (reflection["reflection_text"])
    )
    category = reflection["credit_assignment"]["failure_category"]
    assert category == "incomplete_implementation"  # a lint finding, not "integration_error"


def test_test_narrows_the_configured_pytest_instead_of_running_it_twice(
    ralph: RunCli, initialised: Path
) -> None:
    plan({"1": {"calc.py": FIXED}})
    test = f"{sys.executable} -m pytest -q -p no:cacheprovider tests/test_calc.py"
    code, summary, err = run(ralph, initialised, "--test", test)
    assert code == 0, err
    assert summary["targets"] == ["tests"] and summary["guards"] == ["ruff"]
    (record,) = records(initialised, summary["loop_id"])
    assert [r["tool"] for r in record["evaluator_output"]["results"]] == ["tests", "ruff"]


def test_an_attempt_worse_than_the_baseline_is_rolled_back_and_the_prompt_matches_the_tree(
    ralph: RunCli, project: Path
) -> None:
    (project / "legacy.py").write_text("def old() -> None:\n    pass\n")  # ruff green: a target
    git(project, "commit", "-q", "-am", "clean legacy")
    plan({"1": {"calc.py": BROKEN}, "2": {"legacy.py": "import os\n" + LEGACY}, "3": {}})
    test = f"{sys.executable} -m pytest -q -p no:cacheprovider tests"
    ruff = f"{sys.executable} -m ruff check --no-cache ."
    code, summary, err = run(
        ralph, project, "--test", test, "--check", ruff, "--max-iterations", "3"
    )
    assert code == 1, err
    rolled = "iteration 1: rolled back: broke what worked before; restored the code of the start"
    assert rolled in err
    assert seen("calc.py-before-2") == BUGGY  # the broken attempt is gone from the tree
    second = seen("prompt-2.md")
    now = second.split("# Checks that fail right now")[1].split("# Your last attempt")[0]
    assert "SyntaxError" not in now and "test_negative" in now
    reverted = second.split("# Your last attempt was reverted")[1].split("\n# ")[0]
    assert "calc.py:1" in reverted
    # attempt 2 broke a target (a new ruff finding) and fixed nothing: rolled back as well
    assert "iteration 2: rolled back: broke what worked before" in err
    assert seen("legacy.py-before-3") == "def old() -> None:\n    pass\n"
    assert summary["best_reward"] is not None and summary["best_reward"] <= 0.99
    # `ralph status` says it too, replayed from the records
    status = ralph("status", summary["loop_id"], cwd=project).out
    assert "  worse       iteration 1: rolled back: broke what worked before; restored" in status
    assert "iteration 2: rolled back: broke what worked before" in status
    shown = json.loads(ralph("status", summary["loop_id"], "--json", cwd=project).out)
    assert [text.split(":")[1] for text in shown["worse"]] == [" rolled back"] * 2


def test_strict_makes_the_old_findings_a_target(ralph: RunCli, initialised: Path) -> None:
    plan({"1": {"calc.py": FIXED}})
    code, summary, err = run(ralph, initialised, "--strict", "--max-iterations", "1")
    assert code == 1, err
    assert summary["targets"] == ["pytest", "ruff"] and summary["guards"] == []
    assert "legacy.py" in seen("prompt-1.md")
    assert summary["reward_history"][0] <= 0.99


def test_nothing_to_do_when_only_a_guard_fails(ralph: RunCli, project: Path) -> None:
    (project / "calc.py").write_text(FIXED)
    git(project, "commit", "-q", "-am", "fixed already")
    assert ralph("init", cwd=project).code == 0
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "ralph init")
    code, summary, err = run(ralph, project)
    assert code == 0, err
    assert summary["stop_reason"] == "already_green" and summary["iterations"] == 0
    assert "no target fails: ruff failed before the loop" in err and "--strict" in err
    # what to do, in the same words as `ralph doctor` (loop/announce.py)
    act = "nothing for the loop to fix: name what must change with --check NAME or --test CMD"
    assert act in err
    doctor = ralph("doctor", "-a", f"cmd:{sys.executable} -c pass", "--json", cwd=project)
    rows = {row["name"]: row for row in json.loads(doctor.out)["findings"]}
    assert (
        rows["(all)"]["hint"]
        == "name what must change with --check NAME or --test CMD, or use --strict"
    )


def test_init_leaves_out_a_check_that_cannot_run(
    ralph: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "mypy.ini").write_text("[mypy]\n")  # no Python files: mypy cannot run
    (tmp_path / "ruff.toml").write_text("")
    on_path(monkeypatch)
    result = ralph("init", cwd=tmp_path)
    assert result.code == 0, result.err
    assert "mypy: left out, could not run" in result.out
    assert "ruff: passes; a target (must end green): passes now" in result.out
    config = (tmp_path / ".aiwg/ralph/config.yaml").read_text()
    assert "mypy" not in config.split("checks:")[1].split("actor:")[0]


def test_bad_success_value_exits_2_with_one_line(ralph: RunCli, project: Path) -> None:
    config = project / ".aiwg/ralph/config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text("success: always\nchecks: [pytest]\n")
    result = ralph("run", "x", "--actor", "cmd:true", cwd=project)
    assert result.code == 2
    assert result.err.splitlines()[0].endswith("success: must be baseline or strict, not 'always'")
