"""Protected tests (loop/protect.py): an agent cannot succeed by editing the tests it is judged by.

In process over the fakes (FakeTests pass whatever calc.py says when `tests/test_calc.py` holds
`pytest.skip`: a test edit that cheats), the rule on its own, the workspaces' `original` and
`put_back` in real git, and end to end: a real git repository, real pytest and a `cmd:` agent.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from ralph import schemas
from ralph.config import load
from ralph.evaluators.judging import Baseline, CheckBaseline
from ralph.loop.protect import ProtectedTests, files_of_tests
from ralph.memory.store import MemoryStore
from ralph.workspace.base import FileChange
from ralph.workspace.git import GitWorkspace

from .conftest import RunCli
from .fakes.calc_project import git, make_calc_repo
from .fakes.loop import (
    TEST_FILE,
    TEST_TEXT,
    WEAKENED,
    FakeChat,
    FakeWorkspace,
    Step,
    make_loop,
    write,
)

CHEAT = {TEST_FILE: TEST_TEXT + f"\n{WEAKENED}('the agent gave up')\n"}
NOTE = f"edited {TEST_FILE}: put back, the edit did not count"


def records_of(root: Path, loop_id: str = "ralph-fake-1") -> list[dict[str, Any]]:
    """The loop's records as written, each valid under the record schema."""
    store = MemoryStore(root)
    found = []
    for _, path in store.record_paths(loop_id):
        data = json.loads(path.read_text())
        assert schemas.errors(schemas.RECORD, data) == [], path
        found.append(data)
    return found


# the loop, in process --------------------------------------------------------------------------


def test_an_attempt_that_only_edits_the_tests_does_not_succeed(tmp_path: Path) -> None:
    loop = make_loop(tmp_path, {1: Step(write=CHEAT), 2: write("full")}, tests=True)
    result = loop.start()
    assert result.stop_reason == "success" and result.iterations == 2  # not at 1, by the edit
    first, second = records_of(tmp_path)
    assert first["evaluator_output"]["passed"] is False
    assert first["ralph"]["protected_test_edits"] == [TEST_FILE]
    assert NOTE in first["notes"]
    insights = first["self_reflection"]["actionable_insights"]
    assert not any("changed no files" in i for i in insights)  # it changed the tests
    assert "protected_test_edits" not in second["ralph"]
    assert loop.reporter.noted(f"iteration 1: {NOTE}")
    # the judged tree is the committed tree: the test file as the baseline had it
    assert isinstance(loop.workspace, FakeWorkspace)
    tree = loop.workspace.commits[first["ralph"]["git_commit"]]
    assert tree[TEST_FILE].decode() == TEST_TEXT
    assert (tmp_path / TEST_FILE).read_text() == TEST_TEXT
    # nothing is lost: the agent's edit beside the record
    diff = (loop.store.artifacts_dir("ralph-fake-1", 1) / "test-edits.diff").read_text()
    assert WEAKENED in diff and TEST_FILE in diff
    assert first["actor_output"].get("files_modified") is None  # the edit is not the attempt's
    # the next prompt says which file and that the edit did not count
    prompt = loop.actor.prompts[2]
    assert "# Your edits of the tests did not count" in prompt and f"- {TEST_FILE}" in prompt
    assert "did not count" not in loop.actor.prompts[1]
    # and the reflection (the heuristic one, without a model) says so too
    insights = first["self_reflection"]["actionable_insights"]
    assert any(TEST_FILE in s and "not the tests" in s for s in insights)


def test_an_attempt_that_edits_the_tests_and_fixes_the_code_ends_green(tmp_path: Path) -> None:
    loop = make_loop(tmp_path, {1: write("full", write=CHEAT)}, tests=True)
    result = loop.start()
    assert result.stop_reason == "success" and result.iterations == 1
    (only,) = records_of(tmp_path)
    assert only["ralph"]["protected_test_edits"] == [TEST_FILE]
    assert only["actor_output"]["files_modified"] == ["calc.py"]
    assert (tmp_path / TEST_FILE).read_text() == TEST_TEXT


def test_allow_test_edits_lets_the_edit_count(tmp_path: Path) -> None:
    loop = make_loop(tmp_path, {1: Step(write=CHEAT)}, tests=True, allow_test_edits=True)
    result = loop.start()
    assert result.stop_reason == "success" and result.iterations == 1
    (only,) = records_of(tmp_path)
    assert "protected_test_edits" not in only["ralph"]
    assert (tmp_path / TEST_FILE).read_text() == CHEAT[TEST_FILE]
    assert not loop.reporter.noted("did not count")


def test_a_deleted_test_file_comes_back_and_a_new_one_stays(tmp_path: Path) -> None:
    def delete(workdir: Path) -> None:
        (workdir / TEST_FILE).unlink()

    new = {"tests/test_new.py": "def test_new():\n    assert True\n"}
    loop = make_loop(tmp_path, {1: write("partial", write=new, before=delete)}, tests=True)
    loop.start()
    first = records_of(tmp_path)[0]
    assert first["ralph"]["protected_test_edits"] == [TEST_FILE]
    assert (tmp_path / TEST_FILE).read_text() == TEST_TEXT
    assert (tmp_path / "tests/test_new.py").exists()
    assert sorted(first["actor_output"]["files_modified"]) == ["calc.py", "tests/test_new.py"]


def test_a_conftest_above_the_tests_is_protected_one_elsewhere_is_not(tmp_path: Path) -> None:
    files = {"tests/conftest.py": "collect_ignore = ['test_calc.py']\n", "docs/conftest.py": "\n"}
    loop = make_loop(tmp_path, {1: write("partial", write=files)}, tests=True, max_iterations=1)
    loop.start()
    first = records_of(tmp_path)[0]
    assert first["ralph"]["protected_test_edits"] == ["tests/conftest.py"]
    assert not (tmp_path / "tests/conftest.py").exists()  # created by the agent: removed
    assert (tmp_path / "docs/conftest.py").exists()


def test_without_git_the_edit_is_put_back_too(tmp_path: Path) -> None:
    loop = make_loop(tmp_path, {1: Step(write=CHEAT), 2: write("full")}, tests=True, git=False)
    result = loop.start()
    assert result.stop_reason == "success" and result.iterations == 2
    assert records_of(tmp_path)[0]["ralph"]["protected_test_edits"] == [TEST_FILE]
    assert (tmp_path / TEST_FILE).read_text() == TEST_TEXT


def test_the_reflector_reads_that_the_test_edit_did_not_count(tmp_path: Path) -> None:
    chat = FakeChat(default="not json")  # the heuristic takes over after one repair
    loop = make_loop(tmp_path, {1: Step(write=CHEAT)}, tests=True, chat=chat, max_iterations=1)
    loop.start()
    asked = chat.requests[0][-1].content
    assert "ralph put back my edits of these test files" in asked and TEST_FILE in asked


def test_a_resumed_loop_still_tells_the_next_attempt(tmp_path: Path) -> None:
    loop = make_loop(tmp_path, {1: Step(write=CHEAT)}, tests=True, max_iterations=1)
    loop.start()
    state = loop.state()
    state.status = "paused"
    loop.store.write_state(state)
    again = loop.again(max_iterations=2)
    again.runner.resume(again.state())
    assert f"- {TEST_FILE}" in loop.actor.prompts[2]


# the rule --------------------------------------------------------------------------------------


def test_test_files_are_the_files_of_test_ids_only() -> None:
    ids = ["tests/a/test_x.py::TestC::test_m[1::2]", "tests/test_y.py::test_n", "Cls::name"]
    ids += ["src/calc.py||ImportError|bad", "../up.py::t", "/abs/test_z.py::t"]
    assert files_of_tests(ids) == {"tests/a/test_x.py", "tests/test_y.py"}


def test_a_doctest_does_not_make_its_module_a_test_file() -> None:
    """`--doctest-modules` (humanize's pytest config): the code under test holds doctests, and
    putting it back would undo every fix the agent makes."""
    ids = ["src/pkg/number.py::pkg.number.ordinal", "src/pkg/time.py::pkg.time.Delta.days"]
    ids += ["tests/test_number.py::test_ordinal[1.5-x]", "tests/test_c.py::TestC::test_m"]
    assert files_of_tests(ids) == {"tests/test_number.py", "tests/test_c.py"}


def _baseline(role: str = "target", status: str = "fail", kind: str = "tests") -> Baseline:
    check = CheckBaseline(
        "tests",
        kind,  # type: ignore[arg-type]
        role,  # type: ignore[arg-type]
        status,
        1,
        failing=("tests/unit/test_x.py::test_a",),
        passing=("tests/test_y.py::test_b",),
    )
    return Baseline("baseline", {"tests": check})


def _change(path: str, kind: str = "modified") -> FileChange:
    return FileChange(path, kind, 1, 1, "diff")  # type: ignore[arg-type]


def test_which_changes_are_protected(tmp_path: Path) -> None:
    rule = ProtectedTests.of(_baseline())
    before = {
        "pyproject.toml": b'[project]\nname = "x"\n\n[tool.pytest.ini_options]\naddopts = "-q"\n',
        "setup.cfg": b"[metadata]\nname = x\n",
    }
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "y"\n\n[tool.pytest.ini_options]\naddopts = "-q"\n'
    )  # only [project] changed
    (tmp_path / "setup.cfg").write_text("[metadata]\nname = x\n[tool:pytest]\naddopts = -x\n")
    changes = [
        _change("tests/unit/test_x.py"),
        _change("tests/test_y.py", "deleted"),
        _change("tests/test_new.py", "created"),
        _change("tests/unit/conftest.py", "created"),
        _change("tests/other/conftest.py"),
        _change("pytest.ini"),
        _change("pyproject.toml"),
        _change("setup.cfg"),
        _change("calc.py"),
    ]
    found = rule.edits(changes, "", before.get, tmp_path)
    assert [c.path for c in found] == [
        "tests/unit/test_x.py",
        "tests/test_y.py",
        "tests/unit/conftest.py",
        "pytest.ini",
        "setup.cfg",  # a pytest section appeared
    ]


def test_paths_of_a_project_in_a_subfolder_are_matched_under_it(tmp_path: Path) -> None:
    rule = ProtectedTests.of(_baseline())
    changes = [_change("sub/tests/test_y.py"), _change("tests/test_y.py")]
    found = rule.edits(changes, "sub/", lambda _: None, tmp_path)
    assert [c.path for c in found] == ["sub/tests/test_y.py"]


@pytest.mark.parametrize(
    ("role", "status", "kind", "protects"),
    [
        ("target", "fail", "tests", True),
        ("guard", "pass", "tests", True),  # editing a guard's test could hide a regression
        ("guard", "error", "tests", False),  # not judged
        ("target", "fail", "command", False),
    ],
)
def test_which_checks_have_protected_tests(
    role: str, status: str, kind: str, protects: bool
) -> None:
    assert bool(ProtectedTests.of(_baseline(role, status, kind))) is protects


# the workspaces ------------------------------------------------------------------------------


def test_git_puts_back_modified_deleted_and_created_files_and_leaves_the_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_calc_repo(
        tmp_path / "repo", calc="x = 1\n", tests="t = 1\n", monkeypatch=monkeypatch
    )
    sub = repo / "sub"
    sub.mkdir()
    (sub / "run.sh").write_text("echo hi\n")
    (sub / "run.sh").chmod(0o755)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "sub")
    workspace = GitWorkspace(sub)
    workspace.begin_iteration()
    (sub / "run.sh").write_text("echo cheat\n")
    (sub / "run.sh").chmod(0o644)
    (repo / "tests" / "test_calc.py").unlink()
    (sub / "conftest.py").write_text("x = 2\n")
    (sub / "keep.py").write_text("kept = True\n")
    changes = workspace.changes()
    assert changes.prefix == "sub/"
    assert workspace.original("sub/run.sh") == b"echo hi\n"
    assert workspace.original("sub/conftest.py") is None
    workspace.put_back(["sub/run.sh", "tests/test_calc.py", "sub/conftest.py"])
    assert (sub / "run.sh").read_text() == "echo hi\n" and os.access(sub / "run.sh", os.X_OK)
    assert (repo / "tests" / "test_calc.py").read_text() == "t = 1\n"
    assert not (sub / "conftest.py").exists()
    assert (sub / "keep.py").exists()
    assert git(repo, "diff", "--cached", "--name-only") == ""
    assert [f.path for f in workspace.changes().files] == ["sub/keep.py"]


# settings and the command line -----------------------------------------------------------------


def test_allow_test_edits_from_the_config_and_the_environment(tmp_path: Path) -> None:
    assert load(tmp_path, environ={}).allow_test_edits is False
    assert load(tmp_path, environ={"RALPH_ALLOW_TEST_EDITS": "1"}).allow_test_edits is True
    config = tmp_path / ".aiwg/ralph/config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text("allow_test_edits: true\n")
    assert load(tmp_path, environ={}).allow_test_edits is True


def test_run_and_resume_take_allow_test_edits(ralph: RunCli) -> None:
    for command in ("run", "resume"):
        result = ralph(command, "--help")
        text = " ".join(result.out.split())
        assert "--allow-test-edits" in text and "RALPH_ALLOW_TEST_EDITS" in text, command


def test_a_batch_task_about_the_tests_runs_with_allow_test_edits(tmp_path: Path) -> None:
    from ralph.errors import ConfigError
    from ralph.loop.batch import Entry, load_tasks

    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(
        "defaults: {allow-test-edits: true}\n"
        "tasks: [{task: add tests}, {task: fix add, allow_test_edits: false}]\n"
    )
    about_tests, fix = load_tasks(tasks)
    assert "--allow-test-edits" in Entry(about_tests, "ralph-a-00000001").argv()
    assert "--allow-test-edits" not in Entry(fix, "ralph-b-00000001").argv()
    tasks.write_text("- {task: x, allow_test_edits: yes please}\n")
    with pytest.raises(ConfigError, match="`allow_test_edits` must be true or false"):
        load_tasks(tasks)


# end to end ----------------------------------------------------------------------------------

AGENT = r"""
import json, os, sys
from pathlib import Path
iteration = os.environ["RALPH_ITERATION"]
seen = Path(os.environ["SEEN_DIR"])
(seen / f"prompt-{iteration}.md").write_text(Path(os.environ["RALPH_PROMPT_FILE"]).read_text())
step = json.loads(Path(os.environ["PLAN"]).read_text()).get(iteration, {})
for path, text in step.items():
    Path(path).write_text(text)
print("done")
"""
BROKEN = "def f(x):\n    return 0\n"
FIXED = "def f(x):\n    return abs(x)\n"
TESTS = "from calc import f\n\n\ndef test_negative():\n    assert f(-1) == 1\n"
EDITED = "from calc import f\n\n\ndef test_negative():\n    assert f(-1) == f(-1)\n"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = make_calc_repo(tmp_path / "repo", calc=BROKEN, tests=TESTS, monkeypatch=monkeypatch)
    (tmp_path / "seen").mkdir()
    (tmp_path / "agent.py").write_text(AGENT)
    monkeypatch.setenv("SEEN_DIR", str(tmp_path / "seen"))
    monkeypatch.setenv("PLAN", str(tmp_path / "plan.json"))
    monkeypatch.setenv("CI", "true")
    return root


def _run(ralph: RunCli, repo: Path, plan: dict[str, Any], *extra: str) -> dict[str, Any]:
    Path(os.environ["PLAN"]).write_text(json.dumps(plan))
    actor = f"cmd:{sys.executable} {Path(os.environ['PLAN']).parent / 'agent.py'}"
    test = f"{sys.executable} -m pytest -q -p no:cacheprovider tests"
    args = ["run", "make f pass", "--actor", actor, "--test", test, "--reflector", "heuristic"]
    result = ralph(*args, "--json", *extra, cwd=repo)
    assert result.code in (0, 1), result.err
    summary: dict[str, Any] = json.loads(result.out)
    return summary


def test_end_to_end_a_test_edit_does_not_count_and_the_next_prompt_says_so(
    ralph: RunCli, repo: Path
) -> None:
    test_file = "tests/test_calc.py"
    summary = _run(ralph, repo, {"1": {test_file: EDITED}, "2": {"calc.py": FIXED}}, "-n", "2")
    assert summary["stop_reason"] == "success" and summary["reward_history"] == [0.0, 1.0]
    store = MemoryStore(repo)
    loop_id = summary["loop_id"]
    first = json.loads(store.record_path(loop_id, 1).read_text())
    assert schemas.errors(schemas.RECORD, first) == []
    assert first["ralph"]["protected_test_edits"] == [test_file]
    assert "git_commit" not in first["ralph"]  # the edit put back, nothing was left to commit
    assert "nothing to commit" in first["notes"]
    assert git(repo, "show", f"HEAD:{test_file}") + "\n" == TESTS  # iteration 2's commit
    diff = (store.artifacts_dir(loop_id, 1) / "test-edits.diff").read_text()
    assert "+    assert f(-1) == f(-1)" in diff
    second = (Path(os.environ["SEEN_DIR"]) / "prompt-2.md").read_text()
    assert "# Your edits of the tests did not count" in second and f"- {test_file}" in second
    assert (repo / test_file).read_text() == TESTS
    assert git(repo, "status", "--porcelain", "--", ".", ":(exclude).aiwg") == ""


@pytest.mark.parametrize("allow", [False, True])
def test_end_to_end_editing_the_tests_and_fixing_the_code_or_allowed_edits_end_green(
    ralph: RunCli, repo: Path, allow: bool
) -> None:
    test_file = "tests/test_calc.py"
    step = {test_file: EDITED} if allow else {test_file: EDITED, "calc.py": FIXED}
    extra = ["--allow-test-edits"] if allow else []
    summary = _run(ralph, repo, {"1": step}, "-n", "1", *extra)
    assert summary["stop_reason"] == "success"
    record = json.loads(MemoryStore(repo).record_path(summary["loop_id"], 1).read_text())
    assert ("protected_test_edits" in record["ralph"]) is not allow
    assert (repo / test_file).read_text() == (EDITED if allow else TESTS)
