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
from ralph.loop.protect import ProtectedTests, files_of_tests, put_back, spliced
from ralph.memory.store import MemoryStore
from ralph.testing import (
    TEST_FILE,
    TEST_TEXT,
    WEAKENED,
    FakeChat,
    FakeWorkspace,
    Step,
    make_loop,
    write,
)
from ralph.workspace.base import FileChange
from ralph.workspace.git import GitWorkspace
from ralph.workspace.snapshot import SnapshotWorkspace

from .conftest import RunCli
from .fakes.calc_project import git, make_calc_repo

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


def test_a_conftest_anywhere_in_the_tree_is_protected(tmp_path: Path) -> None:
    # pytest loads a conftest.py in every folder it collects, and its hooks apply to all tests
    files = {"tests/conftest.py": "collect_ignore = ['test_calc.py']\n", "docs/conftest.py": "\n"}
    loop = make_loop(tmp_path, {1: write("partial", write=files)}, tests=True, max_iterations=1)
    loop.start()
    first = records_of(tmp_path)[0]
    assert sorted(first["ralph"]["protected_test_edits"]) == [
        "docs/conftest.py",
        "tests/conftest.py",
    ]
    assert not (tmp_path / "tests/conftest.py").exists()  # created by the agent: removed
    assert not (tmp_path / "docs/conftest.py").exists()


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


# configuration files protected by section ------------------------------------------------------

PYPROJECT = (
    '[project]\nname = "calc"\n\n[tool.pytest.ini_options]\naddopts = "-q"\n\n'
    "[tool.ruff]\nline-length = 100\n"
)
EDITED_PYPROJECT = PYPROJECT.replace('"-q"', "\"-q -k 'not easter'\"").replace("100", "120")
KEPT_PYPROJECT = PYPROJECT.replace("100", "120")  # the agent's ruff edit, not its pytest edit


@pytest.mark.parametrize("git", [True, False])
def test_of_a_pyproject_only_the_pytest_section_is_put_back(tmp_path: Path, git: bool) -> None:
    """Found on python-dateutil: `-k 'not easter'` and a ruff line-length in one edit of
    pyproject.toml; the whole file came back, the ruff edit with it."""
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    plan = {1: write("full", write={"pyproject.toml": EDITED_PYPROJECT})}
    loop = make_loop(tmp_path, plan, tests=True, git=git, max_iterations=1)
    assert loop.start().stop_reason == "success"
    (only,) = records_of(tmp_path)
    assert only["ralph"]["protected_test_edits"] == ["pyproject.toml"]
    assert "edited pyproject.toml: put back, the edit did not count" in only["notes"]
    assert (tmp_path / "pyproject.toml").read_text() == KEPT_PYPROJECT
    assert sorted(only["actor_output"]["files_modified"]) == ["calc.py", "pyproject.toml"]
    diff = (loop.store.artifacts_dir("ralph-fake-1", 1) / "test-edits.diff").read_text()
    assert "+addopts = \"-q -k 'not easter'\"" in diff and '-addopts = "-q"' in diff
    assert "line-length = 100" not in diff  # the ruff edit was not undone, so not in it
    if git:  # the judged tree is the committed tree
        assert isinstance(loop.workspace, FakeWorkspace)
        tree = loop.workspace.commits[only["ralph"]["git_commit"]]
        assert tree["pyproject.toml"].decode() == KEPT_PYPROJECT


@pytest.mark.parametrize(
    ("name", "header"), [("setup.cfg", "[tool:pytest]"), ("tox.ini", "[pytest]")]
)
def test_of_a_setup_cfg_or_tox_ini_only_the_pytest_section_is_put_back(
    tmp_path: Path, name: str, header: str
) -> None:
    before = f"[metadata]\nname = calc\n\n{header}\naddopts = -q\n\n[flake8]\nmax-line = 100\n"
    edited = before.replace("-q", "-q --deselect tests/test_calc.py").replace("100", "120")
    (tmp_path / name).write_text(before)
    loop = make_loop(tmp_path, {1: Step(write={name: edited})}, tests=True, max_iterations=1)
    loop.start()
    (only,) = records_of(tmp_path)
    assert only["ralph"]["protected_test_edits"] == [name]
    assert (tmp_path / name).read_text() == before.replace("100", "120")


def test_a_pytest_section_the_agent_deleted_comes_back_where_it_was(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    deleted = '[project]\nname = "calc"\n\n[tool.ruff]\nline-length = 120\n'
    plan = {1: Step(write={"pyproject.toml": deleted})}
    loop = make_loop(tmp_path, plan, tests=True, git=False, max_iterations=1)
    loop.start()
    assert records_of(tmp_path)[0]["ralph"]["protected_test_edits"] == ["pyproject.toml"]
    assert (tmp_path / "pyproject.toml").read_text() == KEPT_PYPROJECT


def test_a_pytest_section_the_agent_added_above_the_tests_is_removed(tmp_path: Path) -> None:
    before = '[project]\nname = "calc"\n\n[tool.ruff]\nline-length = 100\n'
    added = (
        '[project]\nname = "calc"\n\n[tool.pytest.ini_options]\naddopts = "-k not_one"\n\n'
        "[tool.ruff]\nline-length = 120\n"
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests/pyproject.toml").write_text(before)
    plan = {1: Step(write={"tests/pyproject.toml": added})}
    loop = make_loop(tmp_path, plan, tests=True, max_iterations=1)
    loop.start()
    assert records_of(tmp_path)[0]["ralph"]["protected_test_edits"] == ["tests/pyproject.toml"]
    assert (tmp_path / "tests/pyproject.toml").read_text() == before.replace("100", "120")


@pytest.mark.parametrize(
    ("original", "agent", "kept"),
    [
        # crlf kept, byte for byte
        (
            "[a]\r\nx = 1\r\n\r\n[pytest]\r\naddopts = -q\r\n",
            "[a]\r\nx = 2\r\n\r\n[pytest]\r\naddopts = -x\r\n",
            "[a]\r\nx = 2\r\n\r\n[pytest]\r\naddopts = -q\r\n",
        ),
        # deleted at the end, the file without a last newline: back at the end
        (
            "[a]\nx = 1\n\n[pytest]\naddopts = -q",
            "[a]\nx = 2",
            "[a]\nx = 2\n\n[pytest]\naddopts = -q\n",
        ),
        # deleted first: back before the section it preceded, comments after it are the agent's
        (
            "[pytest]\naddopts = -q\n\n# b\n[b]\ny = 1\n",
            "# b!\n[b]\ny = 2\n",
            "[pytest]\naddopts = -q\n\n# b!\n[b]\ny = 2\n",
        ),
        # the original's section ended its file without a newline, the agent's does not
        ("[pytest]\nv = 1", "[pytest]\nv = 2\n[b]\n", "[pytest]\nv = 1\n[b]\n"),
        # deleted between two: back after the first, above the comment over the second
        (
            "[a]\n\n[pytest]\nv = 1\n\n# b\n[b]\n",
            "[a]\n\n# b\n[b]\n",
            "[a]\n\n[pytest]\nv = 1\n\n# b\n[b]\n",
        ),
        # the agent's file has no line ending to copy: the original's
        ("[pytest]\r\nv = 1", "x = 2", "x = 2\r\n\r\n[pytest]\r\nv = 1\r\n"),
        # an added section goes with its settings, not with the comment over the next section
        ("[a]\n", "[a]\n\n[pytest]\nv = 1\n\n# b\n[b]\n", "[a]\n\n# b\n[b]\n"),
        # a second pytest section the agent added goes, the first is the original's
        ("[pytest]\nv = 1\n", "[pytest]\nv = 2\n[pytest]\nv = 3\n", "[pytest]\nv = 1\n"),
    ],
)
def test_spliced_keeps_the_agents_file_but_the_pytest_section(
    original: str, agent: str, kept: str
) -> None:
    assert spliced(original.encode(), agent.encode(), "[pytest]") == kept.encode()


def test_spliced_puts_the_whole_file_back_when_nothing_else_is_left() -> None:
    assert spliced(b"[pytest]\nv = 1\n", None, "[pytest]") is None  # deleted: back whole
    assert spliced(None, b"[pytest]\nv = 1\n\n", "[pytest]") is None  # created: removed
    assert spliced(None, b"[a]\n[pytest]\nv = 1\n", "[pytest]") == b"[a]\n"
    assert spliced(b"[pytest]\nv = 1\n", b"\xff[pytest]\n", "[pytest]") is None  # not UTF-8


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
        "tests/other/conftest.py",  # a conftest anywhere is the harness
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


def test_git_puts_back_a_pytest_section_keeping_the_mode_and_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_calc_repo(
        tmp_path / "repo", calc="x = 1\n", tests="t = 1\n", monkeypatch=monkeypatch
    )
    (repo / "pyproject.toml").write_text(PYPROJECT)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "config")
    workspace = GitWorkspace(repo)
    workspace.begin_iteration()
    (repo / "pyproject.toml").write_text(EDITED_PYPROJECT)
    (repo / "pyproject.toml").chmod(0o600)
    (repo / "tests/test_calc.py").write_text("t = 2\n")
    edits = ProtectedTests.of(_baseline()).edits(
        workspace.changes().files, "", workspace.original, repo
    )
    assert [c.path for c in edits] == ["pyproject.toml"]  # tests/test_calc.py is no test of it
    diff = put_back(edits, "", workspace)
    assert (repo / "pyproject.toml").read_text() == KEPT_PYPROJECT
    assert (repo / "pyproject.toml").stat().st_mode & 0o777 == 0o600
    assert diff.startswith("--- a/pyproject.toml\n+++ b/pyproject.toml\n")
    assert "line-length" not in "".join(x for x in diff.splitlines() if x[:1] in "+-")
    files = {f.path for f in workspace.changes().files}
    assert files == {"pyproject.toml", "tests/test_calc.py"}


def test_a_pyproject_edited_only_in_its_pytest_section_is_put_back_whole(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    workspace = SnapshotWorkspace(tmp_path)
    workspace.begin_iteration()
    (tmp_path / "pyproject.toml").write_text(PYPROJECT.replace('"-q"', '"-x"'))
    (change,) = workspace.changes().files
    diff = put_back([change], "", workspace)
    assert (tmp_path / "pyproject.toml").read_text() == PYPROJECT
    assert diff == change.diff.rstrip("\n") + "\n" and workspace.changes().files == []


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
    from ralph.loop.batch import Entry
    from ralph.loop.tasks_file import load_tasks

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
