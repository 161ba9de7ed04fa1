"""The loop's lifecycle: the typed events the runner emits, and the hooks that act on them.

The runner decides; the hooks keep the books: `StateWriter` (the one writer of state.json:
every status change, the abort included, and every iteration counted), `RecordWriter` (each
attempt's record, after its commit), `ReportHook` (the Reporter's loop events) and
`BudgetHook` (the budgets, checked before each attempt starts). Hooks run in the order they
are given, so an attempt's record is on disk before the state that counts it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

from ralph.errors import BudgetExceeded

if TYPE_CHECKING:
    from ralph.loop.policy import Decision, Spend
    from ralph.loop.result import LoopResult
    from ralph.loop.steps import Reporter
    from ralph.memory.state import LoopState
    from ralph.memory.store import MemoryStore
    from ralph.records import IterationRecord

__all__ = [
    "AttemptStarting",
    "BudgetHook",
    "Event",
    "Hook",
    "IterationDone",
    "IterationRemembered",
    "LoopFinished",
    "LoopStarted",
    "RecordWriter",
    "ReportHook",
    "StateChanged",
    "StateWriter",
    "emit",
    "save_state",
]


@dataclass(frozen=True)
class LoopStarted:
    state: LoopState
    resumed: bool


@dataclass(frozen=True)
class StateChanged:
    """The state changed (its status, or what the actor wrote over it): it must be saved.
    `started`: the loop's monotonic clock, for its wall time (None: unchanged)."""

    state: LoopState
    started: float | None = None


@dataclass(frozen=True)
class AttemptStarting:
    """Before an attempt: what has been spent so far (a hook may stop the loop here)."""

    state: LoopState
    spend: Spend


@dataclass(frozen=True)
class IterationRemembered:
    """An attempt committed (when there is git): its record is final."""

    record: IterationRecord


@dataclass(frozen=True)
class IterationDone:
    record: IterationRecord
    decision: Decision


@dataclass(frozen=True)
class LoopFinished:
    result: LoopResult


Event = (
    LoopStarted
    | StateChanged
    | AttemptStarting
    | IterationRemembered
    | IterationDone
    | LoopFinished
)


class Hook(Protocol):
    def __call__(self, event: Event) -> None: ...


def emit(hooks: Sequence[Hook], event: Event) -> None:
    for hook in hooks:
        hook(event)


def save_state(store: MemoryStore, state: LoopState, started: float | None = None) -> None:
    """The one writer of state.json (the loop's and `ralph abort`'s); `started`: the loop's
    clock, for its wall time."""
    if started is not None:
        wall = round(time.monotonic() - started, 3)
        state.usage = replace(state.usage, wall_seconds=wall)
    store.write_state(state)


@dataclass
class StateWriter:
    store: MemoryStore

    def __call__(self, event: Event) -> None:
        if isinstance(event, StateChanged):
            save_state(self.store, event.state, event.started)


@dataclass
class RecordWriter:
    store: MemoryStore

    def __call__(self, event: Event) -> None:
        if isinstance(event, IterationRemembered):
            self.store.write_record(event.record)


@dataclass
class ReportHook:
    reporter: Reporter

    def __call__(self, event: Event) -> None:
        if isinstance(event, LoopStarted):
            self.reporter.loop_started(event.state, event.resumed)
        elif isinstance(event, IterationDone):
            self.reporter.iteration_done(event.record, event.decision)
        elif isinstance(event, LoopFinished):
            self.reporter.loop_finished(event.result)


@dataclass
class BudgetHook:
    """--budget-usd, --max-tokens, --timeout: spent before an attempt starts, the loop stops
    (the runner ends it as a budget stop)."""

    exhausted: Callable[[Spend], str | None]

    def __call__(self, event: Event) -> None:
        if isinstance(event, AttemptStarting):
            reason = self.exhausted(event.spend)
            if reason:
                raise BudgetExceeded(reason)
