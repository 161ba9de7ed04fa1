"""The loop's lifecycle (loop/lifecycle.py): the runner emits typed events, and the books (the
state file, the records, the reporter, the budgets) are kept by hooks, in process over fakes."""

from __future__ import annotations

from pathlib import Path

from ralph.errors import BudgetExceeded
from ralph.loop.lifecycle import AttemptStarting, Event, StateChanged
from ralph.memory.store import MemoryStore
from ralph.testing import Loop, Step, make_loop, write

LOOP = "ralph-fake-1"


class Recorder:
    """A hook that keeps what it heard: (event type, the state's status when it matters)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.events: list[tuple[str, str | None]] = []
        self.saved_records: list[int] = []  # records on disk when each state change came

    def __call__(self, event: Event) -> None:
        status = event.state.status if isinstance(event, StateChanged) else None
        self.events.append((type(event).__name__, status))
        if isinstance(event, StateChanged):
            store = MemoryStore(self.root)
            self.saved_records.append(len(store.record_paths(LOOP)))


def recorded(loop: Loop) -> Recorder:
    recorder = Recorder(loop.root)
    loop.runner.hooks.append(recorder)
    return recorder


def test_a_loop_emits_its_events_in_order_and_every_status_change_is_saved(
    tmp_path: Path,
) -> None:
    loop = make_loop(tmp_path, {1: write("partial"), 2: write("full")})
    recorder = recorded(loop)
    result = loop.start()
    assert result.stop_reason == "success"
    names = [name for name, _ in recorder.events]
    assert names == [
        "StateChanged",  # claimed: running, before the baseline's checks
        "StateChanged",  # running, in `_run`
        "LoopStarted",
        "AttemptStarting",
        "IterationRemembered",
        "StateChanged",
        "IterationDone",
        "AttemptStarting",
        "IterationRemembered",
        "StateChanged",
        "IterationDone",
        "StateChanged",
        "LoopFinished",
    ]
    assert recorder.events[-2] == ("StateChanged", "completed")
    # the state that counts an attempt is saved after the attempt's record is on disk
    assert recorder.saved_records == [0, 0, 1, 2, 2]
    assert loop.state().status == "completed"


def test_an_abort_is_a_status_change_the_state_writer_saves(tmp_path: Path) -> None:
    def request_abort(workdir: Path) -> None:
        MemoryStore(workdir).abort_path(LOOP).write_text("requested by `ralph abort`\n")

    abort = Step(before=request_abort, raises=KeyboardInterrupt())
    loop = make_loop(tmp_path, {1: write("partial"), 2: abort})
    recorder = recorded(loop)
    result = loop.start()
    assert result.status == "aborted"
    assert recorder.events[-2:] == [("StateChanged", "aborted"), ("LoopFinished", None)]
    assert loop.state().status == "aborted"


def test_a_hook_can_stop_the_loop_before_an_attempt_as_a_budget_stop(tmp_path: Path) -> None:
    """The budgets are a hook on AttemptStarting: one raising BudgetExceeded stops the loop."""
    loop = make_loop(tmp_path, {1: write("partial"), 2: write("full")})

    def one_attempt(event: Event) -> None:
        if isinstance(event, AttemptStarting) and event.state.iteration >= 1:
            raise BudgetExceeded("one attempt is all this test pays for")

    loop.runner.hooks.append(one_attempt)
    result = loop.start()
    assert (result.stop_reason, result.iterations, result.exit_code) == ("budget", 1, 3)
    assert loop.state().stop_reason == "budget"
    assert loop.reporter.result is result


def test_the_reporter_hears_the_loop_through_its_hook(tmp_path: Path) -> None:
    loop = make_loop(tmp_path, {1: write("full")})
    loop.start()
    assert loop.reporter.started == [False]
    assert [r.iteration for r in loop.reporter.records] == [1]
    assert loop.reporter.result is not None and loop.reporter.result.stop_reason == "success"
