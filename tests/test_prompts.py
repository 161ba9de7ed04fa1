"""Prompt rendering: overrides, safe names, plain-text output, and the actor prompt's contract."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ralph import templates
from ralph.config import CheckSpec
from ralph.errors import ConfigError
from ralph.evaluators.base import CheckOutcome, Evaluation
from ralph.loop import prompts
from ralph.loop import window as memory
from ralph.records import (
    Action,
    ActorOutput,
    Changes,
    CheckResult,
    CheckStatus,
    CreditAssignment,
    Diagnostic,
    EvaluatorOutput,
    IterationRecord,
    MemoryMetadata,
    Metrics,
    RalphExtension,
    SelfReflection,
)
from ralph.reflection import context as reflection_context
from ralph.reflection.parsing import reflection_repair_context


def check(name: str, errors: list[Diagnostic], *, metrics: Metrics | None = None) -> CheckOutcome:
    status: CheckStatus = "fail" if errors else "pass"
    return CheckOutcome(
        spec=CheckSpec(name, name, name),
        result=CheckResult(name, status, 1 if errors else 0),
        errors=errors,
        metrics=metrics or Metrics(),
    )


def evaluation(*outcomes: CheckOutcome, fingerprint: str = "fp-1") -> Evaluation:
    errors = [d for o in outcomes for d in o.errors]
    output = EvaluatorOutput(
        passed=not errors, verification_type="combined", errors=errors, reward_signal=0.4
    )
    return Evaluation(output=output, outcomes=list(outcomes), fingerprint=fingerprint)


def record(
    iteration: int,
    text: str,
    *,
    insights: list[str] | None = None,
    lessons: list[str] | None = None,
    root: str | None = None,
    reward: float = 0.5,
) -> IterationRecord:
    return IterationRecord(
        loop_id="ralph-test-loop",
        iteration=iteration,
        timestamp="2026-01-01T00:00:00Z",
        actor_output=ActorOutput(actions=[], rationale="tried"),
        evaluator_output=EvaluatorOutput(
            passed=False, verification_type="unit_tests", reward_signal=reward
        ),
        self_reflection=SelfReflection(
            reflection_text=text,
            credit_assignment=CreditAssignment(root_cause=root, failure_category="logic_error")
            if root
            else None,
            actionable_insights=insights,
            lessons_learned=lessons,
        ),
        memory_metadata=MemoryMetadata(omega_capacity=3, current_memory_size=0),
        ralph=RalphExtension(reflection_source="llm", error_fingerprint="fp-1"),
    )


def actor_context(**overrides: Any) -> dict[str, Any]:
    args: dict[str, Any] = {
        "task": "fix the date parser",
        "iteration": 2,
        "max_iterations": 5,
        "evaluation": None,
        "reflections": [],
        "lessons": [],
        "pivot": False,
        "unmatched_edits": [],
    }
    args.update(overrides)
    return prompts.actor_prompt_context(**args)


def write_override(root: Path, name: str, text: str) -> None:
    folder = root / ".aiwg" / "ralph" / "prompts"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.mustache").write_text(text, "utf-8")


# --- rendering ---------------------------------------------------------------------------------


def test_packaged_actor_template_states_the_task_and_who_decides_done() -> None:
    text = templates.render("actor", actor_context(), project_root=None)
    assert "fix the date parser" in text
    assert "The project's checks decide when you are done" in text
    assert "do not claim success, make the checks pass" in text
    assert ".aiwg/" in text


def test_override_in_project_replaces_the_packaged_template(tmp_path: Path) -> None:
    write_override(tmp_path, "actor", "CUSTOM {{task}} #{{iteration}}")
    assert templates.render("actor", actor_context(), project_root=tmp_path) == (
        "CUSTOM fix the date parser #2"
    )
    # other templates still come from the package
    assert "JSON" in templates.render("repair", {"errors": ["x"]}, project_root=tmp_path)


def test_an_override_edited_during_a_loop_is_used_for_the_next_prompt(tmp_path: Path) -> None:
    """Templates are parsed once, per text: an edit between two prompts shows."""
    write_override(tmp_path, "actor", "FIRST {{task}}")
    assert templates.render("actor", actor_context(), project_root=tmp_path).startswith("FIRST")
    write_override(tmp_path, "actor", "SECOND {{task}}")
    assert templates.render("actor", actor_context(), project_root=tmp_path).startswith("SECOND")


def test_without_an_override_the_packaged_template_is_used(tmp_path: Path) -> None:
    with_root = templates.render("actor", actor_context(), project_root=tmp_path)
    assert with_root == templates.render("actor", actor_context(), project_root=None)


@pytest.mark.parametrize(
    "name", ["../actor", "..", "actor/../repair", "/etc/passwd", "Actor", "", "a.b", "actor "]
)
def test_template_names_that_could_escape_are_refused(name: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        templates.render(name, {}, project_root=tmp_path)
    assert "template name" in info.value.message


def test_unknown_template_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="no prompt template"):
        templates.render("nonexistent", {}, project_root=None)


def test_rendering_is_plain_text_and_missing_keys_are_empty(tmp_path: Path) -> None:
    write_override(tmp_path, "plain", "[{{task}}] [{{missing}}] [{{#nope}}x{{/nope}}]")
    text = templates.render("plain", {"task": "a < b && \"c\" > 'd'"}, project_root=tmp_path)
    assert text == "[a < b && \"c\" > 'd'] [] []"


def test_mustache_tags_inside_values_are_not_expanded(tmp_path: Path) -> None:
    write_override(tmp_path, "plain", "{{task}}")
    assert templates.render("plain", {"task": "use {{x}} here"}, project_root=tmp_path) == (
        "use {{x}} here"
    )


def test_a_broken_override_is_a_config_error_naming_the_file(tmp_path: Path) -> None:
    write_override(tmp_path, "actor", "{{#failing}} closed wrongly {{/pivot}}")
    with pytest.raises(ConfigError) as info:
        templates.render("actor", actor_context(), project_root=tmp_path)
    assert "actor.mustache" in info.value.message


# --- the actor prompt's context ----------------------------------------------------------------


def test_failing_checks_list_top_diagnostics_with_locations_first() -> None:
    unlocated = Diagnostic("test_failure", "collection crashed")
    located = [
        Diagnostic("test_failure", f"assert {i} == 0", file="tests/t.py", line=i, rule=f"t{i}")
        for i in range(1, 11)
    ]
    ev = evaluation(
        check("tests", [unlocated, *located], metrics=Metrics(tests_failed=11, tests_total=20)),
        check("ruff", []),
    )
    context = actor_context(evaluation=ev)
    assert context["has_failing"] is True
    (failing,) = context["failing"]
    assert failing["name"] == "tests"
    assert failing["summary"] == "11 of 20 tests failed"
    assert len(failing["diagnostics"]) == prompts.DIAGNOSTICS_PER_CHECK
    assert failing["diagnostics"][0] == {
        "note": "",
        "location": "tests/t.py:1",
        "message": "assert 1 == 0",
        "rule": "t1",
        "type": "test_failure",
    }
    assert all(d["location"] for d in failing["diagnostics"])
    assert failing["more"] == "... and 3 more"
    text = templates.render("actor", context)
    assert "- tests/t.py:1: assert 1 == 0 [t1]" in text
    assert "ruff" not in text.split("# How to work")[0]


def test_a_check_that_could_not_run_says_why_not_one_error_in_the_prompt_and_the_stop_hook() -> (
    None
):
    from ralph.loop.stop_hook import block_reason

    crash = Diagnostic("runtime_error", "mypy: can't read file 'src': No such file\n(exit code 2)")
    broken = CheckOutcome(
        spec=CheckSpec("mypy", "mypy src", "mypy"),
        result=CheckResult("mypy", "error", 2),
        errors=[crash],
    )
    silent = CheckOutcome(
        spec=CheckSpec("lint", "./lint.sh", "command"),
        result=CheckResult("lint", "error", 127),
    )
    ev = evaluation(broken, silent)

    summaries = [f["summary"] for f in actor_context(evaluation=ev)["failing"]]

    said = "could not run: mypy: can't read file 'src': No such file"
    assert summaries == [said, "could not run: exit code 127"]
    assert f"mypy ({said}), lint (could not run: exit code 127)" in block_reason(ev, 1, 3)


def typed_failures(*tests: str) -> list[Diagnostic]:
    """Failing tests as pytest reports them: `path::Class::name`, located at the test."""
    return [
        Diagnostic("test_failure", "AssertionError", file=t.split("::")[0], line=9, rule=t)
        for t in tests
    ]


CACHED = [f"tests/test_cached.py::{c}Test::test_decorator_typed" for c in ("Dict", "Wrapper")]
FUNC = [f"tests/test_func.py::{c}DecoratorTest::test_decorator_typed" for c in "ABCDEF"]


def test_a_cut_failure_list_shows_the_tests_about_the_task_first() -> None:
    keys = "tests/test_keys.py::test_typedkey"
    ev = evaluation(check("pytest", typed_failures(*CACHED, *FUNC, keys)))
    task = "fix the failing typedkey tests in src/cachetools/keys.py"
    (failing,) = actor_context(task=task, evaluation=ev)["failing"]
    rules = [d["rule"] for d in failing["diagnostics"]]
    assert rules[0] == keys and rules[1:] == [*CACHED, *FUNC][:7]  # the rest as they were
    assert failing["more"] == "... and 1 more"
    # a list that is not cut keeps its order; a task sharing no word keeps it too
    (whole,) = actor_context(
        task=task, evaluation=evaluation(check("pytest", typed_failures(*FUNC, keys)))
    )["failing"]
    assert [d["rule"] for d in whole["diagnostics"]] == [*FUNC, keys]
    (plain,) = actor_context(task="make the tests pass", evaluation=ev)["failing"]
    assert [d["rule"] for d in plain["diagnostics"]] == [*CACHED, *FUNC][:8]


def test_a_cut_failure_list_prefers_the_tests_of_the_failing_module() -> None:
    raised = Diagnostic("test_failure", "TypeError", file="src/pkg/parser.py", line=3, rule=None)
    about = "tests/test_parser.py::test_dates"
    failures = typed_failures(*CACHED, *FUNC, about)
    ev = evaluation(check("pytest", failures), check("mypy", [raised]))
    (tests, _) = actor_context(task="make it work", evaluation=ev)["failing"]
    assert tests["diagnostics"][0]["rule"] == about


def test_no_failing_section_without_an_evaluation() -> None:
    context = actor_context()
    assert context["has_failing"] is False and context["failing"] == []
    assert "Checks that fail right now" not in templates.render("actor", context)


def test_second_prompt_contains_first_reflection_text_and_insights_verbatim() -> None:
    text = (
        "I assumed <slash> dates are day-first & wrote {{strptime}} with '%d/%m/%Y'.\n"
        "tests/test_parser.py:27 expects month-first."
    )
    insights = ["Use '%m/%d/%Y' at dates/parser.py:14", "Split on '-' for `2024-3-4`"]
    lessons = ["Read the failing assertion before choosing a format"]
    first = record(1, text, insights=insights, lessons=lessons, root="guessed the order")
    window = memory.select_window([first], omega=1, policy="recency", token_budget=2000)
    prompt = templates.render("actor", actor_context(iteration=2, reflections=window))
    assert "Reflections from your earlier attempts (most recent last)" in prompt
    assert text in prompt
    for line in [*insights, *lessons, "guessed the order"]:
        assert line in prompt
    assert "Attempt 1 (reward 0.50)" in prompt


def test_reflections_are_rendered_oldest_first_with_two_decimal_rewards() -> None:
    window = [record(3, "I third.", reward=0.123), record(1, "I first.", reward=1 / 3)]
    context = actor_context(reflections=window)
    assert [r["iteration"] for r in context["reflections"]] == [1, 3]
    assert [r["reward"] for r in context["reflections"]] == ["0.33", "0.12"]
    prompt = templates.render("actor", context)
    assert prompt.index("I first.") < prompt.index("I third.")


def test_empty_optional_fields_do_not_render_as_none() -> None:
    prompt = templates.render("actor", actor_context(reflections=[record(1, "I only wrote text.")]))
    assert "I only wrote text." in prompt
    assert "None" not in prompt
    assert "Root cause" not in prompt and "What to do differently" not in prompt


def test_pivot_instruction_appears_only_when_pivoting() -> None:
    calm = templates.render("actor", actor_context(pivot=False))
    pivot = templates.render("actor", actor_context(pivot=True))
    assert "Change your strategy" not in calm and "abandon it" not in calm
    assert "Change your strategy" in pivot
    assert "exactly the same errors" in pivot and "different strategy" in pivot


def test_lessons_from_other_loops_and_unmatched_edits_are_shown() -> None:
    edit = "src/app.py\n<<<<<<< SEARCH\nold()\n=======\nnew()\n>>>>>>> REPLACE"
    context = actor_context(
        lessons=[{"text": "Run mypy before pytest", "source": "ralph-other-1234abcd#2"}],
        unmatched_edits=[edit],
    )
    assert context["has_lessons"] is True and context["has_unmatched_edits"] is True
    prompt = templates.render("actor", context)
    assert "- Run mypy before pytest (from ralph-other-1234abcd#2)" in prompt
    assert edit in prompt
    assert "were NOT applied" in prompt
    plain = templates.render("actor", actor_context())
    assert "NOT applied" not in plain and "earlier loops" not in plain


def test_cap_keeps_head_and_tail() -> None:
    text = "A" * 500 + "B" * 500
    capped = templates.cap(text, 300)
    assert capped.startswith("A" * 200) and capped.endswith("B" * 100)
    assert "700 characters elided" in capped
    assert templates.cap("short", 300) == "short"


def test_reflection_and_repair_templates_render_their_context() -> None:
    diag = Diagnostic("type_error", "Incompatible return value", file="a/b.py", line=3, rule="x")
    ev = evaluation(check("mypy", [diag]))
    earlier = [record(1, "I broke a/b.py earlier.", insights=["Return int from f"])]
    context = reflection_context.reflection_prompt_context(
        task="make mypy pass",
        iteration=2,
        actor_output=ActorOutput(actions=[], rationale="I edited f"),
        evaluation=ev,
        earlier=earlier,
        diff_summary="--- a/b.py\n+++ b/b.py",
    )
    text = templates.render("reflection", context)
    assert "make mypy pass" in text
    assert "type_error at a/b.py:3 [x]: Incompatible return value" in text
    assert "I broke a/b.py earlier." in text and "Return int from f" in text
    assert "No files were changed." in text
    assert "edge_case_miss" in text and '"reflection_text"' in text
    repair = templates.render("repair", reflection_repair_context("{oops", ["$: bad thing"]))
    assert "{oops" in repair and "- $: bad thing" in repair
    assert "reflection_text" in repair


def test_the_reverted_diff_is_bounded_and_keeps_both_ends() -> None:
    """Files of 4,000 characters each (a record's per-file cap) would fill a prompt: the
    reverted attempt's diff keeps its head and tail within `REVERTED_DIFF_TOKENS`."""
    reverted = record(1, "I broke it.")
    reverted.actor_output.actions = [
        Action(
            "edit_file", f"edit m{i}.py", f"m{i}.py", Changes(1, 1, f"--- a/m{i}.py\n" + "x" * 4000)
        )
        for i in range(10)
    ]
    view = prompts.reverted_view(1, "the starting point", None, reverted)
    limit = prompts.REVERTED_DIFF_TOKENS * prompts.CHARS_PER_TOKEN
    assert view["has_diff"] and len(view["diff"]) <= limit + 60
    assert view["diff"].startswith("--- a/m0.py") and "characters elided" in view["diff"]
    assert "--- a/m9.py" not in view["diff"] and view["diff"].endswith("x")
