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


def _fakes_imported_from_tests(source: str, path: Path) -> list[str]:
    """Imports of the loop's fakes from tests/fakes/ rather than from `ralph.testing`."""
    import ast

    found = []
    tests = Path(__file__).resolve().parent
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            base = path.parent
            for _ in range(max(node.level - 1, 0)):
                base = base.parent
            dotted = node.module or ""
            if node.level:
                under = base.relative_to(tests.parent).as_posix().replace("/", ".")
                dotted = f"{under}.{dotted}" if dotted else under
            names = [f"{dotted}.{alias.name}" for alias in node.names] + [dotted]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        if any(name.startswith("tests.fakes.loop") for name in names):
            found.append(f"{path.name}:{node.lineno}")
    return found


def test_tests_import_the_fakes_from_ralph_testing() -> None:
    """The public fakes have one home; tests/fakes/ keeps only what is no public fake (agent
    scripts, the provider server, records made without a loop)."""
    import ralph.testing

    tests = Path(__file__).resolve().parent
    found = [
        place
        for path in sorted(tests.rglob("*.py"))
        for place in _fakes_imported_from_tests(path.read_text("utf-8"), path)
    ]
    assert found == []
    assert not (tests / "fakes" / "loop.py").exists()
    defined = {
        line.split()[1].split("(")[0].rstrip(":")
        for path in (tests / "fakes").glob("*.py")
        for line in path.read_text("utf-8").splitlines()
        if line.startswith(("def ", "class "))
    }
    assert defined and not defined & set(ralph.testing.__all__)
    here = tests / "test_x.py"
    deeper = tests / "reliability" / "test_y.py"
    assert _fakes_imported_from_tests("from .fakes.loop import make_loop", here) == ["test_x.py:1"]
    assert _fakes_imported_from_tests("from ..fakes import loop", deeper) == ["test_y.py:1"]
    assert _fakes_imported_from_tests("import tests.fakes.loop", here) == ["test_x.py:1"]
    assert _fakes_imported_from_tests("from .fakes.records import record", here) == []
