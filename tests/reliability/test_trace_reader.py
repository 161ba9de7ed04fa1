"""Third adversarial round: `ralph trace` on a corrupt or huge `trace.jsonl`.

The stored trace is read through a bounded reader (`actors/trace.read`): malformed lines are
counted, fields of the wrong type left out, and past `READ_STEPS` steps the lines are counted,
not parsed, with a note of how many were left out.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ralph.actors import trace

from ..conftest import EXAMPLE_LOOP, RunCli
from .test_bounded_readers import unblock  # noqa: F401  (the fixture: no test hangs on a FIFO)


def trace_file(project: Path, lines: list[str], iteration: int = 1) -> Path:
    folder = project / ".aiwg/ralph/loops" / EXAMPLE_LOOP / f"{iteration:03d}"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / trace.TRACE_FILE
    path.write_text("".join(f"{line}\n" for line in lines), "utf-8")
    return path


STEP = {"step": 1, "thought": "look", "tool": "Bash", "kind": "command", "target": "ls"}


def test_a_corrupt_trace_is_shown_with_what_reads(example_project: Path, ralph: RunCli) -> None:
    """100,000 `[`, a `dropped` that is no number, a dict for a thought: each crashed it."""
    meta = {"meta": {"source": "claude", "dropped": "many", "unparsed": [1], "error": {"x": 1}}}
    lines = [
        json.dumps(meta),
        "[" * 100_000,
        json.dumps({**STEP, "thought": {"text": "a dict"}, "ok": "yes", "files": [1, "a.py"]}),
        json.dumps({**STEP, "tokens_in": "12", "observation": ["x"], "ts": 5}),
        json.dumps(STEP),
    ]
    trace_file(example_project, lines)
    for args in ((), ("--json",)):
        result = ralph("trace", EXAMPLE_LOOP, "1", *args, cwd=example_project)
        assert result.code == 0, result.err
    shown = ralph("trace", EXAMPLE_LOOP, "1", cwd=example_project).out
    assert "3 steps (claude)" in shown and "1 line of output not JSON" in shown
    data = json.loads(ralph("trace", EXAMPLE_LOOP, "1", "--json", cwd=example_project).out)
    assert data["dropped"] == 0 and data["unparsed"] == 1 and "error" not in data
    first, second, third = data["steps"]
    assert "thought" not in first and "ok" not in first and first["files"] == ["a.py"]
    assert "tokens_in" not in second and "observation" not in second and "ts" not in second
    assert third["thought"] == "look"


def test_a_huge_trace_is_read_up_to_the_cap_and_says_what_it_left_out(
    example_project: Path, ralph: RunCli
) -> None:
    """300,000 steps took over two minutes to show; the reader now takes READ_STEPS and
    counts the rest (bench/trace.py --read times it)."""
    total = 300_000
    meta = json.dumps({"meta": {"source": "claude", "steps": total}})
    step = json.dumps(STEP)
    path = trace_file(example_project, [meta, *[step] * total])
    read = trace.read(path)
    assert len(read.steps) == trace.READ_STEPS
    assert read.unread == total - trace.READ_STEPS
    result = ralph("trace", EXAMPLE_LOOP, "1", cwd=example_project)
    assert result.code == 0, result.err
    left = total - trace.READ_STEPS
    assert f"{left} more lines not read: a trace shows at most {trace.READ_STEPS} steps" in (
        result.out
    )
    data = json.loads(ralph("trace", EXAMPLE_LOOP, "1", "--json", cwd=example_project).out)
    assert len(data["steps"]) == trace.READ_STEPS and data["unread"] == left


def test_a_line_longer_than_any_step_is_skipped_not_held(example_project: Path) -> None:
    long = json.dumps({**STEP, "observation": "x" * (trace.READ_LINE_BYTES + 10)})
    path = trace_file(example_project, [json.dumps(STEP), long, json.dumps(STEP)])
    read = trace.read(path)
    assert len(read.steps) == 2 and read.unparsed == 1


def test_a_written_trace_reads_back_as_it_was(tmp_path: Path) -> None:
    steps = [
        trace.Step(thought=f"t{i}", tool="Edit", kind="edit", files=["a.py"], ok=i % 2 == 0)
        for i in range(trace.HEAD_STEPS + trace.TAIL_STEPS)
    ]
    trajectory = trace.Trajectory("claude", steps, dropped=7, unparsed=3, error="cut")
    again = trace.read(trace.write(tmp_path, trajectory))
    assert again == trajectory


def test_a_fifo_for_a_trace_is_one_line_exit_2(
    example_project: Path,
    ralph: RunCli,
    unblock: list[Path],  # noqa: F811
) -> None:
    folder = example_project / ".aiwg/ralph/loops" / EXAMPLE_LOOP / "002"
    folder.mkdir(parents=True)
    os.mkfifo(folder / trace.TRACE_FILE)
    unblock.append(folder / trace.TRACE_FILE)
    result = ralph("trace", EXAMPLE_LOOP, "2", cwd=example_project)
    assert result.code == 2 and "not a regular file" in result.err
