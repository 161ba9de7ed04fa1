"""The commit message `ralph apply` prepares (loop/apply_message.py), from a loop's records."""

from __future__ import annotations

from ralph.loop.apply_message import apply_message
from ralph.memory.state import LoopState
from ralph.records import Action, CheckResult

from .fakes.records import record


def test_the_subject_is_the_tasks_first_line_and_each_kept_iteration_says_what_it_did() -> None:
    state = LoopState(loop_id="ralph-fix-1", task="Fix the parser\n\nIt drops the year.")
    first, second = record(1, loop_id=state.loop_id), record(2, loop_id=state.loop_id)
    for n, r in enumerate((first, second)):
        assert r.ralph is not None
        r.ralph.git_commit = str(n) * 40  # each changed the code: a commit of its own
    first.actor_output.rationale = "Parsed the year with %Y.\nThen ran the tests."
    second.actor_output.rationale = "The actor exited 0 after 780 ms without a summary of its own."
    second.actor_output.actions = [Action("code_modification", "edit", "dates/parser.py")]
    second.evaluator_output.results = [CheckResult("pytest", "pass"), CheckResult("ruff", "pass")]
    baseline = {
        "checks": [{"name": "pytest", "status": "fail"}, {"name": "ruff", "status": "pass"}]
    }
    message = apply_message(state, [first, second], 2, baseline)
    subject, body = message.split("\n\n", 1)
    assert subject == "Fix the parser"
    assert "Fix the parser It drops the year." in body
    assert "Loop: ralph-fix-1, iteration 2, reward 0.50" in body
    assert "Checks now green: pytest\n" in body  # ruff passed before the loop too
    assert "- iteration 1: Parsed the year with %Y.\n- iteration 2: changed dates/parser.py" in body
    assert "without a summary" not in message


def test_an_iteration_line_quotes_a_headed_summary_by_its_bullets() -> None:
    state = LoopState(loop_id="ralph-fix-1", task="Fix the parser")
    first = record(1, loop_id=state.loop_id)
    assert first.ralph is not None
    first.ralph.git_commit = "1" * 40
    first.actor_output.rationale = "Summary of this attempt:\n- read %Y\n- kept %y"
    message = apply_message(state, [first], 1, None)
    assert "- iteration 1: read %Y; kept %y" in message
    assert "Summary of this attempt" not in message
