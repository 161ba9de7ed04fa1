"""`ralph.testing`: the public fakes a plugin author tests against, and the evaluator seam as
one call (a request in, an Evaluation out)."""

from __future__ import annotations

from pathlib import Path

from ralph.evaluators.base import Evaluation, EvaluationRequest
from ralph.testing import FakeTests, MockEvaluator, fake_evaluator, make_loop, write


def test_the_loop_asks_the_evaluator_one_call_the_baseline_then_each_attempt(
    tmp_path: Path,
) -> None:
    checks = FakeTests()
    suite = fake_evaluator(checks)
    mock = MockEvaluator(suite.handle)
    loop = make_loop(tmp_path, {1: write("partial"), 2: write("full")}, evaluator=mock)
    result = loop.start()
    assert result.stop_reason == "success"
    first, *attempts = mock.requests
    assert first.establish is not None and first.establish.success == "baseline"
    assert first.baseline is None and first.cwd == tmp_path
    assert len(attempts) == 2 and checks.runs == 3
    assert all(r.baseline is not None and r.establish is None for r in attempts)
    assert attempts[0].baseline is attempts[1].baseline  # the one the first answer set


def test_an_evaluation_carries_each_checks_log_into_the_attempts_folder(tmp_path: Path) -> None:
    """The log travels on the outcome (its own, else its output), not on the evaluator."""

    def with_logs(request: EvaluationRequest) -> Evaluation:
        evaluation = fake_evaluator().handle(request)
        for outcome in evaluation.outcomes:
            outcome.log = f"$ fake-tests\nthe whole log of {outcome.spec.name}\n"
        return evaluation

    loop = make_loop(tmp_path, {1: write("full")}, evaluator=MockEvaluator(with_logs))
    loop.start()
    log = loop.store.artifacts_dir("ralph-fake-1", 1) / "check-tests.log"
    assert log.read_text() == "$ fake-tests\nthe whole log of tests\n"
