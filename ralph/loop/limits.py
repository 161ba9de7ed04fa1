"""A usage limit met by an attempt (ralph/usage_limits.py): waited out, or a person decides.

The limited attempt does not count: `steps.act` has put the tree back, and no record,
reflection or lesson is made. With `on_limit: wait` (the default) the loop waits until the
reset plus `MARGIN` (the state says `waiting_until`, the reporter counts down), then runs the
same iteration again. It pauses instead, for a person (exit 5, `EXIT_FOR_PERSON`: `ralph
resume` continues it), when the limit gives no reset time (a spend limit, access disabled), when
the reset is further than `--max-wait`, with `on_limit: stop`, and
after `MAX_WAITS` limits in a row on one iteration (a reset that does not lift it).
Ctrl-C or `ralph abort` during the wait ends it as they end an attempt: the loop is paused
(or aborted), resumable.

Loops on the same agent wait together: the reset is written to `loops/limits/<agent>.json` in
the memory (shared by a batch's worktrees), and a loop about to run an attempt on that agent
waits for a reset not yet passed instead of spending an attempt to meet the limit itself.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ralph.errors import RalphError
from ralph.files import atomic_write_json
from ralph.loop.lifecycle import StateChanged, emit
from ralph.loop.policy import Decision
from ralph.reading import read_json_bounded
from ralph.usage_limits import UsageLimit, UsageLimited, clock_text, iso, span

if TYPE_CHECKING:
    from ralph.config import Settings
    from ralph.loop.lifecycle import Hook
    from ralph.loop.steps import Parts, Reporter
    from ralph.memory.state import LoopState
    from ralph.memory.store import MemoryStore

MARGIN = 60.0  # seconds after the reset: clocks differ, and a limit lifts a little late
TICK = 1.0  # seconds between two looks at the clock (the countdown, `ralph abort`)
MAX_WAITS = 3  # limits in a row on one iteration, each waited out: then a person decides
BOARD_BYTES = 64 * 1024
TIME_BUDGET = "time budget of"


class Runner(Protocol):
    """What the waiter uses of the loop's runner."""

    settings: Settings
    store: MemoryStore
    parts: Parts
    reporter: Reporter
    hooks: list[Hook]


@dataclass
class Waiter:
    """Waits out a usage limit for one loop; `clock` (Unix seconds) and `sleep` are
    injectable, so a test does not wait."""

    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    _iteration: int = field(default=0, init=False)
    _times: int = field(default=0, init=False)

    def ahead(self, store: MemoryStore, agent: str) -> None:
        """Before an attempt: another loop on `agent` met a limit that has not reset yet."""
        limit = read_board(store, agent)
        if limit is not None and (limit.resets_at or 0) + MARGIN > self.clock():
            raise UsageLimited(limit)

    def wait_out(
        self, runner: Runner, state: LoopState, limit: UsageLimit, started: float
    ) -> Decision | None:
        """Wait until the limit resets (None: run the iteration again), or the decision to
        pause the loop for a person."""
        number = state.iteration + 1
        self._times = self._times + 1 if self._iteration == number else 1
        self._iteration = number
        now = self.clock()
        why = self._why_not(limit, runner, now, started)
        if why is not None and why.startswith(TIME_BUDGET):  # the budget stop it would be
            return Decision("budget", f"{why} ({limit.source}: {limit.message})")
        if why is not None:  # not on the board: a person's `ralph resume` tries again at once
            return Decision("usage_limit", pause_message(limit, why, state.loop_id))
        assert limit.resets_at is not None  # _why_not said so
        write_board(runner.store, runner.parts.actor.name, limit)
        until = max(limit.resets_at, now) + MARGIN
        state.waiting_until, state.waiting_for = iso(until), limit.message
        emit(runner.hooks, StateChanged(state, started))
        runner.reporter.waiting(state, until, f"{limit.source}: {limit.message}")
        try:
            while (left := until - self.clock()) > 0:
                runner.store.check_abort(state.loop_id)  # `ralph abort` from elsewhere
                self.sleep(min(TICK, left))
        finally:
            state.waiting_until = state.waiting_for = None
        emit(runner.hooks, StateChanged(state, started))
        runner.reporter.note(f"iteration {number}: the usage limit has reset: trying again")
        return None

    def _why_not(self, limit: UsageLimit, runner: Runner, now: float, started: float) -> str | None:
        """Why the loop does not wait this limit out, or None when it does."""
        settings = runner.settings
        if settings.on_limit == "stop":
            return "on_limit is stop"
        if limit.resets_at is None:
            return "it gives no reset time"
        if self._times > MAX_WAITS:
            return f"it was still there after {MAX_WAITS} waits"
        wait = max(limit.resets_at - now, 0.0) + MARGIN
        if settings.max_wait is not None and wait > settings.max_wait:
            wait_text = span(settings.max_wait)
            return f"it resets {clock_text(limit.resets_at)}, past --max-wait {wait_text}"
        if settings.timeout is not None:
            left = settings.timeout - (time.monotonic() - started)
            if wait > left:
                return f"{TIME_BUDGET} {span(settings.timeout)} is up before the usage limit resets"
        return None


def pause_message(limit: UsageLimit, why: str, loop_id: str) -> str:
    """The final line of a loop paused by a usage limit: the CLI's own words, why it did
    not wait, and the command that continues it."""
    return (
        f"usage limit ({limit.source}: {limit.message}); not waited out: {why}. "
        f"When it is lifted: ralph resume {loop_id}"
    )


# the board: the last limit each agent met, shared by the loops of this memory ----------------


def board_path(store: MemoryStore, agent: str) -> Path:
    simple = re.fullmatch(r"[a-z0-9][a-z0-9._-]{0,39}", agent)
    key = agent if simple else "h-" + hashlib.sha256(agent.encode()).hexdigest()[:16]
    return store.base / "loops" / "limits" / f"{key}.json"


def write_board(store: MemoryStore, agent: str, limit: UsageLimit) -> None:
    """Say that `agent` is limited until `limit.resets_at`; a board that cannot be written
    costs the other loops an attempt, not this one its wait."""
    path = board_path(store, agent)
    data = {"agent": agent, "source": limit.source, "message": limit.message}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, {**data, "resets_at": limit.resets_at})
    except (OSError, RalphError):
        return


def read_board(store: MemoryStore, agent: str) -> UsageLimit | None:
    try:
        data = read_json_bounded(board_path(store, agent), BOARD_BYTES)
    except (OSError, ValueError, RalphError):
        return None
    if not isinstance(data, dict) or data.get("agent") != agent:
        return None
    resets_at = data.get("resets_at")
    if not isinstance(resets_at, int | float) or isinstance(resets_at, bool):
        return None
    return UsageLimit(str(data.get("source") or agent), str(data.get("message") or ""), resets_at)
