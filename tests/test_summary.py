"""`ralph status LOOP --markdown`: a loop told for a job summary or a pull request's body."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ralph.memory.store import MemoryStore

from .conftest import EXAMPLE_LOOP, RunCli


def test_the_example_loop_in_markdown(example_project: Path, ralph: RunCli) -> None:
    result = ralph("status", EXAMPLE_LOOP, "--markdown", cwd=example_project)
    assert result.code == 0, result.err
    text = result.out
    assert text.startswith("### ralph: fix the failing date parser tests\n")
    assert "**completed** (success) after 3 iterations, best reward 1.00" in text
    assert f"branch `ralph/{EXAMPLE_LOOP}`" in text
    assert "baseline 0.64 → 0.82 → 0.95 → 1.00" in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == 4 and rows[-1] == "| 3 | 1.00 | pass | - |"
    assert "- iteration 2 (edge_case_miss): " in text
    assert "  - lesson: Read the failing assertions before choosing a date format" in text


def test_table_cells_stay_cells_and_a_loop_without_state_is_told_too(
    example_project: Path, ralph: RunCli
) -> None:
    store = MemoryStore(example_project)
    path = store.record_path(EXAMPLE_LOOP, 1)
    data = json.loads(path.read_text())
    data["self_reflection"]["credit_assignment"]["root_cause"] = "a | b\nc"
    path.write_text(json.dumps(data))
    shutil.rmtree(store.loop_dir(EXAMPLE_LOOP))  # as if imported: records only
    text = ralph("status", EXAMPLE_LOOP, "--markdown", cwd=example_project).out
    assert "| 1 | 0.82 | fail | a \\| b c |" in text
    assert "**completed** after 3 iterations" in text and "· branch" not in text
