"""An error about a missing iteration names the ones that exist, as compacted ranges."""

from __future__ import annotations

from pathlib import Path

from ralph.glyphs import spans
from tests.conftest import EXAMPLE_LOOP, RunCli


def test_spans_compact_runs_of_numbers() -> None:
    assert spans([3, 1, 2, 7, 9, 10, 9]) == "1-3, 7, 9-10"
    assert spans([4]) == "4"
    assert spans([]) == ""


def test_trace_of_a_missing_iteration_names_the_iterations_there_are(
    ralph: RunCli, example_project: Path
) -> None:
    loop_dir = example_project / ".aiwg/ralph/loops" / EXAMPLE_LOOP
    for number in ("001", "002", "004", "007"):  # records 1-3: iteration 3 has no trace
        (loop_dir / number).mkdir(parents=True, exist_ok=True)
        (loop_dir / number / "trace.jsonl").write_text("")
    result = ralph("trace", EXAMPLE_LOOP, "5", cwd=example_project)
    assert result.code == 2, result
    assert "no iteration 5; it has iterations 1-4, 7" in result.err
    assert f"hint: `ralph reflections list --loop {EXAMPLE_LOOP}` lists them" in result.err


def test_resume_with_nothing_to_resume_points_to_the_list_of_loops(
    ralph: RunCli, example_project: Path
) -> None:
    """`ralph status` shows one loop; the list is `ralph reflections list`."""
    result = ralph("resume", cwd=example_project)
    assert result.code == 2, result
    assert "no paused, crashed or needs_human loop to resume" in result.err
    assert "hint: see `ralph reflections list`" in result.err
