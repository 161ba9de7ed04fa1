"""Settings precedence, durations, check parsing, environment variables."""

from __future__ import annotations

from pathlib import Path

import pytest

from ralph.config import CheckSpec, infer_parser, load, parse_duration
from ralph.errors import ConfigError


@pytest.mark.parametrize(
    ("raw", "seconds"), [(45, 45.0), ("45", 45.0), ("45s", 45.0), ("10m", 600.0), ("2h", 7200.0)]
)
def test_durations(raw: object, seconds: float) -> None:
    assert parse_duration(raw) == seconds


def test_bad_duration_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="cannot read duration"):
        parse_duration("ten minutes", "timeout")


def test_precedence_defaults_file_env_flags(tmp_path: Path) -> None:
    config = tmp_path / ".aiwg/ralph/config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text("max_iterations: 7\npatience: 2\ntimeout: 10m\nchecks: [ruff]\n")
    assert load(tmp_path, environ={}).max_iterations == 7
    env = {"RALPH_MAX_ITERATIONS": "9", "RALPH_IDLE_TIMEOUT": "30s", "RALPH_NO_GIT": "true"}
    settings = load(tmp_path, environ=env)
    assert (settings.max_iterations, settings.patience, settings.timeout) == (9, 2, 600.0)
    assert settings.idle_timeout == 30.0 and settings.no_git is True
    flagged = load(tmp_path, {"max_iterations": 11, "patience": None}, environ=env)
    assert (flagged.max_iterations, flagged.patience) == (11, 2)
    assert flagged.checks == [CheckSpec("ruff", "ruff check .", "ruff")]


@pytest.mark.parametrize(
    ("raw", "value"), [("1", True), ("0", False), ("true", True), ("no", False), ("y", True)]
)
def test_boolean_variables_accept_the_usual_spellings(
    tmp_path: Path, raw: str, value: bool
) -> None:
    settings = load(tmp_path, environ={"RALPH_QUIET": raw, "RALPH_ALLOW_DIRTY": raw})
    assert settings.quiet is value and settings.allow_dirty is value


def test_a_boolean_variable_with_another_value_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"\$\.json: 'maybe' is not of type 'boolean'"):
        load(tmp_path, environ={"RALPH_JSON": "maybe"})


def test_unknown_environment_setting_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown setting 'max_iteratons'") as info:
        load(tmp_path, environ={"RALPH_MAX_ITERATONS": "3"})
    assert "max_iterations" in (info.value.hint or "")


def test_runtime_variables_are_not_settings(tmp_path: Path) -> None:
    """The variables ralph sets for an actor are neither refused nor read as settings."""
    runtime = {"RALPH_PROMPT_FILE": "/tmp/p", "RALPH_LOOP_ID": "ralph-x-1", "RALPH_ITERATION": "3"}
    assert load(tmp_path, environ=runtime) == load(tmp_path, environ={})


def test_test_shortcut_comes_first_and_infers_parser(tmp_path: Path) -> None:
    settings = load(tmp_path, {"test": "python -m pytest -q tests/x.py", "checks": ["mypy"]}, {})
    assert [(c.name, c.parser) for c in settings.all_checks()] == [
        ("tests", "pytest"),
        ("mypy", "mypy"),
    ]


@pytest.mark.parametrize(
    ("command", "parser"),
    [
        ("pytest -x", "pytest"),
        ("python -m pytest", "pytest"),
        (".venv/bin/mypy src", "mypy"),
        ("uv run ruff check", "ruff"),
        ("make lint", "shell"),
    ],
)
def test_parser_inference(command: str, parser: str) -> None:
    assert infer_parser(command) == parser


def test_schema_errors_name_the_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"max_iterations"):
        load(tmp_path, {"max_iterations": 0}, {})


def test_settings_snapshot_round_trips(tmp_path: Path) -> None:
    from ralph.config import from_mapping

    settings = load(tmp_path, {"checks": ["pytest", {"name": "lint", "command": "make lint"}]}, {})
    assert from_mapping(settings.snapshot()) == settings


def test_worktree_setup_from_pyproject_the_file_and_the_environment(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.ralph]\nworktree-setup = "make version"\n')
    assert load(tmp_path, environ={}).worktree_setup == "make version"
    config = tmp_path / ".aiwg/ralph/config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text('worktree_setup: "pip install -e ."\n')
    assert load(tmp_path, environ={}).worktree_setup == "pip install -e ."
    # a command stays a string, even one YAML would read as something else
    assert load(tmp_path, environ={"RALPH_WORKTREE_SETUP": "true"}).worktree_setup == "true"
    config.write_text("worktree_setup: [pip, install]\n")
    with pytest.raises(ConfigError, match="worktree_setup"):
        load(tmp_path, environ={})


def test_check_of_an_unknown_name_names_the_configured_checks(tmp_path: Path) -> None:
    (tmp_path / ".aiwg/ralph").mkdir(parents=True)
    (tmp_path / ".aiwg/ralph/config.yaml").write_text(
        "checks:\n  - {name: lint, command: make lint}\n  - pytest\n"
    )
    environ = {"PATH": str(tmp_path)}  # no program named `lnt` here
    with pytest.raises(ConfigError, match=r"--check lnt: no check .*configured: lint, pytest"):
        load(tmp_path, {"checks": ["lnt"]}, environ)
    # a configured name, a built-in one and a command are all still fine
    named = load(tmp_path, {"checks": ["lint", "mypy", "./run.sh", "sh -c true"]}, environ)
    assert [c.name for c in named.checks][:2] == ["lint", "mypy"]
