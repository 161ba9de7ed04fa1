"""The iteration record: lossless JSON round-trip and the schema's verdict on bad records."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ralph import schemas
from ralph.records import (
    Action,
    ActorOutput,
    Changes,
    CheckResult,
    CreditAssignment,
    Diagnostic,
    EvaluatorOutput,
    IterationRecord,
    MemoryMetadata,
    Metrics,
    PerformanceDelta,
    RalphExtension,
    SelfReflection,
    TotalChanges,
    Usage,
)

from .conftest import EXAMPLE_LOOP, REPO


def full_record() -> IterationRecord:
    """A record with every optional field set, so the round-trip covers every field."""
    return IterationRecord(
        loop_id="ralph-demo-00000001",
        iteration=2,
        timestamp="2026-11-20T09:14:03Z",
        task_description="fix it",
        actor_output=ActorOutput(
            actions=[
                Action(
                    "code_modification",
                    "edited",
                    file_path="a.py",
                    changes=Changes(additions=3, deletions=1, diff="@@ -1 +1 @@"),
                    command="sed -i",
                    timestamp="2026-11-20T09:14:00Z",
                )
            ],
            rationale="because",
            strategy="minimal",
            files_modified=["a.py"],
            total_changes=TotalChanges(1, 3, 1),
        ),
        evaluator_output=EvaluatorOutput(
            passed=False,
            verification_type="combined",
            results=[CheckResult("pytest", "fail", 1, "out", "err", 120)],
            errors=[
                Diagnostic("test_failure", "boom", "t.py", 3, 5, "trace", "error", "t.py::test")
            ],
            reward_signal=0.5,
            metrics=Metrics(1, 1, 2, 80.5, 0, 1, 2),
        ),
        self_reflection=SelfReflection(
            reflection_text="I broke it.",
            credit_assignment=CreditAssignment([0], "root", "logic_error"),
            causal_reasoning="cause",
            actionable_insights=["do x"],
            lessons_learned=["learn y"],
            confidence=0.7,
            related_reflections=[1],
        ),
        memory_metadata=MemoryMetadata(3, 1, [1], "recency", 2),
        context_injected=True,
        previous_reflections_used=[1],
        performance_delta=PerformanceDelta(0.25, -1, True),
        notes="n",
        ralph=RalphExtension(
            reflection_source="llm",
            quality_flags=["too_short"],
            usage=Usage(10, 20, 30, 40, None),
            duration_ms={"actor": 5},
            prompt_sha256="a" * 64,
            git_commit="abc",
            lessons_used=["ralph-x-1#2"],
            error_fingerprint="ff",
        ),
    )


def test_every_field_survives_a_json_round_trip() -> None:
    record = full_record()
    data = json.loads(json.dumps(record.to_json()))
    assert IterationRecord.from_json(data) == record
    assert IterationRecord.from_json(data).to_json() == data
    assert schemas.errors(schemas.RECORD, data) == []


def test_unknown_cost_is_written_as_null_never_zero() -> None:
    data = full_record().to_json()
    assert data["ralph"]["usage"]["cost_usd"] is None


def test_optional_fields_left_unset_are_absent_not_null() -> None:
    record = full_record()
    record.notes = None
    record.performance_delta = None
    data = record.to_json()
    assert "notes" not in data and "performance_delta" not in data


@pytest.mark.parametrize("name", ["001.json", "002.json", "003.json"])
def test_example_loop_records_are_valid(name: str) -> None:
    path = REPO / ".aiwg/ralph/reflections" / EXAMPLE_LOOP / name
    data = json.loads(path.read_text())
    assert schemas.errors(schemas.RECORD, data) == []
    assert IterationRecord.from_json(data).to_json() == data


def test_example_loop_state_is_valid() -> None:
    path = REPO / ".aiwg/ralph/loops" / EXAMPLE_LOOP / "state.json"
    assert schemas.errors(schemas.LOOP_STATE, json.loads(path.read_text())) == []


def _broken(mutate: Any) -> list[str]:
    data = copy.deepcopy(full_record().to_json())
    mutate(data)
    return schemas.errors(schemas.RECORD, data)


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: d.pop("self_reflection"), "'self_reflection' is a required property"),
        (lambda d: d["actor_output"].pop("rationale"), "'rationale' is a required property"),
        (lambda d: d["evaluator_output"].update(verification_type="vibes"), "$.evaluator_output"),
        (lambda d: d["actor_output"]["actions"][0].update(type="poke"), "actions[0].type"),
        (lambda d: d["evaluator_output"].update(reward_signal=1.5), "reward_signal"),
        (lambda d: d["evaluator_output"].update(reward_signal=-0.1), "reward_signal"),
        (lambda d: d.update(loop_id="Ralph/../x"), "$.loop_id"),
        (lambda d: d.update(loop_id="fix-it"), "$.loop_id"),
        (lambda d: d.update(iteration=-1), "$.iteration"),
        (lambda d: d["memory_metadata"].update(omega_capacity=11), "omega_capacity"),
        (lambda d: d["self_reflection"].update(confidence=2), "confidence"),
        (
            lambda d: d["self_reflection"]["credit_assignment"].update(failure_category="bad"),
            "failure_category",
        ),
        (lambda d: d["evaluator_output"]["errors"][0].update(severity="fatal"), "severity"),
        (lambda d: d.update(surprise=True), "Additional properties"),
        (lambda d: d["ralph"].update(reflection_source="oracle"), "reflection_source"),
    ],
)
def test_schema_rejects_invalid_records(mutate: Any, expected: str) -> None:
    problems = _broken(mutate)
    assert problems, "the schema accepted an invalid record"
    assert any(expected in p for p in problems), problems


def test_from_json_rejects_unknown_fields() -> None:
    data = full_record().to_json()
    data["actor_output"]["mood"] = "happy"
    with pytest.raises(TypeError, match="mood"):
        IterationRecord.from_json(data)


text = st.text(max_size=40)
reflections = st.builds(
    SelfReflection,
    reflection_text=st.text(min_size=1, max_size=80),
    actionable_insights=st.none() | st.lists(text, max_size=3),
    confidence=st.none() | st.floats(0, 1),
)


@given(
    reflection=reflections,
    reward=st.floats(0, 1),
    iteration=st.integers(0, 10_000),
    flags=st.lists(text, max_size=3),
    cost=st.none() | st.floats(0, 100),
)
def test_round_trip_property(
    reflection: SelfReflection, reward: float, iteration: int, flags: list[str], cost: float | None
) -> None:
    record = full_record()
    record.self_reflection = reflection
    record.iteration = iteration
    record.evaluator_output.reward_signal = reward
    assert record.ralph is not None
    record.ralph.quality_flags = flags
    record.ralph.usage.cost_usd = cost
    data = json.loads(json.dumps(record.to_json()))
    assert IterationRecord.from_json(data) == record
    assert schemas.errors(schemas.RECORD, data) == []


def test_schema_files_are_valid_draft_2020_12() -> None:
    import jsonschema

    for name in (schemas.RECORD, schemas.LOOP_STATE, schemas.CONFIG):
        schema = json.loads((REPO / "schemas" / name).read_text())
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schemas.package_data("schemas").joinpath(name).is_file()
