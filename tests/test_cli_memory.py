"""`ralph reflections list/show/validate`, `ralph init`, `--version`, `--help`, bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ralph import __version__

from .conftest import EXAMPLE_LOOP, RunCli
from .fakes.provider_server import FakeProvider


def test_version(ralph: RunCli) -> None:
    result = ralph("--version")
    assert result.code == 0 and result.out.strip() == f"ralph {__version__}"


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["reflections"],
        ["reflections", "list"],
        ["reflections", "show"],
        ["reflections", "validate"],
        ["init"],
    ],
)
def test_every_command_has_help(ralph: RunCli, args: list[str]) -> None:
    result = ralph(*args, "--help")
    assert result.code == 0
    assert "Usage" in result.out


def test_list_loops_plain_and_json(ralph: RunCli, example_project: Path) -> None:
    plain = ralph("reflections", "list", cwd=example_project)
    assert plain.code == 0
    header, row = plain.out.splitlines()
    assert header.split("\t") == ["loop", "task", "status", "iter", "best", "updated"]
    assert row.split("\t")[:5] == [
        EXAMPLE_LOOP,
        "fix the failing date parser tests",
        "completed",
        "3",
        "1.00",
    ]
    data = json.loads(ralph("reflections", "list", "--json", cwd=example_project).out)
    assert data[0]["loop_id"] == EXAMPLE_LOOP and data[0]["best_reward"] == 1.0


def test_list_iterations_of_a_loop(ralph: RunCli, example_project: Path) -> None:
    result = ralph("reflections", "list", "--loop", EXAMPLE_LOOP, "--json", cwd=example_project)
    rows = json.loads(result.out)
    assert [r["iteration"] for r in rows] == [1, 2, 3]
    assert [r["passed"] for r in rows] == [False, False, True]
    assert rows[0]["failure_category"] == "incorrect_assumption"
    assert rows[0]["reflection"].startswith("I assumed every slash-separated date")


def test_show_renders_reflection_insights_and_locations(
    ralph: RunCli, example_project: Path
) -> None:
    result = ralph("reflections", "show", EXAMPLE_LOOP, "1", cwd=example_project)
    assert result.code == 0
    out = " ".join(result.out.split())
    assert "tests/test_parser.py:27" in out
    assert "Use '%m/%d/%Y' for slash dates" in out
    assert "Read the failing assertions before choosing a date format" in out
    last = ralph("reflections", "show", EXAMPLE_LOOP, "--json", cwd=example_project)
    assert json.loads(last.out)["iteration"] == 3


def test_commands_work_from_any_subdirectory(ralph: RunCli, example_project: Path) -> None:
    sub = example_project / "pkg" / "inner"
    sub.mkdir(parents=True)
    assert ralph("reflections", "validate", cwd=sub).code == 0
    assert EXAMPLE_LOOP in ralph("reflections", "list", cwd=sub).out


def test_validate_reports_json_path_and_reason(ralph: RunCli, example_project: Path) -> None:
    folder = example_project / ".aiwg/ralph/reflections" / EXAMPLE_LOOP
    data = json.loads((folder / "002.json").read_text())
    data["evaluator_output"]["reward_signal"] = 7
    (folder / "002.json").write_text(json.dumps(data))
    (folder / "004.json").write_text("{oops")
    result = ralph("reflections", "validate", cwd=example_project)
    assert result.code == 1
    assert "002.json" in result.out and "$.evaluator_output.reward_signal" in result.out
    assert "004.json" in result.out and "not JSON" in result.out
    assert "3 valid, 2 invalid" in result.out
    only_good = ralph("reflections", "validate", str(folder / "001.json"), cwd=example_project)
    assert only_good.code == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["reflections", "show", "ralph-nope-1"], "unknown loop 'ralph-nope-1'"),
        (["reflections", "show", "../etc"], "invalid loop id"),
        (["reflections", "list", "--loop", "ralph-a/../b"], "invalid loop id"),
        (["reflections", "show", EXAMPLE_LOOP, "9"], "has no iteration 9; it has iterations 1-3"),
        (["reflections", "show", EXAMPLE_LOOP, "9", "--json"], "it has iterations 1-3"),
        (["reflections", "obsolete", EXAMPLE_LOOP, "9"], "it has iterations 1-3"),
        (["reflections", "validate", "missing.json"], "no such file"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    ralph: RunCli, example_project: Path, args: list[str], message: str
) -> None:
    result = ralph(*args, cwd=example_project)
    assert result.code == 2
    assert message in result.err
    assert "Traceback" not in result.err
    assert result.err.startswith("ralph: error:")


def test_missing_memory_directory_is_a_clear_error(ralph: RunCli, tmp_path: Path) -> None:
    result = ralph("reflections", "list", cwd=tmp_path)
    assert result.code == 2 and "no ralph memory here" in result.err


def test_record_that_is_not_json_in_show(ralph: RunCli, example_project: Path) -> None:
    (example_project / ".aiwg/ralph/reflections" / EXAMPLE_LOOP / "001.json").write_text("x")
    result = ralph("reflections", "show", EXAMPLE_LOOP, "1", cwd=example_project)
    assert result.code == 2 and "not JSON" in result.err


def test_init_detects_checks_and_never_overwrites(ralph: RunCli, tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options]\n[tool.ruff]\n")
    (tmp_path / "mypy.ini").write_text("[mypy]\n")
    assert ralph("init", "--no-run", cwd=tmp_path).code == 0
    import yaml

    config = yaml.safe_load((tmp_path / ".aiwg/ralph/config.yaml").read_text())
    assert [c["name"] for c in config["checks"]] == ["pytest", "mypy", "ruff"]
    assert (tmp_path / ".aiwg/ralph/.gitignore").exists()
    again = ralph("init", cwd=tmp_path)
    assert again.code == 2 and "--force" in again.err
    assert ralph("init", "--force", "--no-run", cwd=tmp_path).code == 0


def test_init_on_a_project_without_checks(ralph: RunCli, tmp_path: Path) -> None:
    result = ralph("init", cwd=tmp_path)
    assert result.code == 0 and "no pytest, mypy or ruff configuration" in result.out


def test_unreadable_yaml_and_unknown_key_are_named(ralph: RunCli, tmp_path: Path) -> None:
    config = tmp_path / ".aiwg/ralph/config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text("checks: [unclosed\n")
    from ralph.config import load
    from ralph.errors import ConfigError

    with pytest.raises(ConfigError, match="cannot read YAML"):
        load(tmp_path, environ={})
    config.write_text("max_iteration: 3\n")
    with pytest.raises(ConfigError, match="unknown setting 'max_iteration'") as info:
        load(tmp_path, environ={})
    assert info.value.hint == "did you mean 'max_iterations'?"


def test_example_memory_is_shipped_in_the_repository() -> None:
    from .conftest import REPO

    assert shutil.which("git") is not None
    assert (REPO / ".aiwg/ralph/loops" / EXAMPLE_LOOP / "state.json").is_file()


def test_usage_errors_exit_2_without_traceback(ralph: RunCli) -> None:
    result = ralph("reflections", "list", "--bogus")
    assert result.code == 2 and "No such option" in result.err and "Traceback" not in result.err


def test_init_ends_with_the_next_steps_and_the_actor_found(
    ralph: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.ruff]\n")
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))  # no agent CLI here
    for name in ("ANTHROPIC_API_KEY", "OLLAMA_HOST"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with FakeProvider() as fake:  # its endpoint answers: init suggests only an actor that can
        monkeypatch.setenv("OPENAI_BASE_URL", fake.environ()["OPENAI_BASE_URL"])
        result = ralph("init", "--no-run", cwd=tmp_path)
    assert result.code == 0, result.err
    steps = result.out.split("next:", 1)[1].splitlines()
    assert steps[1].strip() == "ralph doctor"
    assert steps[2].strip().startswith("git add .aiwg/ralph/config.yaml .aiwg/ralph/.gitignore")
    assert steps[3].strip().startswith('ralph run "TASK"  # actor: openai:')
    down = ralph("init", "--no-run", "--force", cwd=tmp_path)  # the fake is gone: no answer
    assert "no actor found yet: `ralph doctor`" in down.out
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.delenv("OPENAI_BASE_URL")
    again = ralph("init", "--no-run", "--force", cwd=tmp_path)
    assert "no actor found yet: `ralph doctor`" in again.out


def test_init_force_keeps_the_users_settings_and_the_replaced_file(
    ralph: RunCli, tmp_path: Path
) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.ruff]\n")
    config = tmp_path / ".aiwg/ralph/config.yaml"
    config.parent.mkdir(parents=True)
    mine = (
        "# my notes\nactor: cmd:./agent.sh\nmax_iterations: 9\n"
        "worktree_setup: make dev\nchecks:\n  - {name: old, command: 'true'}\n"
    )
    config.write_text(mine)
    result = ralph("init", "--force", "--no-run", cwd=tmp_path)
    assert result.code == 0, result.err
    assert "kept your settings: actor, max_iterations, worktree_setup" in result.out
    import yaml

    written = yaml.safe_load(config.read_text())
    assert written["actor"] == "cmd:./agent.sh" and written["max_iterations"] == 9
    assert written["worktree_setup"] == "make dev"
    assert [c["name"] for c in written["checks"]] == ["ruff"]  # the checks are re-detected
    assert written["patience"] == 3  # a default line for a key that was not set stays
    assert config.read_text().count("max_iterations") == 1
    assert (config.parent / "config.yaml.bak").read_text() == mine
    assert "config.yaml.bak" in (config.parent / ".gitignore").read_text().splitlines()
