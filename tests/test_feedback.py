"""Human feedback as memory: stored and validated, shown, retrieved as a lesson by a later loop
with the same failure (ranked first), confirmed lessons boosted, acceptance in `analyze`."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from ralph.memory.feedback import boost_confirmed, read_feedback, record_feedback
from ralph.memory.lessons import Lesson
from ralph.memory.store import MemoryStore

from .conftest import RunCli, copy_project, isolated_environment, ralph_subprocess
from .fakes.calc_project import git, make_calc_repo

AGENT = r"""
import os
from pathlib import Path
n = os.environ["RALPH_ITERATION"]
seen = Path(os.environ["SEEN_DIR"])
count = len(list(seen.glob("prompt-*")))
(seen / f"prompt-{count}.md").write_text(Path(os.environ["RALPH_PROMPT_FILE"]).read_text())
Path("calc.py").write_text("def absolute(x: int) -> int:\n    return -x if x < 0 else x\n")
"""
BUGGY = "def absolute(x: int) -> int:\n    return x\n"
TESTS = (
    "from calc import absolute\n\n\ndef test_negative() -> None:\n    assert absolute(-3) == 3\n"
)


def tools(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (folder / "seen").mkdir()
    (folder / "agent.py").write_text(AGENT)
    monkeypatch.setenv("SEEN_DIR", str(folder / "seen"))
    monkeypatch.setenv("CI", "true")


def loop_args() -> list[str]:
    actor = f"cmd:{sys.executable} {Path(os.environ['SEEN_DIR']).parent / 'agent.py'}"
    test = f"{sys.executable} -m pytest -q"
    args = ["run", "fix absolute() for negative numbers", "--actor", actor, "--test", test]
    return [*args, "--reflector", "heuristic", "--json"]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """Made once for the module: the buggy project after one loop that fixed it."""
    folder = tmp_path_factory.mktemp("feedback")
    with isolated_environment(tmp_path_factory) as monkeypatch:
        root = make_calc_repo(folder / "repo", calc=BUGGY, tests=TESTS, monkeypatch=monkeypatch)
        tools(folder, monkeypatch)
        result = ralph_subprocess(*loop_args(), cwd=root)
    assert result.code == 0, result.err
    return root, str(json.loads(result.out)["loop_id"])


@pytest.fixture
def project(template: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the template project, with its tools; the finished loop is `finished`."""
    root = copy_project(template[0], tmp_path / "repo")
    for role in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{role}_NAME", "t")
        monkeypatch.setenv(f"GIT_{role}_EMAIL", "t@example.invalid")
    tools(tmp_path, monkeypatch)
    return root


@pytest.fixture
def finished(template: tuple[Path, str]) -> str:
    return template[1]


def run_loop(ralph: RunCli, root: Path) -> dict[str, Any]:
    git(root, "checkout", "-q", "main")  # every loop starts from the buggy commit
    result = ralph(*loop_args(), cwd=root)
    assert result.code == 0, result.err
    summary: dict[str, Any] = json.loads(result.out)
    return summary


def test_a_rejected_success_is_stored_shown_retrieved_first_and_counted(
    ralph: RunCli, project: Path, finished: str
) -> None:
    first = finished
    given = ralph("feedback", first, "--reject", "--note", "MARKER-broke-the-api", cwd=project)
    assert given.code == 0, given.err
    assert "feedback: rejected by a person" in given.out and "MARKER-broke-the-api" in given.out
    stored = read_feedback(MemoryStore(project), first)
    assert stored is not None and stored["verdict"] == "rejected"
    assert stored["fingerprint"] and stored["failure"]  # what the loop set out to fix

    shown = ralph("reflections", "show", first, cwd=project)
    assert "feedback: rejected by a person" in shown.out and "MARKER-broke-the-api" in shown.out

    run_loop(ralph, project)  # the same failure again: the verdict is its first lesson
    prompt = (Path(os.environ["SEEN_DIR"]) / "prompt-0.md").read_text()  # its first prompt
    assert "MARKER-broke-the-api" in prompt
    assert "A person rejected a success of the loop" in prompt

    report = ralph("analyze", "--json", cwd=project)
    acceptance = json.loads(report.out)["summary"]["acceptance"]
    assert acceptance == {
        "reviewed": 1,
        "accepted": 0,
        "rejected": 1,
        "not_taken": 0,
        "acceptance_rate": 0.0,
    }
    assert "acceptance 0" in ralph("analyze", cwd=project).out


def test_feedback_needs_one_verdict_and_a_known_finished_loop(
    ralph: RunCli, project: Path, finished: str
) -> None:
    loop = finished
    both = ralph("feedback", loop, "--accept", "--reject", cwd=project)
    assert both.code == 2 and "exactly one verdict" in both.err
    unknown = ralph("feedback", "ralph-nope-00000000", "--accept", cwd=project)
    assert unknown.code == 2 and "Traceback" not in unknown.err


def test_implicit_signals_never_replace_a_persons_verdict(
    ralph: RunCli, project: Path, finished: str
) -> None:
    loop = finished
    store = MemoryStore(project)
    assert record_feedback(store, loop, "not_taken", source="prune") is not None
    assert ralph("feedback", loop, "--accept", cwd=project).code == 0
    assert record_feedback(store, loop, "not_taken", source="prune") is None
    stored = read_feedback(store, loop)
    assert stored is not None and (stored["verdict"], stored["source"]) == ("accepted", "explicit")
    # an accepted loop's reflections are confirmed: their lessons rank higher
    lessons = [Lesson(f"{loop}#1.0", "a", f"{loop}#1", 0.5), Lesson("x#1.0", "b", "x#1", 0.5)]
    assert [lesson.score for lesson in boost_confirmed(store, lessons)] == [0.75, 0.5]
    # a broken file is not feedback (and not a crash)
    (store.loop_dir(loop) / "feedback.json").write_text('{"verdict": "maybe"}')
    assert read_feedback(store, loop) is None


def test_an_apply_of_a_failed_loop_confirms_nothing(project: Path, finished: str) -> None:
    """An earlier version recorded `apply` of a failed loop as accepted: it boosts no lesson."""
    store = MemoryStore(project)
    written = record_feedback(store, finished, "accepted", source="apply")
    assert written is not None  # the loop succeeded: applying it is a verdict
    lessons = [Lesson(f"{finished}#1.0", "a", f"{finished}#1", 0.5)]
    assert [lesson.score for lesson in boost_confirmed(store, lessons)] == [0.75]
    path = store.loop_dir(finished) / "feedback.json"
    path.write_text(json.dumps({**written, "loop_status": "limit"}))
    assert read_feedback(store, finished) is not None
    assert [lesson.score for lesson in boost_confirmed(store, lessons)] == [0.5]
