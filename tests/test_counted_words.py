"""A verb or pronoun after a count agrees with it (trial 3: "1 loop pruned; their records",
"mypy: 1 error that were already there", "feedback: accepted by implicitly (apply)", and
`best reward - ` with a trailing space)."""

from __future__ import annotations

import io
from types import SimpleNamespace
from typing import Any

from ralph.records import Diagnostic


def guard(name: str, parser: str, preexisting: int) -> Any:
    verdict = SimpleNamespace(role="guard", judged=True, preexisting=preexisting)
    return SimpleNamespace(spec=SimpleNamespace(name=name, parser=parser), verdict=verdict)


def test_a_guard_s_old_errors_are_counted_with_a_verb_that_agrees() -> None:
    from ralph.loop.prompts import preexisting_lines

    evaluation: Any = SimpleNamespace(
        outcomes=[guard("mypy", "mypy", 1), guard("ruff", "ruff", 161), guard("t", "pytest", 1)]
    )
    assert preexisting_lines(evaluation) == [
        "mypy: 1 error that was already there before the loop; not your task",
        "ruff: 161 errors that were already there before the loop; not your task",
        "t: 1 failing test that was already there before the loop; not your task",
    ]


def test_implicit_feedback_reads_accepted_implicitly_and_a_person_s_by_a_person() -> None:
    from ralph.memory.feedback import describe

    implicit = {"verdict": "accepted", "source": "apply", "timestamp": "T"}
    assert describe(implicit) == "feedback: accepted implicitly (apply) at T"
    explicit = {"verdict": "rejected", "source": "explicit", "timestamp": "T", "note": "no"}
    assert describe(explicit) == "feedback: rejected by a person at T: no"


def test_a_loop_without_rewards_ends_its_line_without_a_trailing_space() -> None:
    from ralph.cli.live import PlainReporter
    from ralph.loop.result import LoopResult

    out = io.StringIO()
    reporter = PlainReporter(out)
    reporter.next_steps = False
    green = LoopResult("ralph-1", "completed", "already_green", 0, 0, None, None, [], {}, "r")
    reporter.loop_finished(green)
    first = out.getvalue().splitlines()[0]
    assert first.endswith("0 iterations, best reward -"), repr(first)


def test_the_heuristic_says_one_check_reports_and_two_report() -> None:
    from ralph.reflection.heuristic import _causal

    error = Diagnostic("test_failure", "assert 1 == 2", file="t.py", line=3)
    one: Any = [SimpleNamespace(spec=SimpleNamespace(name="pytest"))]
    two: Any = [*one, SimpleNamespace(spec=SimpleNamespace(name="mypy"))]
    assert _causal(one, [error, error]).startswith("pytest reports 2 errors;")
    assert " report 2 errors;" in _causal(two, [error, error])
    assert "so its output holds the cause" in _causal(one, [])
    assert "so their output holds the cause" in _causal(two, [])
