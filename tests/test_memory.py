"""The Ω window: size by verification type, policies, token budget, and cross-loop lessons."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ralph import templates
from ralph.errors import ConfigError
from ralph.loop import prompts
from ralph.loop import window as memory
from ralph.loop.window import omega_for, reflection_tokens, select_window
from ralph.records import (
    ActorOutput,
    CreditAssignment,
    Diagnostic,
    EvaluatorOutput,
    IterationRecord,
    MemoryMetadata,
    RalphExtension,
    SelfReflection,
)


def rec(
    iteration: int,
    *,
    text: str | None = None,
    insights: list[str] | None = None,
    lessons: list[str] | None = None,
    root: str | None = None,
    passed: bool = False,
    source: str = "llm",
    fingerprint: str = "fp-a",
    errors: list[Diagnostic] | None = None,
    loop_id: str = "ralph-this-loop",
    confidence: float | None = None,
) -> IterationRecord:
    return IterationRecord(
        loop_id=loop_id,
        iteration=iteration,
        timestamp="2026-01-01T00:00:00Z",
        actor_output=ActorOutput(actions=[], rationale="r"),
        evaluator_output=EvaluatorOutput(
            passed=passed, verification_type="unit_tests", errors=errors, reward_signal=0.5
        ),
        self_reflection=SelfReflection(
            reflection_text=text if text is not None else f"I failed attempt {iteration}.",
            credit_assignment=CreditAssignment(root_cause=root) if root else None,
            actionable_insights=insights,
            lessons_learned=lessons,
            confidence=confidence,
        ),
        memory_metadata=MemoryMetadata(omega_capacity=3, current_memory_size=0),
        ralph=RalphExtension(reflection_source=source, error_fingerprint=fingerprint),  # type: ignore[arg-type]
    )


def iterations(window: list[IterationRecord]) -> list[int]:
    return [r.iteration for r in window]


# --- Ω ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "omega"),
    [
        ("unit_tests", 1),
        ("integration_tests", 3),
        ("type_check", 1),
        ("lint", 1),
        ("combined", 3),
        ("manual_review", 5),
        ("heuristic", 3),
        ("compilation", 3),
    ],
)
def test_omega_defaults_by_verification_type(kind: str, omega: int) -> None:
    assert omega_for(kind, None) == omega


def test_omega_override_wins_and_is_bounded() -> None:
    assert omega_for("unit_tests", 7) == 7
    assert omega_for("combined", 1) == 1
    assert omega_for("combined", 0) == 0  # no reflections: `ralph bench`'s no-memory arm
    for bad in (11, -1):
        with pytest.raises(ConfigError, match="between 0 and 10"):
            omega_for("combined", bad)


def test_estimate_tokens_is_a_quarter_of_the_characters_rounded_up() -> None:
    assert memory.estimate_tokens("") == 0
    assert memory.estimate_tokens("abcd") == 1
    assert memory.estimate_tokens("abcde") == 2
    r = rec(1, text="x" * 40, root="y" * 19, insights=["z" * 20])
    assert reflection_tokens(r) == (40 + 19 + 20 + 2 + 3) // 4  # fields joined by newlines


# --- selection ----------------------------------------------------------------------------------


def test_only_failed_iterations_reflections_enter_the_window() -> None:
    records = [
        rec(1),
        rec(2, passed=True, source="success"),
        rec(3, source="success"),
        rec(4, text="   "),
        rec(5),
    ]
    for policy in memory.POLICIES:
        window = select_window(records, omega=5, policy=policy, token_budget=10_000)
        assert iterations(window) == [1, 5]


@pytest.mark.parametrize("policy", memory.POLICIES)
def test_omega_bounds_the_window_and_it_is_oldest_first(policy: str) -> None:
    records = [rec(i) for i in (4, 1, 3, 2, 5)]
    window = select_window(records, omega=3, policy=policy, token_budget=10_000)
    assert iterations(window) == [3, 4, 5]
    assert select_window(records, omega=0, policy=policy, token_budget=10_000) == []


def test_a_rewritten_iteration_counts_once() -> None:
    records = [rec(1, text="I old."), rec(2), rec(1, text="I new.")]
    window = select_window(records, omega=3, policy="recency", token_budget=10_000)
    assert iterations(window) == [1, 2]
    assert window[0].self_reflection.reflection_text == "I new."


def test_fifo_evicts_from_the_old_end_while_recency_skips_only_what_does_not_fit() -> None:
    small = "I made a small mistake."  # 6 tokens
    records = [rec(1, text=small), rec(2, text="I " + "x" * 400), rec(3, text=small)]
    fifo = select_window(records, omega=3, policy="fifo", token_budget=40)
    recency = select_window(records, omega=3, policy="recency", token_budget=40)
    assert iterations(fifo) == [3]  # a queue: once 2 is evicted, 1 (older) goes too
    assert iterations(recency) == [1, 3]  # newest first, then anything older that still fits


def test_relevance_weighted_prefers_the_same_failure_over_a_newer_unrelated_one() -> None:
    parser = [Diagnostic("test_failure", "bad", file="dates/parser.py", line=3, rule="t::a")]
    other = [Diagnostic("lint_error", "E501", file="cli.py", line=1, rule="E501")]
    records = [
        rec(1, fingerprint="fp-parser", errors=parser),
        rec(2, fingerprint="fp-cli", errors=other),
        rec(3, fingerprint="fp-cli", errors=other),
    ]
    window = select_window(
        records,
        omega=1,
        policy="relevance_weighted",
        token_budget=1000,
        current_fingerprint="fp-parser",
        current_errors=parser,
    )
    assert iterations(window) == [1]
    # overlap of files/rules alone (different fingerprint) also pulls an old reflection in
    by_files = select_window(
        records,
        omega=2,
        policy="relevance_weighted",
        token_budget=1000,
        current_fingerprint="fp-new",
        current_errors=parser,
    )
    assert iterations(by_files) == [1, 3]
    # with nothing to compare against it reduces to recency
    plain = select_window(records, omega=2, policy="relevance_weighted", token_budget=1000)
    assert iterations(plain) == [2, 3]


def test_unknown_policy_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="window policy"):
        select_window([rec(1)], omega=1, policy="lifo", token_budget=100)


# --- the token budget ---------------------------------------------------------------------------


def test_a_reflection_larger_than_the_budget_is_truncated_not_dropped() -> None:
    big = rec(
        7,
        text="I " + "really " * 300 + "failed.",
        root="root " * 50,
        insights=["insight " * 50, "second"],
        lessons=["lesson"],
    )
    (window,) = select_window([big], omega=1, policy="recency", token_budget=100)
    assert reflection_tokens(window) <= 100
    assert window.iteration == 7
    text = window.self_reflection.reflection_text
    assert text.startswith("I really really") and text.endswith(memory.TRUNCATION_MARKER)
    assert big.self_reflection.reflection_text.endswith("failed.")  # the record is untouched
    assert select_window([big], omega=1, policy="recency", token_budget=10) == []


def test_prompt_size_stays_bounded_over_fifty_long_reflections() -> None:
    records = [
        rec(
            i,
            text=f"I failed attempt {i} because " + "the parser mishandles dates; " * 60,
            root="the parser mishandles dates " * 10,
            insights=[f"step {k}: " + "check the format string " * 8 for k in range(4)],
            lessons=["read the tests " * 10],
        )
        for i in range(1, 51)
    ]
    assert all(reflection_tokens(r) > 600 for r in records)

    def prompt_at(iteration: int) -> str:
        window = select_window(
            records[: iteration - 1], omega=3, policy="recency", token_budget=2000
        )
        assert sum(reflection_tokens(r) for r in window) <= 2000
        context = prompts.actor_prompt_context(
            task="fix dates",
            iteration=iteration,
            max_iterations=50,
            evaluation=None,
            reflections=window,
            lessons=[],
            pivot=False,
            unmatched_edits=[],
        )
        return templates.render("actor", context)

    at3, at50 = prompt_at(3), prompt_at(50)
    assert "attempt 49" in at50 and "attempt 2 " in at3
    assert len(at50) <= 1.1 * len(at3)
    assert memory.estimate_tokens(at50) < 2000 + memory.estimate_tokens(prompt_at(1)) + 200


@settings(max_examples=150, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=1, max_value=3000), max_size=25),
    passed=st.lists(st.booleans(), max_size=25),
    order=st.randoms(use_true_random=False),
    omega=st.integers(min_value=1, max_value=10),
    policy=st.sampled_from(memory.POLICIES),
    budget=st.integers(min_value=1, max_value=3000),
)
def test_window_never_exceeds_omega_or_budget_and_is_sorted(
    sizes: list[int],
    passed: list[bool],
    order: object,
    omega: int,
    policy: str,
    budget: int,
) -> None:
    records = [
        rec(
            i + 1,
            text="I " + "w" * size,
            insights=["do " + "v" * (size // 3)],
            passed=passed[i] if i < len(passed) else False,
            fingerprint=f"fp-{size % 3}",
        )
        for i, size in enumerate(sizes)
    ]
    order.shuffle(records)  # type: ignore[attr-defined]
    window = select_window(
        records, omega=omega, policy=policy, token_budget=budget, current_fingerprint="fp-1"
    )
    assert len(window) <= omega
    assert sum(reflection_tokens(r) for r in window) <= budget
    assert iterations(window) == sorted(set(iterations(window)))
    assert all(not r.evaluator_output.passed for r in window)
    assert all(r.self_reflection.reflection_text for r in window)


# --- lessons from other loops -------------------------------------------------------------------
