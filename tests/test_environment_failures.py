"""Tests that cannot even be imported at the baseline are the environment's failure, not the
agent's: the baseline says so, the record's category is configuration_error (over a model's
word), and such a reflection is never a lesson for another loop."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ralph.evaluators.base import CheckOutcome, OutputCallback
from ralph.memory.retrieval import retrieve_lessons
from ralph.memory.store import MemoryStore
from ralph.records import CheckResult, Diagnostic, Metrics
from ralph.testing import VERSIONS, FakeChat, FakeCheck, Step, fake_evaluator, make_loop, write

GENERATED = "pkg/_version.py"  # written at install time, ignored by git
MISSING = "ModuleNotFoundError: No module named 'pkg._version'"


def import_failure() -> Diagnostic:
    """What the pytest check reports for a test module whose import fails (no test id)."""
    return Diagnostic("runtime_error", MISSING, "pkg/__init__.py", 1, severity="error")


class ImportingTests(FakeCheck):
    """A pytest-like check: the tests import the package, which needs `pkg/_version.py`; with
    it, calc.py decides (full passes)."""

    def run(
        self,
        cwd: Path,
        *,
        baseline_errors: int | None = None,
        on_output: OutputCallback | None = None,
    ) -> CheckOutcome:
        if not (cwd / GENERATED).exists():
            errors = [import_failure()]
            ran = 0
        elif (cwd / "calc.py").read_text() == VERSIONS["full"]:
            errors, ran = [], 1
        else:
            errors = [
                Diagnostic(
                    "test_failure",
                    "assert f(-1) == 1",
                    "tests/test_calc.py",
                    4,
                    rule="tests/test_calc.py::test_negative",
                    severity="error",
                )
            ]
            ran = 1
        status = "fail" if errors else "pass"
        return CheckOutcome(
            spec=self.spec,
            result=CheckResult("tests", status, 1 if errors else 0, duration_ms=1),
            errors=errors,
            metrics=Metrics(ran - len(errors) if ran else 0, len(errors), ran),
            score=0.0 if errors else 1.0,
            passed_tests=set() if errors else {"tests/test_calc.py::test_negative"},
        )


def records(root: Path, loop_id: str) -> list[dict[str, Any]]:
    store = MemoryStore(root)
    return [json.loads(path.read_text()) for _, path in store.record_paths(loop_id)]


def category(record: dict[str, Any]) -> str | None:
    credit = record["self_reflection"].get("credit_assignment") or {}
    return credit.get("failure_category")


def env_loop(root: Path, **settings: Any) -> Any:
    return make_loop(
        root,
        {"default": write("partial")},
        evaluator=fake_evaluator(ImportingTests()),
        **{"max_iterations": 2, "patience": 5, **settings},
    )


def test_the_baseline_says_tests_that_cannot_be_imported_are_the_environment(
    tmp_path: Path,
) -> None:
    loop = env_loop(tmp_path)
    loop.start()
    assert loop.reporter.noted("cannot even be imported before the loop")
    assert loop.reporter.noted("environment problem")
    assert loop.reporter.noted(MISSING)


def test_an_import_failure_present_at_the_baseline_is_a_configuration_error(
    tmp_path: Path,
) -> None:
    loop = env_loop(tmp_path)
    loop.start()
    found = records(tmp_path, "ralph-fake-1")
    assert [category(r) for r in found] == ["configuration_error", "configuration_error"]
    insights = found[0]["self_reflection"]["actionable_insights"]
    assert any("environment" in text for text in insights)
    assert not any("first:" in text for text in insights)  # not "fix pkg/__init__.py:1 first"


def test_a_model_category_yields_to_the_environment_failure(tmp_path: Path) -> None:
    answer = {
        "reflection_text": "I must rewrite the import in pkg/__init__.py.",
        "credit_assignment": {"root_cause": "bad import", "failure_category": "logic_error"},
        "lessons_learned": ["Rewrite imports of pkg._version"],
        "confidence": 0.9,
    }
    loop = env_loop(tmp_path, chat=FakeChat(default=json.dumps(answer)), max_iterations=1)
    loop.start()
    (found,) = records(tmp_path, "ralph-fake-1")
    assert found["ralph"]["reflection_source"] == "llm"
    assert category(found) == "configuration_error"


def test_an_import_error_the_agent_made_is_its_own_failure(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / GENERATED).write_text("VERSION = '1'\n")
    delete = Step(version="partial", before=lambda workdir: (workdir / GENERATED).unlink())
    loop = make_loop(
        tmp_path,
        {1: delete},
        evaluator=fake_evaluator(ImportingTests()),
        max_iterations=1,
    )
    loop.start()
    (found,) = records(tmp_path, "ralph-fake-1")
    assert found["evaluator_output"]["errors"][0]["message"] == MISSING
    assert category(found) != "configuration_error"


def test_an_environment_reflection_is_never_a_lesson_for_another_loop(tmp_path: Path) -> None:
    env_loop(tmp_path).start("ralph-first-00000001")
    second = env_loop(tmp_path, max_iterations=1)
    second.start("ralph-second-00000002")
    store = MemoryStore(tmp_path)

    def offered() -> list[str]:
        lessons = retrieve_lessons(
            store, exclude_loop="ralph-second-00000002", current_errors=[import_failure()]
        )
        return [lesson.source for lesson in lessons]

    assert offered() == []
    assert "ralph-first" not in second.actor.prompts[1]
    # the same reflection with any other category would be offered: the category keeps it out
    for _, path in store.record_paths("ralph-first-00000001"):
        data = json.loads(path.read_text())
        data["self_reflection"]["credit_assignment"]["failure_category"] = "logic_error"
        path.write_text(json.dumps(data))
    assert offered() and all(source.startswith("ralph-first") for source in offered())
