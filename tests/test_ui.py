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
