"""ReAct traces: parsing the agent CLIs' streams, bounds and redaction, storage, `ralph trace`,
and the compact trajectory the reflector and the heuristic reflection read."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ralph.actors import trace, tracing
from ralph.actors.base import ActorContext, ActorResult, ToolCall
from ralph.actors.registry import make_actor
from tests.conftest import RunCli
from tests.fakes import AGENT_CREDENTIALS
from tests.fakes.calc_project import make_calc_repo

FAKES = Path(__file__).parent / "fakes" / "agents"
EDIT = "FAKE-EDIT: app.py :: VALUE = 1 => VALUE = 2"


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ.get('PATH', '')}")
    for name, value in AGENT_CREDENTIALS.items():  # the preflight: they could run unattended
        monkeypatch.setenv(name, value)


@pytest.fixture
def ctx(tmp_path: Path) -> ActorContext:
    root = tmp_path / "project"
    root.mkdir()
    (root / "app.py").write_text("VALUE = 1\n")
    return ActorContext("ralph-t-0a1b2c3d", 1, root, tmp_path / "artifacts" / "001", 60, 30)


def run(name: str, ctx: ActorContext) -> trace.Trajectory:
    result = make_actor(name, base_dir=ctx.workdir).act(f"Fix it.\n{EDIT}\n", ctx)
    assert result.exit_code == 0, result.output
    assert result.trajectory is not None
    return result.trajectory


def test_claude_stream_gives_thought_action_observation_steps(
    fakes: None, ctx: ActorContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_AGENT_RUN", "echo 1 failed; exit 1")
    steps = run("claude", ctx).steps
    app = str(ctx.workdir / "app.py")
    assert [(s.tool, s.kind) for s in steps] == [
        ("Read", "read"),
        ("Bash", "command"),
        ("Edit", "edit"),
        (None, None),
    ]
    read, bash, edit, answer = steps
    assert read.thought == "Let me read the code first."
    assert read.files == [app] and read.observation == "VALUE = 1" and read.ok is True
    assert bash.target == "echo 1 failed; exit 1" and bash.ok is False
    # claude prints each assistant event with the usage of `message_start`: output left out
    assert bash.observation == "1 failed" and bash.tokens_out is None
    assert edit.files == [app] and "has been updated" in (edit.observation or "")
    assert answer.thought == "I made 1 edit(s)."


def test_codex_stream_unwraps_commands_and_reads_file_changes(
    fakes: None, ctx: ActorContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_AGENT_RUN", "echo ok")
    steps = run("codex", ctx).steps
    app = str(ctx.workdir / "app.py")
    assert [(s.tool, s.target) for s in steps] == [
        ("command", "ls"),
        ("command", f"cat {app}"),
        ("command", "echo ok"),
        ("file_change", f"update {app}"),
        (None, None),
    ]
    assert steps[0].thought == "**Looking at the task**"
    assert steps[1].observation == "VALUE = 1" and steps[2].ok is True
    assert steps[3].files == [app] and steps[4].thought == "Applied 1 change(s)."


@pytest.mark.parametrize("name", ["gemini", "opencode"])
def test_gemini_and_opencode_streams_give_the_edit_step(
    name: str, fakes: None, ctx: ActorContext
) -> None:
    steps = run(name, ctx).steps
    edits = [s for s in steps if s.kind == "edit"]
    assert len(edits) == 1 and edits[0].files == [str(ctx.workdir / "app.py")]
    assert edits[0].ts is not None  # both streams carry times
    assert steps[-1].tool is None and "1 file" in (steps[-1].thought or "")


def test_a_broken_stream_keeps_what_parsed_and_counts_the_rest() -> None:
    good = {
        "type": "item.completed",
        "item": {
            "id": "1",
            "type": "command_execution",
            "command": "pytest",
            "exit_code": 1,
            "aggregated_output": "boom",
        },
    }
    stdout = "\n".join(
        ["Reading prompt from stdin...", json.dumps(good), "not json at all", '{"type": "item.']
    )
    trajectory = tracing.parse_stream("codex", stdout)
    assert trajectory is not None
    assert [s.target for s in trajectory.steps] == ["pytest"]
    assert trajectory.steps[0].ok is False and trajectory.steps[0].observation == "exit 1\nboom"
    assert trajectory.unparsed == 3
    assert tracing.parse_stream("aider", "whatever") is None  # no JSON stream: not a trajectory


def test_a_huge_stream_is_bounded_and_secrets_are_redacted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MY_API_TOKEN", "s3cr3t-value-123")
    events = []
    for i in range(300):
        block = {
            "type": "tool_use",
            "id": f"t{i}",
            "name": "Bash",
            "input": {"command": f"echo {i} s3cr3t-value-123"},
        }
        events.append({"type": "assistant", "message": {"content": [block]}})
        result = {"type": "tool_result", "tool_use_id": f"t{i}", "content": "x" * 20_000}
        events.append({"type": "user", "message": {"content": [result]}})
    trajectory = tracing.parse_stream("claude", "\n".join(json.dumps(e) for e in events))
    assert trajectory is not None
    assert len(trajectory.steps) == trace.HEAD_STEPS + trace.TAIL_STEPS
    assert trajectory.dropped == 300 - len(trajectory.steps)
    assert trajectory.steps[-1].target == "echo 299 [REDACTED:MY_API_TOKEN]"
    assert len(trajectory.steps[0].observation or "") < trace.OBSERVATION_CHARS + 40
    assert "more chars" in (trajectory.steps[0].observation or "")


def test_other_actors_trajectory_is_their_edits_and_answer() -> None:
    acted = ActorResult("", 0, 10, tool_calls=[ToolCall("edit", "a.py")], summary="Fixed a.py.")
    trajectory = tracing.from_result(acted, "cmd")
    assert [(s.tool, s.files, s.thought) for s in trajectory.steps] == [
        ("edit", ["a.py"], None),
        (None, [], "Fixed a.py."),
    ]


def _steps(*steps: trace.Step) -> trace.Trajectory:
    return trace.Trajectory("claude", list(steps))


def test_summary_and_compact_line(tmp_path: Path) -> None:
    trajectory = _steps(
        trace.Step(
            tool="Read", kind="read", target=str(tmp_path / "a.py"), files=[str(tmp_path / "a.py")]
        ),
        trace.Step(tool="Bash", kind="command", target="python -m pytest -k x", ok=False),
        trace.Step(tool="Edit", kind="edit", files=[str(tmp_path / "b.py")]),
        trace.Step(tool="Edit", kind="edit", files=[str(tmp_path / "b.py")]),
    )
    summary = trace.summarize(trajectory, check_commands=["pytest -q"], workdir=tmp_path)
    assert summary.actions == {"Read": 1, "Bash": 1, "Edit": 2}
    assert (summary.files_read, summary.files_edited) == (["a.py"], ["b.py"])
    assert summary.commands == ["python -m pytest -k x"] and summary.ran_checks is True
    line = trace.compact(trajectory, workdir=tmp_path)
    assert line == "read a.py; ran python -m pytest -k x (failed); edited b.py"
    other = trace.summarize(trajectory, check_commands=["mypy ."], workdir=tmp_path)
    assert other.ran_checks is False


def test_check_note_names_a_check_never_run_run_before_the_edit_or_left_failing() -> None:
    never = trace.check_note("read a.py; edited a.py", "pytest", "pytest")
    assert never is not None and "never ran pytest" in never[0]
    assert never[1] == "Run `pytest` yourself and read its output before you stop."
    before = trace.check_note("ran pytest -k x (failed); edited a.py", "pytest", "pytest -q")
    assert before is not None and before[0] == (
        "I edited the code after my last run of pytest (pytest -k x (failed)) and did not run "
        "it again before stopping."
    )
    failed = trace.check_note("edited a.py; ran pytest -k x (failed)", "pytest", "pytest -q")
    assert failed is not None
    assert failed[0] == "My last run of pytest failed (pytest -k x (failed)) and I stopped anyway."
    assert trace.check_note("edited a.py; ran pytest -k x", "pytest", "pytest") is None
    assert trace.check_note("edited a.py", "pytest", "pytest") is None  # cannot tell


def test_write_and_read_round_trip(tmp_path: Path) -> None:
    trajectory = _steps(trace.Step(thought="look", tool="Read", kind="read", files=["a"]))
    trajectory.unparsed = 2
    path = trace.write(tmp_path, trajectory)
    lines = path.read_text().splitlines()
    assert json.loads(lines[0]) == {
        "meta": {"source": "claude", "steps": 1, "dropped": 0, "unparsed": 2}
    }
    assert json.loads(lines[1]) == {
        "step": 1,
        "thought": "look",
        "tool": "Read",
        "kind": "read",
        "files": ["a"],
    }
    again = trace.read(path)
    assert again.steps == trajectory.steps and again.unparsed == 2


CALC = "def absolute(x):\n    return x\n"
TESTS = "from calc import absolute\n\ndef test_negative():\n    assert absolute(-2) == 2\n"


@pytest.mark.parametrize("actor", ["claude", "codex"])
def test_a_loop_writes_traces_that_match_the_stream_and_ralph_trace_shows_them(
    actor: str, fakes: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ralph: RunCli
) -> None:
    root = make_calc_repo(tmp_path / "calc", calc=CALC, tests=TESTS, monkeypatch=monkeypatch)
    monkeypatch.setenv("FAKE_AGENT_EDIT", "FAKE-EDIT: calc.py :: return x => return x  # no")
    monkeypatch.setenv("FAKE_AGENT_RUN", "test -f fixed.txt")
    result = ralph(
        "run",
        "fix absolute",
        "--actor",
        actor,
        "--reflector",
        "heuristic",
        "--check",
        "test -f fixed.txt",
        "--max-iterations",
        "1",
        "--json",
        cwd=root,
    )
    assert result.code == 1, result.err
    loop = json.loads(result.out)["loop_id"]
    steps = [
        json.loads(line)
        for line in (root / ".aiwg/ralph/loops" / loop / "001/trace.jsonl").read_text().splitlines()
    ]
    kinds = [s.get("kind") for s in steps[1:]]
    assert "read" in kinds or actor == "codex"
    commands = [s for s in steps[1:] if s.get("kind") == "command"]
    assert commands[-1]["target"] == "test -f fixed.txt" and commands[-1]["ok"] is False
    assert any(s.get("kind") == "edit" for s in steps[1:])
    record = json.loads((root / ".aiwg/ralph/reflections" / loop / "001.json").read_text())
    summary = record["ralph"]["trace"]
    assert summary["files_edited"] == ["calc.py"] and summary["ran_checks"] is True
    assert summary["files_read"] == ["calc.py"]  # codex reads with `cat`
    assert "did not run it again" in record["self_reflection"]["reflection_text"]
    assert ralph("reflections", "validate", cwd=root).code == 0

    shown = ralph("trace", loop, cwd=root)
    assert shown.code == 0, shown.err
    assert "test -f fixed.txt  FAILED" in shown.out
    as_json = json.loads(ralph("trace", loop, "1", "--json", cwd=root).out)
    assert len(as_json["steps"]) == len(steps) - 1 and as_json["iteration"] == 1
    assert f"ralph trace {loop} 1" in ralph("reflections", "show", loop, cwd=root).out


def test_ralph_trace_of_an_unknown_loop_is_one_line_exit_2(tmp_path: Path, ralph: RunCli) -> None:
    (tmp_path / ".aiwg/ralph").mkdir(parents=True)
    result = ralph("trace", "ralph-nope-0a1b2c3d", cwd=tmp_path)
    assert result.code == 2 and result.err.startswith("ralph: error:")
    assert "Traceback" not in result.err


def test_analyze_counts_actions_per_iteration_and_success_when_the_agent_ran_the_checks(
    tmp_path: Path, ralph: RunCli
) -> None:
    from ralph.memory.store import MemoryStore
    from ralph.records import (
        ActorOutput,
        EvaluatorOutput,
        IterationRecord,
        MemoryMetadata,
        RalphExtension,
        SelfReflection,
        TraceSummary,
    )

    store = MemoryStore(tmp_path)
    store.ensure()
    traces = [
        TraceSummary(steps=3, actions={"Read": 2, "Edit": 1}, ran_checks=False),
        TraceSummary(steps=4, actions={"Bash": 2, "Edit": 1, "Grep": 1}, ran_checks=True),
        None,  # an attempt without a trace is not counted
    ]
    for i, traced in enumerate(traces, 1):
        passed = i == 2
        store.write_record(
            IterationRecord(
                loop_id="ralph-t-0a1b2c3d",
                iteration=i,
                timestamp="2026-01-01T00:00:00Z",
                actor_output=ActorOutput(actions=[], rationale="r"),
                evaluator_output=EvaluatorOutput(
                    passed=passed, verification_type="unit_tests", reward_signal=0.5
                ),
                self_reflection=SelfReflection(reflection_text="x"),
                memory_metadata=MemoryMetadata(omega_capacity=3, current_memory_size=0),
                ralph=RalphExtension(trace=traced),
            )
        )
    result = ralph("analyze", "--json", cwd=tmp_path)
    assert result.code == 0, result.err
    stats = json.loads(result.out)["summary"]["agent_actions"]
    assert stats == {
        "traced_attempts": 2,
        "memory_tool_attempts": 0,
        "passed_when_memory_tools": None,
        "per_iteration": {"edit": 1.0, "read": 1.0, "command": 1.0, "search": 0.5, "other": 0.0},
        "ran_checks": 1,
        "ran_checks_share": 0.5,
        "passed_when_ran_checks": 1.0,
        "passed_otherwise": 0.0,
    }
    shown = ralph("analyze", cwd=tmp_path)
    said = "ran the checks itself in 50% of attempts; 100% of those passed, 0% of the others"
    assert said in " ".join(shown.out.split())


def test_analyze_says_whether_the_agent_ran_the_checks_in_a_sentence_without_dashes() -> None:
    """cachetools: `ran the checks itself in 0% of attempts, which passed - (the others 50%)`."""
    from types import SimpleNamespace

    from ralph.analyze.trace_stats import summary_line

    def attempt(ran: bool, passed: bool) -> SimpleNamespace:
        return SimpleNamespace(actions={"edit": 1}, ran_checks=ran, passed=passed, memory_calls=0)

    never = summary_line([attempt(False, True), attempt(False, False)])
    assert never is not None and never.endswith(
        "never ran the checks itself; 50% of its attempts passed"
    )
    always = summary_line([attempt(True, True)])
    assert always is not None and always.endswith("in every attempt; 100% of them passed")


def test_a_session_longer_than_the_captured_output_keeps_every_step(
    fakes: None, ctx: ActorContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """process.run keeps only the head and tail of stdout; the trace reads it as it flows."""
    (ctx.workdir / "app.py").write_text("VALUE = 1\n" + "# padding\n" * 5000)  # 50 KB a read
    monkeypatch.setenv("FAKE_AGENT_REPEAT", "12")  # 600 KB of stream, above the capture cap
    trajectory = run("claude", ctx)
    assert [s.tool for s in trajectory.steps] == ["Read"] * 12 + ["Edit", None]
    assert trajectory.unparsed == 0 and trajectory.dropped == 0


def test_the_tracer_joins_lines_split_across_chunks() -> None:
    line = json.dumps(
        {
            "type": "item.completed",
            "item": {"id": "1", "type": "command_execution", "command": "make", "exit_code": 0},
        }
    )
    seen: list[str] = []
    tracer = tracing.StreamTracer(lambda stream, text: seen.append(text))
    for i in range(0, len(line), 7):
        tracer.on_output("stdout", line[i : i + 7])
    tracer.on_output("stderr", "warning\n")
    trajectory = tracer.trajectory("codex", "")
    assert trajectory is not None and [s.target for s in trajectory.steps] == ["make"]
    assert "".join(seen) == line + "warning\n"  # the live view still gets everything
