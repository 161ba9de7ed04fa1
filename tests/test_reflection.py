"""The Reflector: lenient parsing, one repair, heuristic fallback, quality flags, redaction."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from ralph import schemas
from ralph.config import CheckSpec
from ralph.errors import ProviderError
from ralph.evaluators.base import CheckOutcome, Evaluation
from ralph.evaluators.verdicts import CheckVerdict
from ralph.providers import answers
from ralph.providers.base import ChatResponse, Message
from ralph.records import (
    Action,
    ActorOutput,
    CheckResult,
    CreditAssignment,
    Diagnostic,
    EvaluatorOutput,
    IterationRecord,
    MemoryMetadata,
    Metrics,
    RalphExtension,
    SelfReflection,
    gist,
    to_json,
)
from ralph.reflection import parsing
from ralph.reflection.base import ReflectionOutcome
from ralph.reflection.heuristic import heuristic_reflection, success_reflection
from ralph.reflection.parsing import parse_reflection
from ralph.reflection.quality import gated, quality_flags, says_something
from ralph.reflection.reflector import ModelReflector

GOOD = {
    "reflection_text": (
        "I changed parse_date in dates/parser.py but kept the day-first format, so "
        "tests/test_parser.py:27 still compares 2024-03-04 with 2024-04-03."
    ),
    "credit_assignment": {
        "failing_action_indices": [0],
        "root_cause": "day-first format string",
        "failure_category": "incorrect_assumption",
    },
    "causal_reasoning": "The format string decides field order.",
    "actionable_insights": ["Use '%m/%d/%Y' in dates/parser.py:14"],
    "lessons_learned": ["Read the assertion first"],
    "confidence": 0.8,
    "related_reflections": [],
}


class ScriptedChat:
    """A ChatClient that answers from a script and records every request."""

    model = "fake-model"

    def __init__(self, *answers: str, tokens: int | None = 10, cost: float | None = 0.01) -> None:
        self.answers = list(answers)
        self.requests: list[list[Message]] = []
        self.json_modes: list[bool] = []
        self.tokens = tokens
        self.cost = cost

    def chat(
        self, messages: list[Message], *, json_mode: bool = False, max_tokens: int | None = None
    ) -> ChatResponse:
        self.requests.append(list(messages))
        self.json_modes.append(json_mode)
        return ChatResponse(self.answers.pop(0), self.model, self.tokens, self.tokens, self.cost)


class FailingChat:
    model = "down"

    def __init__(self, exc: Exception) -> None:
        self.exc = exc
        self.calls = 0

    def chat(
        self, messages: list[Message], *, json_mode: bool = False, max_tokens: int | None = None
    ) -> ChatResponse:
        self.calls += 1
        raise self.exc


def diag(message: str, file: str | None = None, line: int | None = None, **kw: Any) -> Diagnostic:
    kind = kw.pop("type", "test_failure")
    return Diagnostic(kind, message, file=file, line=line, **kw)


def evaluation(
    checks: dict[str, list[Diagnostic]], *, fingerprint: str = "fp-1", passed: bool = False
) -> Evaluation:
    outcomes = [
        CheckOutcome(
            spec=CheckSpec(name, name, name),
            result=CheckResult(name, "pass" if passed else "fail", 0 if passed else 1),
            errors=errs,
            metrics=Metrics(),
        )
        for name, errs in checks.items()
    ]
    errors = [d for errs in checks.values() for d in errs]
    output = EvaluatorOutput(
        passed=passed,
        verification_type="combined",
        errors=errors,
        reward_signal=1.0 if passed else 0.4,
    )
    return Evaluation(output=output, outcomes=outcomes, fingerprint=fingerprint)


PARSER_FAIL = evaluation(
    {
        "tests": [
            diag(
                "AssertionError: assert date(2024, 3, 4) == date(2024, 4, 3)",
                "tests/test_parser.py",
                27,
                rule="tests/test_parser.py::test_us_format",
            )
        ],
        "ruff": [diag("F401 `os` imported but unused", "dates/parser.py", 1, type="lint_error")],
    }
)
EDITED = ActorOutput(
    actions=[Action("code_modification", "edited parse_date", file_path="dates/parser.py")],
    rationale="I switched the format",
    files_modified=["dates/parser.py"],
)


def earlier_record(iteration: int, fingerprint: str) -> IterationRecord:
    return IterationRecord(
        loop_id="ralph-test-loop",
        iteration=iteration,
        timestamp="2026-01-01T00:00:00Z",
        actor_output=ActorOutput(actions=[], rationale="x"),
        evaluator_output=EvaluatorOutput(passed=False, verification_type="combined"),
        self_reflection=SelfReflection(reflection_text=f"I failed in iteration {iteration}."),
        memory_metadata=MemoryMetadata(omega_capacity=3, current_memory_size=0),
        ralph=RalphExtension(error_fingerprint=fingerprint),
    )


def reflect(client: Any, **kw: Any) -> ReflectionOutcome:
    args: dict[str, Any] = {
        "task": "fix the date parser",
        "iteration": 2,
        "actor_output": EDITED,
        "evaluation": PARSER_FAIL,
        "earlier": [],
    }
    args.update(kw)
    project_root = args.pop("project_root", None)
    return ModelReflector(client, project_root=project_root).reflect(**args)


def is_valid_self_reflection(r: SelfReflection) -> bool:
    return parsing.validation_errors(to_json(r)) == []


# --- parsing -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        json.dumps(GOOD),
        "```json\n" + json.dumps(GOOD, indent=2) + "\n```",
        "Here is my reflection:\n```\n" + json.dumps(GOOD) + "\n```\nHope this helps!",
        "Sure! " + json.dumps(GOOD) + " -- that is all {not json}.",
        "{broken: yes} then " + json.dumps(GOOD),
    ],
)
def test_json_is_found_in_fenced_and_prose_wrapped_answers(answer: str) -> None:
    parsed, problems = parse_reflection(answer)
    assert problems == []
    assert parsed is not None and parsed.reflection_text == GOOD["reflection_text"]
    assert parsed.credit_assignment is not None
    assert parsed.credit_assignment.failure_category == "incorrect_assumption"


def test_braces_inside_strings_do_not_confuse_the_parser() -> None:
    data = dict(GOOD, reflection_text="I wrote `{` and `}}` in f'{x}' at a.py:3, which broke it")
    assert answers.extract_json_object("prefix " + json.dumps(data) + " suffix") == data


def test_no_json_object_is_reported() -> None:
    parsed, problems = parse_reflection("I think it failed because of the parser.")
    assert parsed is None and problems == ["the answer contains no JSON object"]
    assert answers.extract_json_object("[1, 2]") is None


@pytest.mark.parametrize(
    ("given", "expected"), [("0.8", 0.8), (80, 0.8), ("75%", 0.75), (1, 1.0), (0, 0.0)]
)
def test_obvious_confidence_forms_are_coerced(given: Any, expected: float) -> None:
    parsed, problems = parse_reflection(json.dumps(dict(GOOD, confidence=given)))
    assert problems == [] and parsed is not None
    assert parsed.confidence == pytest.approx(expected)


def test_coercion_fixes_categories_lists_and_drops_unknown_keys() -> None:
    data = {
        "self_reflection": {
            "reflection_text": "I missed the empty-list case in utils.py:9.",
            "root_cause": "no guard for []",
            "failure_category": "Edge Case Miss",
            "actionable_insights": "Guard for [] in utils.py:9",
            "related_reflections": ["1", 2],
            "causal_reasoning": None,
            "mood": "sad",
        }
    }
    parsed, problems = parse_reflection(json.dumps(data))
    assert problems == [] and parsed is not None
    assert parsed.credit_assignment == CreditAssignment(
        root_cause="no guard for []", failure_category="edge_case_miss"
    )
    assert parsed.actionable_insights == ["Guard for [] in utils.py:9"]
    assert parsed.related_reflections == [1, 2]
    assert parsed.causal_reasoning is None
    sentences = dict(GOOD, reflection_text=["I broke a.py:3.", "I will fix it."])
    parsed, _ = parse_reflection(json.dumps(sentences))
    assert parsed is not None and parsed.reflection_text == "I broke a.py:3. I will fix it."
    other = dict(GOOD, credit_assignment={"failure_category": "cosmic rays", "blame": "x"})
    parsed, _ = parse_reflection(json.dumps(other))
    assert parsed is not None and parsed.credit_assignment == CreditAssignment(
        failure_category="other"
    )


def test_missing_reflection_text_is_invalid_even_with_other_fields() -> None:
    data = {k: v for k, v in GOOD.items() if k != "reflection_text"}
    parsed, problems = parse_reflection(json.dumps(data))
    assert parsed is None
    assert any("reflection_text" in p and "required" in p for p in problems)


# --- the reflector's flow ----------------------------------------------------------------------


def test_valid_answer_is_used_as_is_in_json_mode() -> None:
    chat = ScriptedChat("```json\n" + json.dumps(GOOD) + "\n```")
    outcome = reflect(chat)
    assert outcome.source == "llm" and outcome.error is None
    assert outcome.reflection.reflection_text == GOOD["reflection_text"]
    assert chat.json_modes == [True]
    assert (outcome.tokens_in, outcome.tokens_out, outcome.cost_usd) == (10, 10, 0.01)
    prompt = chat.requests[0][-1].content
    assert "fix the date parser" in prompt and "tests/test_parser.py:27" in prompt
    assert outcome.quality_flags == []


def test_invalid_answer_is_repaired_once_with_the_validation_error() -> None:
    broken = {k: v for k, v in GOOD.items() if k != "reflection_text"}
    chat = ScriptedChat(json.dumps(broken), json.dumps(GOOD))
    outcome = reflect(chat)
    assert outcome.source == "repaired" and outcome.error is None
    assert outcome.reflection.reflection_text == GOOD["reflection_text"]
    assert len(chat.requests) == 2
    repair = chat.requests[1]
    assert repair[-1].role == "user"
    assert "'reflection_text' is a required property" in repair[-1].content
    assert repair[-2] == Message("assistant", json.dumps(broken))
    assert repair[:2] == chat.requests[0]  # the original context is kept
    assert (outcome.tokens_in, outcome.tokens_out) == (20, 20)
    assert outcome.cost_usd == pytest.approx(0.02)


def test_still_invalid_after_repair_falls_back_to_heuristic() -> None:
    chat = ScriptedChat("no json here", '{"confidence": 2}')
    outcome = reflect(chat)
    assert outcome.source == "heuristic"
    assert outcome.error is not None and "after one repair" in outcome.error
    assert "\n" not in outcome.error
    assert len(chat.requests) == 2
    assert is_valid_self_reflection(outcome.reflection)
    assert outcome.tokens_in == 20  # the wasted calls are still accounted for


def test_provider_error_falls_back_to_heuristic_without_raising() -> None:
    chat = FailingChat(ProviderError("HTTP 503 from fake after 3 retries", hint="later"))
    outcome = reflect(chat)
    assert outcome.source == "heuristic"
    assert outcome.error == "ProviderError: HTTP 503 from fake after 3 retries"
    assert chat.calls == 1
    assert outcome.tokens_in is None and outcome.cost_usd is None
    assert "tests/test_parser.py:27" in outcome.reflection.reflection_text


def test_any_client_exception_or_failing_repair_call_falls_back() -> None:
    assert reflect(FailingChat(RuntimeError("boom\ntrace"))).error == "RuntimeError: boom"

    class FailsSecond(ScriptedChat):
        def chat(self, messages: list[Message], **kw: Any) -> ChatResponse:
            if self.requests:
                raise ProviderError("timed out")
            return super().chat(messages, **kw)

    outcome = reflect(FailsSecond("not json"))
    assert outcome.source == "heuristic" and outcome.error == "ProviderError: timed out"
    assert outcome.tokens_in == 10  # the first call's usage is kept


def test_no_client_means_heuristic_without_error() -> None:
    outcome = reflect(None)
    assert outcome.source == "heuristic" and outcome.error is None
    assert outcome.tokens_in is None and outcome.cost_usd is None


def test_unknown_cost_in_any_call_makes_the_total_unknown() -> None:
    chat = ScriptedChat("nope", json.dumps(GOOD), cost=None)
    outcome = reflect(chat)
    assert outcome.source == "repaired" and outcome.cost_usd is None
    assert outcome.tokens_in == 20


def test_a_passed_evaluation_gets_a_success_note_without_a_call() -> None:
    chat = ScriptedChat()
    outcome = reflect(chat, evaluation=evaluation({"tests": []}, passed=True))
    assert outcome.source == "success" and chat.requests == []


def test_a_broken_prompt_override_never_raises(tmp_path: Path) -> None:
    folder = tmp_path / ".aiwg" / "ralph" / "prompts"
    folder.mkdir(parents=True)
    (folder / "reflection.mustache").write_text("{{#a}}{{/b}}", "utf-8")
    chat = ScriptedChat(json.dumps(GOOD))
    outcome = reflect(chat, project_root=tmp_path)
    assert outcome.source == "heuristic" and outcome.error is not None
    assert "ConfigError" in outcome.error and chat.requests == []


def test_secrets_are_redacted_before_reaching_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_SERVICE_TOKEN", "s3cr3t-value-for-test")
    leaky = evaluation(
        {"tests": [diag("auth failed with s3cr3t-value-for-test", "tests/test_api.py", 3)]}
    )
    chat = ScriptedChat("garbage", json.dumps(GOOD))
    reflect(chat, evaluation=leaky, task="use sk-ant-abcdefghijklmnopqrstuvwxyz0123 to call")
    sent = "\n".join(m.content for request in chat.requests for m in request)
    assert "s3cr3t-value-for-test" not in sent
    assert "sk-ant-abcdefghijklmnopqrstuvwxyz0123" not in sent
    assert "[REDACTED:FAKE_SERVICE_TOKEN]" in sent


# --- heuristic and success reflections ---------------------------------------------------------


def test_heuristic_names_the_top_failure_and_validates() -> None:
    r = heuristic_reflection(PARSER_FAIL, EDITED, [])
    assert r.reflection_text.startswith("My attempt")
    assert "tests/test_parser.py:27" in r.reflection_text
    assert "AssertionError: assert date(2024, 3, 4) == date(2024, 4, 3)" in r.reflection_text
    assert r.confidence == 0.3
    assert r.credit_assignment is not None
    assert r.credit_assignment.failure_category == "logic_error"
    assert r.credit_assignment.root_cause is not None
    assert r.credit_assignment.root_cause.startswith("tests/test_parser.py:27: AssertionError")
    assert r.credit_assignment.failing_action_indices == [0]  # the edit to dates/parser.py
    insights = r.actionable_insights or []
    assert insights[0] == (
        "tests: make tests/test_parser.py::test_us_format pass without editing the test; it "
        "fails at tests/test_parser.py:27: AssertionError: assert date(2024, 3, 4) == "
        "date(2024, 4, 3)"
    )
    assert any(s.startswith("ruff: fix dates/parser.py:1") for s in insights)
    assert is_valid_self_reflection(r)
    assert quality_flags(r, PARSER_FAIL) == []


def test_heuristic_reflection_fits_in_a_schema_valid_record() -> None:
    r = heuristic_reflection(PARSER_FAIL, EDITED, [])
    rec = earlier_record(2, "fp-1")
    rec.self_reflection = r
    assert schemas.errors(schemas.RECORD, rec.to_json()) == []


def test_heuristic_insists_on_a_new_approach_when_the_failure_repeats() -> None:
    earlier = [earlier_record(1, "fp-other"), earlier_record(2, "fp-1")]
    r = heuristic_reflection(PARSER_FAIL, EDITED, earlier)
    assert "same failure as iteration 2" in r.reflection_text
    assert "different approach" in r.reflection_text
    assert r.related_reflections == [2]
    assert (r.actionable_insights or [])[0].startswith("Abandon the approach of iteration 2")
    fresh = heuristic_reflection(PARSER_FAIL, EDITED, [earlier_record(1, "fp-other")])
    assert "same failure" not in fresh.reflection_text and fresh.related_reflections == []


def test_an_attempt_that_changed_nothing_is_not_taught_about_repeating_its_change() -> None:
    """A record saying "I did not change any files" taught "Repeating a change that produced
    the same errors wastes an iteration"."""
    earlier = [earlier_record(1, "fp-1")]
    idle = ActorOutput(actions=[], rationale="looked around")
    r = heuristic_reflection(PARSER_FAIL, idle, earlier)
    assert "I did not change any files" in r.reflection_text
    assert not any("change" in lesson.lower() for lesson in r.lessons_learned or [])
    edited = heuristic_reflection(PARSER_FAIL, EDITED, earlier)
    assert edited.lessons_learned == [
        "Repeating a change that produced the same errors wastes an iteration."
    ]


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("tests: fix the first error first: E", False),  # a diagnostic parsed to a fragment
        ("What worked: Summary of this attempt:", False),  # a header
        ("E", False),
        ("fix it", False),
        ("Use '%m/%d/%Y' in parse_date: the tests pass US dates", True),
        ("tests: make test_parse pass; it fails at dates.py:3: AssertionError", True),
    ],
)
def test_a_lesson_must_say_something(text: str, kept: bool) -> None:
    assert says_something(text) is kept
    reflection = gated(SelfReflection("I tried.", lessons_learned=[text]), changed_files=True)
    assert (reflection.lessons_learned == [text]) is kept


def test_the_gate_drops_what_the_record_contradicts() -> None:
    said = SelfReflection(
        "I changed nothing.",
        actionable_insights=["Make an actual code change: the last attempt changed no files."],
        lessons_learned=["Reapplying the same fix to parse_date keeps the errors as they were."],
    )
    idle = gated(said, changed_files=False)
    assert idle.lessons_learned == []
    assert idle.actionable_insights == said.actionable_insights
    assert gated(said, changed_files=True).lessons_learned == said.lessons_learned


@pytest.mark.parametrize(
    ("kind", "message", "broke", "category"),
    [
        ("test_failure", "assert 1 == 2", False, "logic_error"),
        # a change that broke a passing test with a plain assertion: still a logic error
        ("test_failure", "AssertionError: assert 3 == 4", True, "logic_error"),
        (
            "runtime_error",
            "ModuleNotFoundError: No module named 'yaml'",
            False,
            "integration_error",
        ),
        (
            "runtime_error",
            "ImportError: cannot import name 'parse' from 'dates'",
            True,
            "integration_error",  # not at the baseline: the attempt's own, never a hallucination
        ),
        ("type_error", "Incompatible return value type", False, "incorrect_assumption"),
        ("type_error", "Incompatible return value type", True, "incorrect_assumption"),
        ("lint_error", "E501 line too long", False, "incomplete_implementation"),
        ("syntax_error", "invalid syntax", True, "incomplete_implementation"),
        ("timeout", "timed out after 60 s", True, "logic_error"),
        ("runtime_error", "ZeroDivisionError: division by zero", False, "edge_case_miss"),
        ("type_error", 'Module "os" has no attribute "frobnicate"', False, "hallucination"),
        ("other", "something odd", False, "other"),
        ("other", "something odd", True, "integration_error"),
    ],
)
def test_heuristic_category_follows_the_top_failure(
    kind: str, message: str, broke: bool, category: str
) -> None:
    error = diag(message, "m.py", 2, type=kind)
    ev = evaluation({"check": [error]})
    if broke:
        ev.outcomes[0].verdict = CheckVerdict("guard", False, regressions=[error])
    r = heuristic_reflection(ev, EDITED, [])
    assert r.credit_assignment is not None and r.credit_assignment.failure_category == category


def test_heuristic_without_changes_or_diagnostics_is_still_valid() -> None:
    ev = evaluation({"shell": []})
    r = heuristic_reflection(ev, ActorOutput(actions=[], rationale=""), [])
    assert "I did not change any files" in r.reflection_text
    assert r.credit_assignment is not None
    assert r.credit_assignment.failure_category == "incomplete_implementation"
    assert "shell: read its output (exit code 1)" in " ".join(r.actionable_insights or [])
    assert is_valid_self_reflection(r)


def test_success_reflection_is_first_person_and_valid() -> None:
    ev = evaluation({"tests": [], "mypy": []}, passed=True)
    r = success_reflection(ev, EDITED)
    assert r.reflection_text.startswith("I made every check pass (tests, mypy")
    assert "dates/parser.py" in r.reflection_text
    assert r.lessons_learned == ["What worked: I switched the format"]
    assert is_valid_self_reflection(r)


HEADED = """Summary of this attempt:
- Switched parse_date to the month-first format
- Kept the two-digit year branch
"""


def test_a_summary_header_is_not_the_lesson_its_bullets_are() -> None:
    """An agent that ended with "Summary of this attempt:" and bullets taught "What worked:
    Summary of this attempt:"."""
    ev = evaluation({"tests": []}, passed=True)
    done = dataclasses.replace(EDITED, strategy=None, rationale=HEADED)
    r = success_reflection(ev, done)
    assert r.lessons_learned == [
        "What worked: Switched parse_date to the month-first format; Kept the two-digit year branch"
    ]
    assert "Summary of this attempt" not in r.reflection_text


@pytest.mark.parametrize(
    ("said", "expected"),
    [
        ("## Changes\n\n* a\n* b\n\nDone.", "a; b"),
        ("**Summary**\n1. fixed x.\n2) fixed y", "fixed x; fixed y"),
        ("Parsed the year with %Y.\nThen ran the tests.", "Parsed the year with %Y."),
        ("Summary:\n", ""),
        ("Fixed it: the parser now reads %m first", "Fixed it: the parser now reads %m first"),
    ],
)
def test_gist_skips_headers_and_joins_a_list(said: str, expected: str) -> None:
    assert gist(said) == expected


# --- quality flags -----------------------------------------------------------------------------


def sr(text: str, insights: list[str] | None = None, root: str | None = None) -> SelfReflection:
    credit = CreditAssignment(root_cause=root) if root else None
    return SelfReflection(text, credit_assignment=credit, actionable_insights=insights)


LONG_SPECIFIC = (
    "I kept the day-first format in parse_date, so tests/test_parser.py:27 still fails with "
    "an AssertionError comparing two dates."
)


def test_a_specific_reflection_has_no_flags() -> None:
    assert quality_flags(sr(LONG_SPECIFIC, ["Use '%m/%d/%Y'"]), PARSER_FAIL) == []


@pytest.mark.parametrize(
    ("reflection_", "flag"),
    [
        (sr("I broke tests/test_parser.py:27.", ["x"]), "too_short"),
        (sr(LONG_SPECIFIC + " I should be more careful.", ["x"]), "generic"),
        (
            sr("I made a mistake somewhere in the code and the checks did not pass. " * 2, ["x"]),
            "generic",
        ),
        (sr("I kept the wrong format in the parsing function; " * 3, ["use month"]), "no_location"),
        (sr(LONG_SPECIFIC, None), "no_insight"),
        (sr(LONG_SPECIFIC, ["   "]), "no_insight"),
        (
            sr(
                "The day-first format in parse_date makes tests/test_parser.py:27 fail with an "
                "AssertionError.",
                ["x"],
            ),
            "not_first_person",
        ),
    ],
)
def test_each_quality_flag(reflection_: SelfReflection, flag: str) -> None:
    flags = quality_flags(reflection_, PARSER_FAIL)
    assert flag in flags
    assert len(flags) == len(set(flags))


def test_location_in_root_cause_or_insights_counts() -> None:
    text = "I kept the wrong format in the parsing function, so the month came out wrong. " * 2
    assert "no_location" not in quality_flags(sr(text, ["fix test_parser.py"]), PARSER_FAIL)
    assert "no_location" not in quality_flags(
        sr(text, ["x"], root="tests/test_parser.py:27 compares dates"), PARSER_FAIL
    )


def test_no_location_is_not_flagged_when_diagnostics_have_no_files() -> None:
    ev = evaluation({"shell": [diag("exit status 3: make: *** [build] Error 3")]})
    text = "I ran the build but the Makefile target failed with exit status 3 again. " * 2
    flags = quality_flags(sr(text, ["fix the build target"]), ev)
    assert "no_location" not in flags and "generic" not in flags


STEPS = "read dates/parser.py; edited dates/parser.py; ran ruff check . (failed)"


def test_the_reflector_prompt_carries_the_compact_trajectory() -> None:
    chat = ScriptedChat(json.dumps(GOOD))
    reflect(chat, trajectory=STEPS)
    prompt = chat.requests[0][-1].content
    assert "What I did, step by step (from my own trace" in prompt and STEPS in prompt
    plain = ScriptedChat(json.dumps(GOOD))
    reflect(plain)
    assert "step by step" not in plain.requests[0][-1].content


def test_the_heuristic_names_checks_never_run_and_runs_left_failing() -> None:
    outcome = reflect(None, trajectory=STEPS)
    text = outcome.reflection.reflection_text
    assert "I never ran tests (`tests`) myself before stopping" in text
    assert "My last run of ruff failed (ruff check . (failed)) and I stopped anyway." in text
    insights = outcome.reflection.actionable_insights or []
    assert insights[:2] == [
        "Run `tests` yourself and read its output before you stop.",
        "Do not stop while `ruff` fails: read its output and fix what it reports.",
    ]
    unseen = reflect(None, trajectory="edited dates/parser.py").reflection.reflection_text
    assert "never ran" not in unseen  # an actor whose commands ralph cannot see: no claim


def test_related_reflections_are_bounded_by_the_largest_omega_not_the_iteration() -> None:
    # A loop stuck on one failure for 200 iterations: its records must not grow with it.
    earlier = [earlier_record(i, PARSER_FAIL.fingerprint) for i in range(1, 200)]
    r = heuristic_reflection(PARSER_FAIL, EDITED, earlier)
    assert r.related_reflections == list(range(190, 200))
    assert "same failure as iteration 199" in r.reflection_text
    answer = dict(GOOD, related_reflections=list(range(1, 200)))
    parsed, problems = parse_reflection(json.dumps(answer))
    assert problems == [] and parsed is not None
    assert parsed.related_reflections == list(range(190, 200))
