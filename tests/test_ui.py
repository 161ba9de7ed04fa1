"""Reporters' helpers: the sparkline and the progress bar for long reads of the memory."""

from __future__ import annotations

import time

import pytest

from ralph import glyphs
from ralph.cli import live as ui


def test_sparkline_maps_rewards_to_blocks() -> None:
    assert glyphs.sparkline([0.0, 0.5, 1.0]) == "▁▅█"
    assert glyphs.sparkline([]) == ""


def test_progress_bar_stays_silent_off_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    with ui.progress_bar("reading", after=0) as progress:
        for n in range(3):
            progress(n, 3)
    assert capsys.readouterr().err == ""


def test_progress_bar_shows_on_a_terminal_once_work_is_slow(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(ui, "is_ci", lambda: False)
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich treats stderr as a terminal
    monkeypatch.delenv("NO_COLOR", raising=False)
    with ui.progress_bar("quick work", after=60) as progress:
        progress(0, 2)
        progress(1, 2)
    assert "quick work" not in capsys.readouterr().err  # fast: no bar at all
    with ui.progress_bar("slow work", after=0.05) as progress:
        progress(0, 2)
        time.sleep(0.1)
        progress(1, 2)
    assert "slow work" in capsys.readouterr().err


def test_clip_cuts_at_a_word_with_an_ellipsis() -> None:
    assert glyphs.clip("short", 10) == "short"
    assert glyphs.clip("the first error is a test failure", 20) == "the first error is…"
    assert glyphs.clip("x" * 30, 10) == "x" * 9 + "…"


def test_live_view_shows_the_newest_output_line_of_the_phase() -> None:
    from rich.console import Console

    console = Console(record=True, width=60, force_terminal=True, color_system=None)
    reporter = ui.RichReporter(console)
    try:
        reporter.phase(1, "act")
        reporter.output("stdout", "agent: step 1\nagent: step 2\n\n")
        console.print(reporter._view())
        assert "agent: step 2" in console.export_text()
        reporter.phase(1, "evaluate")  # a new phase starts without the old line
        console.print(reporter._view())
        assert "agent: step" not in console.export_text()
    finally:
        if reporter.live is not None:
            reporter.live.stop()


def test_live_footer_shows_the_loops_totals_by_the_one_rule_for_money() -> None:
    """The footer is the state's `usage`: a judge's calls outside an iteration count (no record
    holds them), and one unknown cost makes the total unknown for good, never the known part."""
    from rich.console import Console

    from ralph.loop.policy import Decision
    from ralph.memory.state import LoopState
    from ralph.records import ModelCall

    from .fakes.records import record

    console = Console(record=True, width=80, force_terminal=True, color_system=None)
    reporter = ui.RichReporter(console)

    def footer() -> str:
        console.export_text()  # drop what was printed before
        console.print(reporter._view())
        return console.export_text().splitlines()[-1].strip()

    assert footer() == "rewards"  # before the loop starts (its baseline): no totals to show
    state = LoopState("ralph-footer-1", "task")
    reporter.loop_started(state, False)
    assert footer() == "rewards   tokens none yet  cost none yet"
    state.count_calls([ModelCall(100, 20, 0.05)])  # a judge at the baseline: no record's
    assert footer().endswith("tokens 120  cost $0.0500")
    first = record(1, reward=0.5, cost=0.25)
    state.count(first)
    reporter.iteration_done(first, Decision("continue", ""))
    assert footer().endswith("tokens 120  cost $0.3000")
    for n, cost in ((2, None), (3, 1.0)):  # an unpriced attempt, then a priced one
        state.count(record(n, reward=0.5, cost=cost))
        assert footer().endswith("tokens 120  cost unknown")


def test_live_footer_of_a_resumed_loop_starts_from_its_earlier_totals() -> None:
    from rich.console import Console

    from ralph.memory.state import LoopState, Totals

    console = Console(record=True, width=80, force_terminal=True, color_system=None)
    reporter = ui.RichReporter(console)
    earlier = Totals(tokens_in=None, tokens_out=None, cost_usd=0.5, wall_seconds=3.0)
    reporter.loop_started(LoopState("ralph-footer-2", "task", iteration=2, usage=earlier), True)
    console.export_text()
    console.print(reporter._view())
    assert console.export_text().rstrip().endswith("tokens unknown  cost $0.5000")
