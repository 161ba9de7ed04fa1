"""Usage limits waited out (loop/limits.py), in process over the fakes of ralph.testing: the
limited attempt does not count, the loop waits until the reset (a fake clock: no test waits),
then runs the same iteration again; or it pauses for a person (exit 5) and resumes."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from ralph import schemas
from ralph.errors import EXIT_FOR_PERSON, LoopAborted
from ralph.loop.limits import MARGIN, Waiter, board_path, read_board
from ralph.memory.store import MemoryStore
from ralph.testing import TEST_TEXT, VERSIONS, Loop, make_loop, write
from ralph.usage_limits import UsageLimit

from .conftest import RunCli
from .fakes import AGENT_CREDENTIALS
from .fakes.calc_project import make_calc_repo

LOOP = "ralph-fake-1"
SPEND = "You've hit your monthly spend limit · raise it at claude.ai/settings/usage"
NOW = 1_800_000_000.0


class Clock:
    """Unix time that moves only when the loop sleeps; keeps every sleep."""

    def __init__(self, now: float = NOW) -> None:
        self.now = now
        self.slept: list[float] = []
        self.during: list[dict[str, object]] = []  # the state file while waiting
        self.on_sleep: object = None

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def limited_loop(tmp_path: Path, *limits: UsageLimit, **settings: object) -> tuple[Loop, Clock]:
    loop = make_loop(tmp_path, {1: write("half"), 2: write("full")}, **settings)  # type: ignore[arg-type]
    loop.actor.limits[1] = list(limits)
    clock = Clock()
    loop.runner.waiter = Waiter(clock=clock.time, sleep=clock.sleep)
    return loop, clock


def test_a_limit_is_waited_out_and_the_same_iteration_runs_again(tmp_path: Path) -> None:
    reset = NOW + 3600
    loop, clock = limited_loop(tmp_path, UsageLimit("fake", "You've hit your limit", reset))
    result = loop.start()
    assert result.exit_code == 0 and result.iterations == 2
    # the limited attempt counted nowhere: two records, numbered 1 and 2, two reflections' worth
    store = MemoryStore(loop.root)
    assert [n for n, _ in store.record_paths(LOOP)] == [1, 2]
    assert len(loop.reporter.records) == 2
    assert sorted(loop.actor.prompts) == [1, 2]
    # it waited until the reset and the margin, no longer, in short sleeps (abort, countdown)
    assert clock.now == pytest.approx(reset + MARGIN)
    assert max(clock.slept) <= 1.0
    (until, said), *_ = loop.reporter.waits
    assert until == reset + MARGIN and "You've hit your limit" in said
    state = loop.state()
    assert state.waiting_until is None and state.status == "completed"


def test_the_limited_attempt_leaves_the_tree_as_it_found_it(tmp_path: Path) -> None:
    loop, clock = limited_loop(tmp_path, UsageLimit("fake", "limit", NOW + 60))
    seen: list[str] = []

    def look(seconds: float) -> None:
        seen.append((tmp_path / "calc.py").read_text())
        clock.sleep(seconds)

    loop.runner.waiter.sleep = look
    loop.start()
    # the attempt wrote the half fix, then met the limit: put back before the wait
    assert seen and set(seen) == {VERSIONS["zero"]}
    assert loop.actor.before[1] == VERSIONS["zero"]  # the second attempt found it untouched


def test_the_state_says_waiting_until_while_the_loop_waits(tmp_path: Path) -> None:
    loop, clock = limited_loop(tmp_path, UsageLimit("fake", "come back later", NOW + 120))
    states: list[dict[str, object]] = []
    path = MemoryStore(tmp_path).state_path(LOOP)

    def look(seconds: float) -> None:
        if not states:
            states.append(json.loads(path.read_text()))
        clock.sleep(seconds)

    loop.runner.waiter.sleep = look
    loop.start()
    (seen,) = states
    assert schemas.errors(schemas.LOOP_STATE, seen) == []
    assert seen["status"] == "running" and seen["waiting_for"] == "come back later"
    assert seen["waiting_until"] == "2027-01-15T08:03:00+00:00"  # NOW + 120 + MARGIN
    assert "waiting_until" not in json.loads(path.read_text())


@pytest.mark.parametrize(
    ("limit", "settings", "why"),
    [
        (UsageLimit("fake", "spend limit reached", None), {}, "gives no reset time"),
        (UsageLimit("fake", "weekly limit", NOW + 3 * 86400), {}, "past --max-wait 6h"),
        (UsageLimit("fake", "limit", NOW + 3600), {"max_wait": 600.0}, "past --max-wait 10m"),
        (UsageLimit("fake", "limit", NOW + 60), {"on_limit": "stop"}, "on_limit is stop"),
    ],
)
def test_a_limit_not_waited_out_pauses_for_a_person(
    tmp_path: Path, limit: UsageLimit, settings: dict[str, object], why: str
) -> None:
    loop, clock = limited_loop(tmp_path, limit, **settings)
    result = loop.start()
    assert result.exit_code == EXIT_FOR_PERSON == 5
    assert result.status == "paused" and result.stop_reason == "usage_limit"
    assert why in result.message and limit.message in result.message
    assert f"ralph resume {LOOP}" in result.message
    assert clock.slept == [] and result.iterations == 0
    assert MemoryStore(loop.root).record_paths(LOOP) == []
    assert (tmp_path / "calc.py").read_text() == VERSIONS["zero"]


@pytest.mark.parametrize("resets_at", [None, NOW + 86400])
def test_a_paused_loop_resumes_and_runs_the_iteration(
    tmp_path: Path, resets_at: float | None
) -> None:
    """A person resumes once the limit is lifted (credits bought): the attempt runs at once,
    not held back by the reset the limit named."""
    loop, _ = limited_loop(tmp_path, UsageLimit("fake", "spend limit reached", resets_at))
    assert loop.start().exit_code == EXIT_FOR_PERSON
    again = loop.again()
    clock = Clock()
    again.runner.waiter = Waiter(clock=clock.time, sleep=clock.sleep)
    resumed = again.runner.resume(loop.state())
    assert resumed.exit_code == 0 and resumed.iterations == 2 and clock.slept == []


def test_ctrl_c_during_the_wait_leaves_a_resumable_loop(tmp_path: Path) -> None:
    loop, clock = limited_loop(tmp_path, UsageLimit("fake", "limit", NOW + 3600))

    def interrupted(seconds: float) -> None:
        raise KeyboardInterrupt

    loop.runner.waiter.sleep = interrupted
    result = loop.start()
    assert result.status == "paused" and result.exit_code == 130
    state = loop.state()
    assert state.waiting_until is None and state.iteration == 0
    clock.now += 3600
    again = loop.again()
    again.runner.waiter = Waiter(clock=clock.time, sleep=clock.sleep)
    assert again.runner.resume(state).exit_code == 0


def test_ralph_abort_during_the_wait_ends_the_loop(tmp_path: Path) -> None:
    loop, clock = limited_loop(tmp_path, UsageLimit("fake", "limit", NOW + 3600))
    store = MemoryStore(tmp_path)

    def abort_then_sleep(seconds: float) -> None:
        store.abort_path(LOOP).parent.mkdir(parents=True, exist_ok=True)
        store.abort_path(LOOP).write_text("")
        clock.sleep(seconds)

    loop.runner.waiter.sleep = abort_then_sleep
    result = loop.start()
    assert result.status == "aborted" and len(clock.slept) == 1
    assert issubclass(LoopAborted, KeyboardInterrupt)


def test_a_limit_that_does_not_lift_pauses_after_three_waits(tmp_path: Path) -> None:
    limits = [UsageLimit("fake", "still limited", NOW + 60 * n) for n in range(1, 6)]
    loop, _ = limited_loop(tmp_path, *limits)
    result = loop.start()
    assert result.exit_code == EXIT_FOR_PERSON and "after 3 waits" in result.message
    assert len(loop.reporter.waits) == 3


def test_loops_on_the_same_agent_wait_together(tmp_path: Path) -> None:
    """One loop's limit is on the board: another loop on that agent waits for the same reset
    without spending an attempt to meet it."""
    first, _ = limited_loop(tmp_path / "a", UsageLimit("fake", "limit", NOW + 600))
    first.start()
    board = board_path(MemoryStore(tmp_path / "a"), "fake")
    other = make_loop(tmp_path / "b", {1: write("full")})
    (tmp_path / "b" / board.relative_to(tmp_path / "a")).parent.mkdir(parents=True)
    (tmp_path / "b" / board.relative_to(tmp_path / "a")).write_text(board.read_text())
    later = Clock(NOW + 100)
    other.runner.waiter = Waiter(clock=later.time, sleep=later.sleep)
    assert other.start().exit_code == 0
    assert later.now == pytest.approx(NOW + 600 + MARGIN)  # waited for the first one's reset
    assert sorted(other.actor.prompts) == [1] and len(other.reporter.waits) == 1
    limit = read_board(MemoryStore(tmp_path / "a"), "fake")
    assert limit is not None and limit.resets_at == NOW + 600


# end to end: `ralph run` with the claude preset, a fake claude that meets a spend limit -------

FAKES = Path(__file__).parent / "fakes" / "agents"
FIX = "FAKE-EDIT: calc.py :: return x => return abs(x)"


def test_run_pauses_with_exit_5_and_resume_continues(
    ralph: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A limit without a reset: exit 5, the CLI's words and `ralph resume`; once lifted,
    `ralph resume` runs the same first iteration, and the loop ends green."""
    tests = TEST_TEXT + "\n\ndef test_negative():\n    assert f(-2) == 2\n"
    root = make_calc_repo(
        tmp_path / "repo", calc=VERSIONS["partial"], tests=tests, monkeypatch=monkeypatch
    )
    limited = tmp_path / "limited"
    said = [
        {"type": "system", "subtype": "init", "session_id": "s"},
        {"type": "result", "subtype": "success", "is_error": True, "result": SPEND},
    ]
    limited.write_text("".join(json.dumps(event) + "\n" for event in said))
    shims = tmp_path / "bin"
    shims.mkdir()
    shim = shims / "claude"
    shim.write_text(
        f'#!/bin/sh\nif [ -f "{limited}" ]; then cat >/dev/null; cat "{limited}"; exit 1; fi\n'
        f'exec "{sys.executable}" "{FAKES / "claude"}" "$@"\n'
    )
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{shims}{os.pathsep}{os.environ.get('PATH', '')}")
    for name, value in AGENT_CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("FAKE_AGENT_EDIT", FIX)
    monkeypatch.setenv("CI", "true")
    check = f"{sys.executable} -m pytest -q -p no:cacheprovider tests"
    args = ["run", "make f handle negative numbers", "-a", "claude", "-t", check]
    args += ["--reflector", "heuristic", "--no-memory-tools", "--json"]
    paused = ralph(*args, cwd=root)
    assert paused.code == 5, paused.err
    result = json.loads(paused.out)
    assert (result["status"], result["stop_reason"], result["iterations"]) == (
        "paused",
        "usage_limit",
        0,
    )
    loop = result["loop_id"]
    assert SPEND in paused.err and f"ralph resume {loop}" in paused.err
    assert MemoryStore(root).record_paths(loop) == []
    limited.unlink()  # a person raised the limit
    resumed = ralph("resume", loop, "--json", cwd=root)
    assert resumed.code == 0, resumed.err
    assert json.loads(resumed.out)["iterations"] == 1


def test_on_limit_and_max_wait_from_the_config_and_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ralph import config

    (tmp_path / ".aiwg" / "ralph").mkdir(parents=True)
    (tmp_path / ".aiwg" / "ralph" / "config.yaml").write_text("on_limit: stop\nmax_wait: 2h\n")
    loaded = config.load(tmp_path, {})
    assert (loaded.on_limit, loaded.max_wait) == ("stop", 7200.0)
    monkeypatch.setenv("RALPH_ON_LIMIT", "wait")
    monkeypatch.setenv("RALPH_MAX_WAIT", "0")  # no limit
    loaded = config.load(tmp_path, {})
    assert (loaded.on_limit, loaded.max_wait) == ("wait", None)
    assert config.load(tmp_path, {"max_wait": "45m"}).max_wait == 2700.0


def test_a_reset_past_the_time_budget_is_the_budget_stop(tmp_path: Path) -> None:
    loop, clock = limited_loop(tmp_path, UsageLimit("fake", "limit", NOW + 3600), timeout=600.0)
    result = loop.start()
    assert (result.exit_code, result.status, result.stop_reason) == (3, "failed", "budget")
    assert "is up before the usage limit resets" in result.message and clock.slept == []
