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
