"""Bad input found by the second adversarial round: durations, config, edit blocks, validate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from ralph.actors.edits import replace_once

from ..conftest import RunCli


@given(st.lists(st.text("01 x", min_size=1, max_size=4), min_size=1, max_size=6), st.data())
@example(["0", "01", "1"], None)
def test_a_search_block_matches_whole_lines_only(
    lines: list[str], data: st.DataObject | None
) -> None:
    """`replace_once('0\\n01\\n1\\n', '1\\n', '\\n')` matched the end of `01`: a SEARCH block
    names whole lines, so it matches the first line equal to it, never the tail of another."""
    wanted = lines[-1] if data is None else data.draw(st.sampled_from(lines))
    content = "".join(f"{line}\n" for line in lines)
    index = lines.index(wanted)
    expected = [*lines[:index], "NEW", *lines[index + 1 :]]
    assert replace_once(content, f"{wanted}\n", "NEW\n") == "".join(f"{x}\n" for x in expected)


def test_the_example_of_the_issue() -> None:
    assert replace_once("0\n01\n1\n", "1\n", "\n") == "0\n01\n\n"
    assert replace_once("a\r\nb1\r\n1\r\n", "1\n", "2\n") == "a\r\nb1\r\n2\r\n"


def test_validate_reads_reflections_without_a_loops_folder(
    ralph: RunCli, example_project: Path
) -> None:
    """Records copied from CI, or written by aiwg, come without ralph's loops/ folder."""
    import shutil

    shutil.rmtree(example_project / ".aiwg" / "ralph" / "loops", ignore_errors=True)
    result = ralph("reflections", "validate", cwd=example_project)
    assert result.code == 0, result.err
    assert " 0 invalid" in result.out and "no such file" not in result.err


def test_validate_reports_non_finite_numbers(ralph: RunCli, example_project: Path) -> None:
    """`NaN` and `Infinity` are not JSON: every other reader chokes on them."""
    folder = next((example_project / ".aiwg" / "ralph" / "reflections").iterdir())
    record = sorted(folder.glob("*.json"))[0]
    data = json.loads(record.read_text())
    data["evaluator_output"]["reward_signal"] = float("nan")
    record.write_text(json.dumps(data))
    result = ralph("reflections", "validate", str(record), cwd=example_project)
    assert result.code == 1
    assert "NaN" in result.out and "not valid JSON" in result.out


BAD_DURATIONS = ["-5", "-1s", "nan", "inf", "-0.5m"]


@pytest.mark.parametrize("raw", BAD_DURATIONS)
@pytest.mark.parametrize("source", ["flag", "env", "config"])
def test_one_rule_for_durations_from_every_source(
    raw: str, source: str, ralph: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`idle_timeout: -5` in config.yaml was accepted (every attempt killed at once) while the
    flag was refused: the same value gets the same answer wherever it comes from."""
    extra: list[str] = []
    if source == "flag":
        extra = [f"--idle-timeout={raw}"]
    elif source == "env":
        monkeypatch.setenv("RALPH_IDLE_TIMEOUT", raw)
    else:
        config = tmp_path / ".aiwg" / "ralph" / "config.yaml"
        config.parent.mkdir(parents=True)
        config.write_text(f"idle_timeout: {ast_literal(raw)}\n")
    result = ralph("run", "a task", "--actor", "cmd:true", "--test", "true", *extra, cwd=tmp_path)
    assert result.code == 2, result.err
    assert "idle_timeout" in result.err and "Traceback" not in result.err
    assert "0 means no limit" in result.err


def ast_literal(raw: str) -> str:
    """The YAML spelling of `raw`: a number where it is one, else the string."""
    return {"nan": ".nan", "inf": ".inf", "-5": "-5"}.get(raw, repr(raw))


@pytest.mark.parametrize("raw", [0, "0", "0s", "0m"])
def test_zero_means_no_limit(raw: object, tmp_path: Path) -> None:
    from ralph.config import load

    settings = load(tmp_path, {"idle_timeout": raw, "iteration_timeout": raw}, environ={})
    assert settings.idle_timeout is None and settings.iteration_timeout is None
    config = tmp_path / ".aiwg" / "ralph" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(f"checks:\n  - {{name: slow, command: 'sleep 1', timeout: {raw!r}}}\n")
    (check,) = load(tmp_path, {}, environ={"RALPH_CHECK_TIMEOUT": "0"}).checks
    assert check.timeout == 0.0  # its own "no limit", not "the default check_timeout"
    from ralph.evaluators.suite import make_check

    assert make_check(check, timeout=900.0, cap=1000).timeout is None


@pytest.mark.parametrize(
    ("flag", "config_line"),
    [("--budget-usd=nan", "budget_usd: .nan"), ("--budget-usd=inf", "weights: {tests: .nan}")],
)
def test_non_finite_numbers_are_refused(
    flag: str, config_line: str, ralph: RunCli, tmp_path: Path
) -> None:
    """`--budget-usd nan` was written into state.json as `NaN`, which is not JSON."""
    result = ralph("run", "a task", "--actor", "cmd:true", "--test", "true", flag, cwd=tmp_path)
    assert result.code == 2 and "not a finite number" in result.err, result.err
    config = tmp_path / ".aiwg" / "ralph" / "config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(config_line + "\n")
    result = ralph("run", "a task", "--actor", "cmd:true", "--test", "true", cwd=tmp_path)
    assert result.code == 2 and "not a finite number" in result.err, result.err
