"""Checks never change the user's tree: they run read-only, and what one writes anyway is found
(the tree's fingerprint before and after every evaluation), put back and blamed; their output
carries no terminal escapes; a judge without a model is refused before any agent runs."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ralph.config import CheckSpec
from ralph.errors import PreflightError
from ralph.evaluators.base import JudgeContext
from ralph.evaluators.ruff import RuffCheck
from ralph.evaluators.suite import CheckSuite, make_check
from ralph.testing import FakeTests, fake_evaluator, make_loop, write

from .conftest import RunCli

PY = shlex.quote(sys.executable)
# ruff would delete this uncommitted line with the project's `fix = true`
USER_EDIT = "import os  # the user's uncommitted line\n"
PYPROJECT = """\
[tool.ruff]
fix = true

[tool.ruff.lint]
select = ["F"]

[tool.pytest.ini_options]
addopts = "--color=yes"
"""


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


def project(root: Path, checks: list[dict[str, str]]) -> Path:
    """A git project with a committed module, the user's uncommitted edit and ralph's config."""
    root.mkdir()
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "app.py").write_text("def f() -> int:\n    return 1\n")
    (root / "gone.py").write_text("x = 1\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_app.py").write_text(
        "from app import f\n\n\ndef test_f():\n    assert f() == 2\n"
    )
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "start")
    (root / "app.py").write_text(USER_EDIT + (root / "app.py").read_text())
    (root / "gone.py").chmod(0o755)
    (root / ".aiwg" / "ralph").mkdir(parents=True)
    (root / ".aiwg" / "ralph" / "config.yaml").write_text(json.dumps({"checks": checks}))
    return root


def tree(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file outside .git and ralph's memory: its bytes and mode."""
    found = {}
    for path in root.rglob("*"):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and not rel.startswith((".git/", ".aiwg/")):
            found[rel] = (path.read_bytes(), path.stat().st_mode)
    return found


def test_ralph_check_leaves_a_fix_true_project_byte_identical(tmp_path: Path) -> None:
    root = project(
        tmp_path / "p",
        [
            {"name": "lint", "command": f"{PY} -m ruff check .", "parser": "ruff"},
            {"name": "tests", "command": f"{PY} -m pytest -q", "parser": "pytest"},
        ],
    )
    before = tree(root)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RALPH_")}
    result = subprocess.run(
        [sys.executable, "-m", "ralph", "check", "--json"],
        cwd=root,
        env={**env, "FORCE_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    assert tree(root) == before  # no fix applied, no cache written in the tree
    report = json.loads(result.stdout)
    lint = [e for e in report["errors"] if e.get("rule") == "F401"]
    assert lint and lint[0]["file"] == "app.py"  # the finding is reported, not fixed away
    statuses = {r["tool"]: r["status"] for r in report["results"]}
    assert statuses == {"lint": "fail", "tests": "fail"}
    assert "\x1b" not in result.stdout and "[91m" not in result.stdout
    assert "\\u001b" not in result.stdout  # not even escaped inside the JSON


def test_a_check_that_writes_is_an_error_and_the_tree_is_put_back(
    tmp_path: Path, ralph: RunCli
) -> None:
    root = project(tmp_path / "p", [{"name": "tests", "command": "true"}])
    (root / "untracked.txt").write_text("mine\n")
    before = tree(root)
    writer = 'sh -c "echo x >> app.py; echo new > made.py; rm gone.py untracked.txt"'
    result = ralph("check", "--check", writer, cwd=root)
    assert result.code == 1
    assert tree(root) == before  # content and mode, the deleted files back, the new one gone
    assert not (root / "made.py").exists()
    # what was found written is kept (it could have been the user, saving while checks ran)
    kept = root / ".aiwg" / "ralph" / "tmp" / "tree-guard" / "displaced"
    (found,) = kept.glob("*/app.py")
    assert found.read_text().endswith("x\n") and (found.parent / "made.py").read_text() == "new\n"
    said = " ".join(result.out.split())  # as one line, however the terminal wrapped it
    assert (
        "check 'sh' changed files in the tree: app.py, gone.py, made.py, untracked.txt (put back)"
    ) in said


def test_the_check_running_when_a_file_was_written_is_the_one_named(tmp_path: Path) -> None:
    root = project(tmp_path / "p", [])
    quick = CheckSpec("quick", "true")
    writer = CheckSpec("writer", "sleep 1; echo x >> app.py")
    evaluation = CheckSuite([quick, writer]).evaluate(root)
    outcomes = {o.spec.name: o for o in evaluation.outcomes}
    assert outcomes["quick"].result.status == "pass"
    assert outcomes["writer"].result.status == "error"
    (diagnostic, *_) = outcomes["writer"].errors
    assert diagnostic.type == "runtime_error"
    assert diagnostic.message == "check 'writer' changed files in the tree: app.py (put back)"
    assert (root / "app.py").read_text().startswith(USER_EDIT)
    assert not evaluation.passed


def test_without_git_a_written_file_is_found_and_put_back(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    root.mkdir()
    (root / "a.py").write_bytes(b"a = 1\r\n")
    (root / "run.sh").write_text("echo hi\n")
    (root / "run.sh").chmod(0o755)
    before = tree(root)
    writer = CheckSpec("w", "echo x >> a.py; chmod -x run.sh; rm -f run.sh; touch b.py")
    evaluation = CheckSuite([writer]).evaluate(root)
    assert tree(root) == before
    (diagnostic, *_) = evaluation.outcomes[0].errors
    assert diagnostic.message == (
        "check 'w' changed files in the tree: a.py, b.py, run.sh (put back)"
    )


def test_reading_only_touches_nothing_and_reports_nothing(tmp_path: Path) -> None:
    root = project(tmp_path / "p", [])
    (root / "app.py").touch()  # a new mtime, the same bytes
    evaluation = CheckSuite([CheckSpec("reader", "cat app.py > /dev/null")]).evaluate(root)
    assert evaluation.passed and evaluation.outcomes[0].changed_files is None


def test_ruff_runs_without_fixing_and_format_only_checks() -> None:
    check = RuffCheck(CheckSpec("ruff", "ruff check --fix src && echo done", "ruff"))
    assert check.command_for(Path(".")) == (
        "ruff check --no-fix --output-format json src && echo done"
    )
    chained = RuffCheck(CheckSpec("ruff", "ruff check --fix . && tool --fix x", "ruff"))
    assert chained.command_for(Path(".")) == (
        "ruff check --no-fix --output-format json . && tool --fix x"
    )
    fmt = RuffCheck(CheckSpec("fmt", "ruff format src", "ruff"))
    assert fmt.command_for(Path(".")) == "ruff format --check src"
    diff = RuffCheck(CheckSpec("fmt", "ruff format --diff src", "ruff"))
    assert diff.command_for(Path(".")) == "ruff format --diff src"


def test_check_processes_are_asked_for_no_colour_and_caches_go_to_scratch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.delenv("RUFF_CACHE_DIR", raising=False)
    show = 'echo "${FORCE_COLOR-unset} $NO_COLOR $PY_COLORS ${RUFF_CACHE_DIR-none}"'
    check = make_check(CheckSpec("ruff", f"{show}; ruff check", "ruff"), timeout=60, cap=10_000)
    outcome = check.run(tmp_path)
    forced, no_color, py_colors, cache = (outcome.result.stdout or "").split()[:4]
    assert (forced, no_color, py_colors) == ("unset", "1", "0")
    assert Path(cache) == tmp_path / ".aiwg" / "ralph" / "tmp" / "ruff-cache"


def test_a_coloured_check_leaves_no_escape_in_records_or_prompts(tmp_path: Path) -> None:
    root = tmp_path / "p"
    root.mkdir()
    (root / "pytest.ini").write_text("[pytest]\naddopts = --color=yes\n")
    (root / "test_colour.py").write_text(
        'def test_colour():\n    assert False, "\\x1b[91mT1 still red\\x1b[0m"\n'
    )
    coloured = CheckSpec(
        "lint", r"printf '\033[91mE1 bad thing\033[0m\r\n\033]0;title\007'; exit 1", "shell"
    )
    real_pytest = CheckSpec("colour", f"{PY} -m pytest -q test_colour.py", "pytest")
    suite = fake_evaluator(
        FakeTests(),
        make_check(coloured, timeout=60, cap=10_000),
        make_check(real_pytest, timeout=120, cap=50_000),
    )
    loop = make_loop(
        tmp_path / "p",
        {1: write("half"), 2: write("full")},
        evaluator=suite,
        success="strict",  # the coloured check a target: its failure is in every prompt
        max_iterations=2,
    )
    loop.start()
    memory = tmp_path / "p" / ".aiwg" / "ralph"
    stored = [p for p in memory.rglob("*") if p.is_file() and p.suffix in (".json", ".md")]
    assert stored
    for path in stored:
        text = path.read_text()
        assert "\x1b" not in text and "\\u001b" not in text and "#x1B" not in text, path
    logs = [p for p in memory.rglob("*.log") if p.is_file()]
    assert logs and not any("\x1b" in p.read_text() for p in logs)
    prompts = list(loop.actor.prompts.values())
    assert prompts and any("E1 bad thing" in p and "T1 still red" in p for p in prompts)
    assert not any("\x1b" in p or "#x1B" in p for p in prompts)


def test_a_judge_without_a_model_fails_the_preflight_before_the_actor_runs(
    tmp_path: Path,
) -> None:
    # what build_parts gives a judge: the task and the reflector's model (here none)
    context = JudgeContext("make f pass its tests", None)
    judge = make_check(CheckSpec("review", "", "judge"), timeout=60, cap=10_000, judging=context)
    suite = fake_evaluator(FakeTests(), judge)
    loop = make_loop(tmp_path / "p", {1: write("full")}, evaluator=suite)
    with pytest.raises(PreflightError) as info:
        loop.start()
    assert info.value.exit_code == 2
    assert "'review' is a judge with no model" in info.value.message
    assert loop.actor.prompts == {}
    assert not (tmp_path / "p" / ".aiwg" / "ralph" / "loops").exists()


def test_a_judge_with_a_model_whose_key_is_missing_fails_the_preflight(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    judge = make_check(
        CheckSpec("review", "", "judge", model="anthropic:some-model"), timeout=60, cap=10_000
    )
    with pytest.raises(PreflightError) as info:
        CheckSuite.from_checks([judge]).preflight()
    assert "ANTHROPIC_API_KEY" in info.value.message


def test_ralph_run_with_a_judge_and_no_model_exits_2(tmp_path: Path, ralph: RunCli) -> None:
    root = project(tmp_path / "p", [{"name": "review", "command": "", "parser": "judge"}])
    git(root, "add", "-A")
    git(root, "commit", "-qm", "config")
    fake_agent = tmp_path / "agent-was-called"
    result = ralph(
        "run", "a task", "--actor", f"cmd:touch {fake_agent}", "--reflector", "heuristic",
        cwd=root,
    )  # fmt: skip
    assert result.code == 2, result.out + result.err
    assert "judge with no model" in result.err
    assert not fake_agent.exists()


def test_ralph_doctor_only_looks(tmp_path: Path, ralph: RunCli) -> None:
    root = project(tmp_path / "p", [{"name": "tests", "command": "true"}])
    before = tree(root)
    writer = 'sh -c "echo x >> app.py; rm gone.py"'
    result = ralph("doctor", "-a", "cmd:true", "--check", writer, "--json", cwd=root)
    assert tree(root) == before
    found = {(f["area"], f["name"]): f for f in json.loads(result.out)["findings"]}
    assert found["check", "sh"]["status"].startswith("cannot run")  # an error: not judged
    assert "changed files in the tree (put back)" in found["check", "sh"]["hint"]


def test_a_loop_puts_back_what_a_check_wrote_at_every_evaluation(tmp_path: Path) -> None:
    writer = make_check(CheckSpec("stamp", "echo stamped >> calc.py", "shell"), timeout=60, cap=0)
    suite = fake_evaluator(FakeTests(), writer)
    loop = make_loop(tmp_path / "p", {1: write("full")}, evaluator=suite, git=False)
    loop.start()
    assert "stamped" not in (tmp_path / "p" / "calc.py").read_text()  # the actor's version
    records = [json.loads(p.read_text()) for p in (tmp_path / "p").rglob("reflections/*/*.json")]
    assert records
    for record in records:  # (the in-process tests check ran at the same time: maybe named)
        (message,) = {
            e["message"]
            for e in record["evaluator_output"]["errors"]
            if "changed files in the tree" in e["message"]
        }
        assert "'stamp'" in message and message.endswith("tree: calc.py (put back)")


def test_pytest_with_its_cache_plugin_off_under_strict_config_still_runs(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\naddopts = -p no:cacheprovider --strict-config --color=yes\n"
    )
    (tmp_path / "test_a.py").write_text("def test_a():\n    assert 1 == 2\n")
    check = make_check(CheckSpec("tests", f"{PY} -m pytest -q", "pytest"), timeout=120, cap=50_000)
    outcome = check.run(tmp_path)
    assert outcome.result.status == "fail"
    assert [e.rule for e in outcome.errors] == ["test_a.py::test_a"]
    assert "\x1b" not in (outcome.result.stdout or "")


@pytest.mark.parametrize(
    ("ini", "command"),
    [
        ("[pytest]\nfilterwarnings = error\n", "-p no:cacheprovider"),  # humanize's settings
        ("[pytest]\naddopts = -p no:cacheprovider\nfilterwarnings = error\n", ""),
    ],
)
def test_pytest_with_its_cache_plugin_off_and_warnings_as_errors_still_runs(
    tmp_path: Path, ini: str, command: str
) -> None:
    """ralph's `-o cache_dir=...` is an unknown option once the cache plugin is off: a warning
    that `filterwarnings = error` made the whole run fail."""
    (tmp_path / "pytest.ini").write_text(ini)
    (tmp_path / "test_a.py").write_text("def test_a():\n    assert 1 == 2\n")
    spec = CheckSpec("tests", f"{PY} -m pytest -q {command}".strip(), "pytest")
    outcome = make_check(spec, timeout=120, cap=50_000).run(tmp_path)
    assert outcome.result.status == "fail"
    assert [e.rule for e in outcome.errors] == ["test_a.py::test_a"]


def test_pytest_keeps_its_cache_in_ralphs_scratch_folder(tmp_path: Path) -> None:
    (tmp_path / "test_a.py").write_text("def test_a():\n    assert 1 == 2\n")
    check = make_check(CheckSpec("tests", f"{PY} -m pytest -q", "pytest"), timeout=120, cap=50_000)
    assert check.run(tmp_path).result.status == "fail"
    assert not (tmp_path / ".pytest_cache").exists()
    assert (tmp_path / ".aiwg" / "ralph" / "tmp" / "pytest-cache").is_dir()


def test_a_file_under_end_of_line_attributes_is_put_back_as_its_bytes(tmp_path: Path) -> None:
    root = project(tmp_path / "p", [])
    (root / ".gitattributes").write_text("* text=auto\n*.txt eol=lf\n")
    (root / "notes.txt").write_bytes(b"one\r\ntwo\r\n")  # CRLF where git would check out LF
    git(root, "add", "-A")
    git(root, "commit", "-qm", "attributes")
    (root / "notes.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")  # and the user's edit
    before = tree(root)
    writer = CheckSpec("w", "printf 'x\\n' > notes.txt; rm .gitattributes")
    evaluation = CheckSuite([writer]).evaluate(root)
    assert tree(root) == before
    assert evaluation.outcomes[0].changed_files == [".gitattributes", "notes.txt"]


def test_colour_codes_in_a_failing_tests_message_are_taken_out(tmp_path: Path) -> None:
    (tmp_path / "test_a.py").write_text(
        'def test_a():\n    assert False, "\\x1b[91mthe value was red\\x1b[0m"\n'
    )
    check = make_check(CheckSpec("tests", f"{PY} -m pytest -q", "pytest"), timeout=120, cap=50_000)
    (error,) = check.run(tmp_path).errors
    texts = [error.message, error.stack_trace or ""]
    assert error.message.startswith("AssertionError: the value was red")
    assert "E       AssertionError: the value was red\n" in texts[1]
    assert not any("\x1b" in t or "#x1B" in t for t in texts), texts


def test_a_store_whose_objects_are_gone_is_made_again_and_still_guards(tmp_path: Path) -> None:
    root = project(tmp_path / "p", [])
    assert CheckSuite([CheckSpec("reader", "true")]).evaluate(root).passed
    (store,) = (root / ".aiwg" / "ralph" / "tmp" / "tree-guard").glob("p-*")
    for loose in (store / "git" / "objects").glob("??"):
        shutil.rmtree(loose)  # as a gc of the objects its index names would leave it
    before = tree(root)
    evaluation = CheckSuite([CheckSpec("w", "echo x >> app.py")]).evaluate(root)
    assert tree(root) == before
    assert evaluation.outcomes[0].changed_files == ["app.py"]


@pytest.mark.parametrize("use_git", [True, False])
def test_bytecode_caches_and_coverage_data_a_check_writes_are_not_the_tree(
    tmp_path: Path, use_git: bool
) -> None:
    root = project(tmp_path / "p", [])
    if not use_git:
        shutil.rmtree(root / ".git")
    writes = (
        "mkdir -p __pycache__ .venv htmlcov && touch __pycache__/app.cpython-311.pyc old.pyc "
        ".venv/x .coverage .coverage.host.1 coverage.xml htmlcov/index.html .dmypy.json"
    )
    evaluation = CheckSuite([CheckSpec("tests", writes)]).evaluate(root)
    assert evaluation.passed and evaluation.outcomes[0].changed_files is None
