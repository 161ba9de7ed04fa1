"""Reporters' helpers: the sparkline and the progress bar for long reads of the memory."""

from __future__ import annotations

import time

import pytest

from ralph import ui


def test_sparkline_maps_rewards_to_blocks() -> None:
    assert ui.sparkline([0.0, 0.5, 1.0]) == "▁▅█"
    assert ui.sparkline([]) == ""


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
