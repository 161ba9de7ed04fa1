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
