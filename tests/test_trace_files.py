"""`ralph trace` of an attempt without a step stream (a `cmd:` agent, aider, an LLM actor whose
edits ralph applies, an iteration that kept no trace): the files it changed with their lines,
the actor's last output lines and why there are no steps; a stream's trace as before."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
from rich.console import Console

from ralph.actors import tail, trace, tracing
from ralph.actors.base import ActorResult
from ralph.cli.trace_view import TraceView, trace_view, why_no_steps
from ralph.errors import StoreError
from ralph.rendering import to_data
from ralph.testing import Loop, Step, make_loop
from ralph.workspace.branches import ChangedFile
from tests.conftest import RunCli
from tests.fakes.calc_project import make_calc_repo

LOOP = "ralph-fake-1"
SAID = "\n".join(f"step {i} of the work" for i in range(1, 31))  # 30 lines: more than kept
OLD_KEYS = ["loop_id", "iteration", "source", "steps", "dropped", "unparsed"]
NEW_KEYS = ["why_no_steps", "changed_files", "last_output"]


def drawn(view: TraceView, *, width: int, terminal: bool = True) -> list[str]:
    out = io.StringIO()
    console = Console(file=out, force_terminal=terminal, width=width, color_system=None)
    console.print(view, crop=False)  # as cli/common.show prints
    return out.getvalue().splitlines()


@pytest.fixture
def loop(tmp_path: Path) -> Loop:
    """One attempt of the fake actor (no step stream): calc.py rewritten, notes.md created."""
    plan = {1: Step(version="partial", write={"notes.md": "a\nb\n"}, summary=SAID)}
    made = make_loop(tmp_path / "project", plan, max_iterations=1)
    made.start(LOOP)
    return made


def test_an_attempt_without_steps_shows_its_files_with_counts_and_its_last_output(
    loop: Loop,
) -> None:
    view = trace_view(loop.store, LOOP, None)
    record = loop.store.read_record(LOOP, 1)
    counted = {
        a.file_path: (a.changes.additions, a.changes.deletions)
        for a in record.actor_output.actions
        if a.file_path and a.changes
    }
    assert {f.path: (f.added, f.removed) for f in view.changed_files or []} == counted
    assert counted["notes.md"] == (2, 0) and counted["calc.py"][0] > 0
    assert view.why_no_steps == (
        "fake prints no step stream; showing the files changed and the last output"
    )
    assert view.last_output == [f"step {i} of the work" for i in range(11, 31)]  # the last 20
    shown = drawn(view, width=100, terminal=False)
    assert view.why_no_steps in shown
    assert "  +2 -0  notes.md" in shown and "  step 30 of the work" in shown
    assert "  step 10 of the work" not in shown


def test_the_lines_are_kept_in_the_trace_at_iteration_time(loop: Loop) -> None:
    stored = loop.store.artifacts_dir(LOOP, 1) / trace.TRACE_FILE
    meta = json.loads(stored.read_text().splitlines()[0])["meta"]
    assert meta["output"] == [f"step {i} of the work" for i in range(11, 31)]
    assert trace.read(stored).output == meta["output"]


def test_the_json_form_adds_the_three_fields_and_keeps_the_old_keys(loop: Loop) -> None:
    data = to_data(trace_view(loop.store, LOOP, 1))
    assert list(data) == OLD_KEYS + NEW_KEYS
    assert {"path": "notes.md", "added": 2, "removed": 0} in data["changed_files"]
    assert data["why_no_steps"].startswith("fake prints no step stream")
    assert len(data["last_output"]) == tail.OUTPUT_LINES


@pytest.mark.parametrize("width", [80, 140])
def test_on_a_terminal_the_title_and_the_lines_are_not_squeezed(loop: Loop, width: int) -> None:
    view = trace_view(loop.store, LOOP, 1)
    view.trajectory.steps = []  # a `cmd:` agent's: no table at all
    lines = drawn(view, width=width)
    assert lines[0] == f"{LOOP} iteration 1 (fake)"
    assert lines[1] == view.why_no_steps  # 77 characters: whole at 80 columns
    assert "  +2 -0  notes.md" in lines and "  step 30 of the work" in lines


def test_a_table_does_not_wrap_the_title_at_its_own_width() -> None:
    steps = [trace.Step(tool="Read", kind="read", target="a.py")]
    view = TraceView("ralph-fix-the-date-parser-3f9a1c2e", 2, trace.Trajectory("claude", steps))
    for width in (80, 140):
        lines = drawn(view, width=width)
        assert lines[0] == "ralph-fix-the-date-parser-3f9a1c2e iteration 2: 1 step (claude)"
        assert any("Read" in line and "a.py" in line for line in lines[1:])


def test_a_streamed_trace_is_shown_as_before(loop: Loop) -> None:
    folder = loop.store.artifacts_dir(LOOP, 1)
    steps = [trace.Step(thought="look", tool="Read", kind="read", target="calc.py")]
    trace.write(folder, trace.Trajectory("claude", steps))
    (folder / "actor.log").write_text('{"type": "result"}\n')
    view = trace_view(loop.store, LOOP, 1)
    assert view.why_no_steps is None
    assert list(to_data(view)) == OLD_KEYS
    lines = drawn(view, width=100, terminal=False)
    assert lines == [f"{LOOP} iteration 1: 1 step (claude)", "  1          thought: look",
                     "             Read: calc.py"]  # fmt: skip


def test_a_real_iteration_without_a_trace_shows_its_files_and_its_log(loop: Loop) -> None:
    folder = loop.store.artifacts_dir(LOOP, 1)
    (folder / trace.TRACE_FILE).unlink()
    log = "".join(f"line {i}\n" for i in range(40))
    (folder / "actor.log").write_text(f"{log}\x1b[31mred\x1b[0m sk-{'a' * 30}\n")
    view = trace_view(loop.store, LOOP, None)
    assert view.iteration == 1 and view.trajectory.source == "cmd:true"  # the loop's actor
    assert view.why_no_steps == (
        "no trace was kept of this attempt; showing the files changed and the last output"
    )
    assert "notes.md" in [f.path for f in view.changed_files or []]
    assert len(view.last_output) == tail.OUTPUT_LINES
    assert view.last_output[-1] == "red [REDACTED]" and view.last_output[0] == "line 21"
    with pytest.raises(StoreError, match=r"no iteration 4; it has iterations 1$"):
        trace_view(loop.store, LOOP, 4)


def test_an_iteration_without_a_record_says_its_files_are_unknown(loop: Loop) -> None:
    loop.store.record_path(LOOP, 1).unlink()
    view = trace_view(loop.store, LOOP, 1)
    assert view.changed_files is None and view.last_output  # the trace still has the output
    assert "files changed: unknown (no record of this iteration)" in drawn(view, width=100)


def test_why_there_are_no_steps_for_each_kind_of_actor() -> None:
    step = [trace.Step(tool="Read", kind="read")]
    why = {
        source: why_no_steps(trace.Trajectory(source))
        for source in ("cmd:./agent.sh", "script:plan.yaml", "openai:gpt-4o", "aider", "claude")
    }
    assert why["cmd:./agent.sh"] is not None and why["cmd:./agent.sh"].startswith(
        "cmd: actors print no step stream"
    )
    assert (why["script:plan.yaml"] or "").startswith("script: actors print no step stream")
    assert (why["openai:gpt-4o"] or "").startswith("LLM actors answer in one message")
    assert (why["aider"] or "").startswith("aider prints no step stream")
    assert (why["claude"] or "").startswith("claude's stream held no steps")
    assert why_no_steps(trace.Trajectory("claude", step)) is None
    assert why_no_steps(trace.Trajectory("unknown", step)) is None  # no meta line: as before
    assert (why_no_steps(trace.Trajectory("unknown")) or "").startswith("the trace held no steps")
    assert why_no_steps(None) == (
        "no trace was kept of this attempt; showing the files changed and the last output"
    )


def test_last_lines_are_bounded_cleaned_and_redacted() -> None:
    long = "x" * (tail.OUTPUT_LINE_CHARS + 50)
    text = "first\n" + "y" * 100_000 + "\n" + "\n".join(f"l{i}" for i in range(30))
    lines = tail.last_lines(f"{text}\n\n{long}\n\x1b[1mbold\x1b[0m token=sk-{'b' * 30}\n")
    assert len(lines) == tail.OUTPUT_LINES and lines[0] == "l12"
    assert lines[-2] == "x" * tail.OUTPUT_LINE_CHARS + "… [50 more chars]"
    assert lines[-1] == "bold token=[REDACTED]"
    (cut,) = tail.last_lines("only\n" + "z" * 50_000)  # one line, longer than looked at
    assert cut.startswith("…" + "z" * 299 + "… [") and len(cut) < tail.OUTPUT_LINE_CHARS + 30
    assert tail.last_lines("") == []


def test_a_streamed_attempt_keeps_no_output_lines_unless_its_stream_held_no_steps(
    tmp_path: Path,
) -> None:
    steps = trace.Trajectory("claude", [trace.Step(tool="Read", kind="read")])
    streamed = ActorResult("out", 0, 1, trajectory=steps)
    tracing.store_attempt(tmp_path / "a", streamed, "claude", [], tmp_path)
    assert trace.read(tmp_path / "a" / trace.TRACE_FILE).output == []
    empty = ActorResult("Invalid API key", 1, 1, trajectory=trace.Trajectory("claude"))
    tracing.store_attempt(tmp_path / "b", empty, "claude", [], tmp_path)
    assert trace.read(tmp_path / "b" / trace.TRACE_FILE).output == ["Invalid API key"]


AGENT = """\
import pathlib
for i in range(1, 31):
    print(f"agent line {i}")
pathlib.Path("calc.py").write_text("def absolute(x):\\n    return abs(x)\\n")
"""


def test_ralph_trace_of_a_cmd_agent_end_to_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ralph: RunCli
) -> None:
    calc = "def absolute(x):\n    return x\n"
    root = make_calc_repo(tmp_path / "calc", calc=calc, tests="", monkeypatch=monkeypatch)
    (tmp_path / "agent.py").write_text(AGENT)
    run = ralph(
        "run", "fix absolute", "--actor", f"cmd:{sys.executable} {tmp_path / 'agent.py'}",
        "--reflector", "heuristic", "--check", "test -f fixed.txt", "-n", "1", "--json", cwd=root,
    )  # fmt: skip
    assert run.code == 1, run.err
    loop = json.loads(run.out)["loop_id"]
    shown = ralph("trace", loop, cwd=root)
    assert shown.code == 0, shown.err
    lines = shown.out.splitlines()
    assert lines[0].startswith(f"{loop} iteration 1 (cmd:")
    assert "cmd: actors print no step stream" in lines[1]
    assert "  +1 -1  calc.py" in lines and lines[-1] == "  agent line 30"
    assert "  agent line 10" not in lines
    data = json.loads(ralph("trace", loop, "1", "--json", cwd=root).out)
    assert data["changed_files"] == [{"path": "calc.py", "added": 1, "removed": 1}]
    assert data["last_output"][0] == "agent line 11" and data["steps"] == []


def test_the_screen_lists_at_most_fifty_files_and_says_binary_ones() -> None:
    files = [ChangedFile("logo.png", None, None)]
    files += [ChangedFile(f"m{i}.py", 120 if i == 0 else 1, 0) for i in range(60)]
    view = TraceView(LOOP, 1, trace.Trajectory("cmd:x"), "why", files, [])
    lines = drawn(view, width=100, terminal=False)
    assert "files changed (61):" in lines and "  (binary)     logo.png" in lines
    assert "      +120 -0  m0.py" in lines and "        +1 -0  m48.py" in lines
    assert "m49.py" not in "\n".join(lines) and "  … 11 more files" in lines
    assert "the actor's last output: none kept" in lines
    assert len(to_data(view)["changed_files"]) == 61  # --json has them all
