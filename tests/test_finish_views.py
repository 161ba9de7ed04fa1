"""What a person sees after the loop: analyze at 80 columns, the HTML legend,
summaries that lead with the root cause, whole words in CSV, whole lines in a pipe, and a
demo that cleans up after itself."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pytest

from ralph.analyze.report import write_csv, write_html
from ralph.analyze.stats import analyze
from ralph.cli.analyze_view import headline, render
from ralph.ids import short_id
from ralph.memory.state import BaselineSummary
from ralph.memory.store import LoopState, MemoryStore
from ralph.records import (
    ActorOutput,
    CreditAssignment,
    EvaluatorOutput,
    IterationRecord,
    MemoryMetadata,
    RalphExtension,
    SelfReflection,
    Usage,
)

from .conftest import EXAMPLE_LOOP, RunCli

WORDY = " ".join(f"word{n}" for n in range(80))  # 550 characters, no line break


def record(loop_id: str, iteration: int, reward: float, *, passed: bool = False) -> IterationRecord:
    return IterationRecord(
        loop_id=loop_id,
        iteration=iteration,
        timestamp=f"2026-03-01T10:{iteration:02d}:00Z",
        task_description="make the date parser accept every format its tests use",
        actor_output=ActorOutput(actions=[], rationale="tried"),
        evaluator_output=EvaluatorOutput(passed, "unit_tests", reward_signal=reward),
        self_reflection=SelfReflection(
            reflection_text=f"My attempt did not make the checks pass. {WORDY}",
            credit_assignment=None
            if passed
            else CreditAssignment(
                root_cause="the parser reads slash dates day first where the tests expect "
                "month first, and it never handles compact dates",
                failure_category="incomplete_implementation",
            ),
        ),
        memory_metadata=MemoryMetadata(3, 0),
        ralph=RalphExtension(usage=Usage(), duration_ms={"actor": 1000}),
    )


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    store = MemoryStore(tmp_path)
    store.ensure()
    for n, loop_id in enumerate(
        ["ralph-make-the-date-parser-accept-every-format-b9b8d2a1", "ralph-fix-add-30f530fd"]
    ):
        for i, reward in enumerate([0.25, 0.25, 1.0][: 3 - n], start=1):
            store.write_record(record(loop_id, i, reward, passed=reward == 1.0))
        state = LoopState(loop_id, "make the date parser accept every format its tests use")
        state.status, state.iteration = "completed", 3 - n
        state.baseline = BaselineSummary(reward=0.0)
        store.write_state(state)
    return store


def test_analyze_at_80_columns_keeps_words_and_figures_whole_and_labels_them(
    store: MemoryStore,
) -> None:
    from rich.console import Console

    console = Console(record=True, width=80, color_system=None, force_terminal=True)
    render(analyze(store), console)
    text = console.export_text()
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines)
    assert "incomplete_implementation" in text  # never incomplete_implementa / tion
    assert "0.25 → 1.00" in text and "(incomplete_implementation)" in text
    head = " ".join(lines[:3])
    for label in ("success rate 50% (1 of 2 green)", "iterations to green: mean 3.0",
                  "tokens unknown", "cost unknown", "time "):  # fmt: skip
        assert label in head
    assert len(headline(analyze(store), 200)) == 1  # one line when there is room


def test_the_html_legend_is_under_the_chart_at_a_readable_size(
    store: MemoryStore, tmp_path: Path
) -> None:
    analysis = analyze(store)
    target = tmp_path / "report.html"
    write_html(analysis, target)
    page = target.read_text(encoding="utf-8")
    chart = page.index("<h2>Reward per iteration</h2>")
    legend = page.index("<ul class='legend'>", chart)
    assert page.index("</svg>", chart) < legend < page.index("<h2>", chart + 1)  # under it
    for loop in analysis.loops:
        assert f"<code>{short_id(loop.loop_id)}</code>" in page[legend:]
    (rule,) = re.findall(r"\.legend\{[^}]*\}", page)
    assert "font-size" not in rule  # the body's size, never a smaller one


def test_csv_never_cuts_text(store: MemoryStore) -> None:
    buffer = io.StringIO()
    write_csv(analyze(store), buffer)
    rows = [r for r in csv.DictReader(io.StringIO(buffer.getvalue())) if r["reflection"]]
    for row in rows:
        assert row["reflection"] == f"My attempt did not make the checks pass. {WORDY}".strip()


def test_list_and_search_lead_with_the_root_cause(ralph: RunCli, example_project: Path) -> None:
    listed = ralph("reflections", "list", "--loop", EXAMPLE_LOOP, cwd=example_project)
    header, first, *_ = listed.out.splitlines()
    assert header.split("\t")[-1] == "root cause / reflection"
    assert first.split("\t")[-1].startswith("Guessed the slash date order")
    rows = ralph("reflections", "list", "--loop", EXAMPLE_LOOP, "--json", cwd=example_project)
    assert '"root_cause": "Guessed the slash date order' in rows.out
    found = ralph("reflections", "search", "slash date", cwd=example_project)
    assert found.code == 0, found.err
    summaries = [line.split("\t")[-1] for line in found.out.splitlines()[1:]]
    assert any(s.startswith("Guessed the slash date order") for s in summaries)
    assert not any(s.startswith("I assumed every slash-separated") for s in summaries)


def test_output_to_a_pipe_is_not_wrapped_at_80_columns(
    ralph: RunCli, example_project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    shown = ralph("reflections", "show", EXAMPLE_LOOP, "1", cwd=example_project)
    assert shown.code == 0
    assert any(len(line) > 80 for line in shown.out.splitlines())
    assert "I assumed every slash-separated date is day-first, but test_us_format" in shown.out


def test_demo_removes_its_repository_unless_kept(
    ralph: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loop itself is stubbed: what is tested is the demo's own setup and cleanup."""
    from ralph.cli import demo
    from ralph.loop import assembly
    from ralph.loop.result import LoopResult

    seen: list[Path] = []

    def run_task(task: str, flags: object, reporter: object, *, cwd: Path) -> LoopResult:
        seen.append(cwd)
        assert (cwd / "dates" / "parser.py").is_file() and reporter.next_steps is False  # type: ignore[attr-defined]
        return LoopResult("ralph-demo-1", "completed", "success", 0, 2, 2, 1.0, [0.5, 1.0], {}, "")

    monkeypatch.setattr(assembly, "run_task", run_task)
    monkeypatch.delenv("COLUMNS", raising=False)
    result = ralph("demo", "--quiet", cwd=tmp_path)
    assert result.code == 0, result.err
    assert seen and not seen[0].exists()
    assert f"ralph demo: {demo.TASK}\n" in result.out  # whole, not cut at 80 columns


def test_demo_s_paths_go_whole_onto_their_own_line_at_80_columns() -> None:
    """A long `records:` path was split by the terminal at column 80: it moves to a line of its
    own instead, whole, and stays on the label's line off a terminal."""
    import tempfile

    from rich.console import Console

    from ralph.cli.demo import show_outcome
    from ralph.testing import make_loop, write

    with tempfile.TemporaryDirectory(prefix="rd-") as folder:
        tail = "/demo/.aiwg/ralph/reflections/ralph-fake-1"
        root = Path(folder) / ("d" * (74 - len(folder) - len(tail) - 1)) / "demo"
        make_loop(root, {"default": write("full")}).start()
        records = str(MemoryStore(root).reflections_dir("ralph-fake-1"))
        assert len(records) == 74  # fits a line of its own, not after the label
        for terminal in (True, False):
            out = io.StringIO()
            console = Console(file=out, width=80, force_terminal=terminal, color_system=None)
            show_outcome(root, "ralph-fake-1", console)
            lines = out.getvalue().splitlines()
            if terminal:
                at = lines.index("records:")
                assert lines[at + 1] == f"  {records}"
            else:
                assert f"records:    {records}" in lines
