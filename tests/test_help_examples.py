"""Every command's `--help` ends with real command lines to copy, whole at 80 columns."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import RunCli


def _paths() -> list[list[str]]:
    """Every leaf command of the real app, found by walking typer's registry."""
    from ralph.cli.app import app

    def walk(typer_app: Any, prefix: list[str]) -> list[list[str]]:
        found = [
            [*prefix, info.name or info.callback.__name__.replace("_", "-")]
            for info in typer_app.registered_commands
        ]
        for group in typer_app.registered_groups:
            found += walk(group.typer_instance, [*prefix, group.name])
        return found

    return walk(app, [])


def test_the_walk_finds_commands_of_sub_apps() -> None:
    paths = [" ".join(path) for path in _paths()]
    assert {"run", "reflections show", "hook install claude"} <= set(paths)


@pytest.mark.parametrize("path", _paths(), ids=" ".join)
def test_every_command_help_has_examples(
    ralph: RunCli, monkeypatch: pytest.MonkeyPatch, path: list[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    result = ralph(*path, "--help")
    assert result.code == 0, result
    assert "Examples" in result.out
    examples = result.out.split("Examples", 1)[1].splitlines()
    commands = [line.strip() for line in examples if line.strip().startswith("ralph ")]
    assert commands, result.out
    # each line whole (not rewrapped) and of this command
    assert all(line.startswith("ralph " + " ".join(path)) for line in commands), commands


@pytest.mark.parametrize("group", [[], ["reflections"], ["hook"], ["hook", "install"]])
def test_ralph_and_each_group_help_has_examples(ralph: RunCli, group: list[str]) -> None:
    result = ralph(*group, "--help")
    assert result.code == 0, result
    examples = result.out.split("Examples", 1)[1].splitlines()
    assert any(line.strip().startswith(" ".join(["ralph", *group])) for line in examples)


@pytest.mark.parametrize("group", [[], ["reflections"], ["hook"], ["hook", "install"]])
def test_each_command_summary_is_whole_at_80_columns(
    ralph: RunCli, monkeypatch: pytest.MonkeyPatch, group: list[str]
) -> None:
    """click cut every docstring at ~45 characters with `...`: each command has its own."""
    monkeypatch.setenv("COLUMNS", "80")
    result = ralph(*group, "--help")
    listed = result.out.split("Commands:", 1)[1].split("Examples", 1)[0].strip().splitlines()
    assert len(listed) >= 1 and all(len(line) <= 80 for line in listed), listed
    assert not any(line.rstrip().endswith("...") for line in listed), listed


@pytest.mark.parametrize("path", _paths(), ids=" ".join)
def test_no_option_shows_a_range_for_its_value(
    ralph: RunCli, monkeypatch: pytest.MonkeyPatch, path: list[str]
) -> None:
    """`--iteration <int range>`: a number's option names its value (N, X) instead."""
    monkeypatch.setenv("COLUMNS", "100")
    result = ralph(*path, "--help")
    assert "range>" not in result.out, result.out
