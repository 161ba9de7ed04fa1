"""Records the tests make without a loop (the loop's fakes are `ralph.testing`'s)."""

from ralph.records import (
    ActorOutput,
    EvaluatorOutput,
    IterationRecord,
    MemoryMetadata,
    RalphExtension,
    SelfReflection,
    Usage,
)


def record(
    iteration: int,
    *,
    reward: float = 0.5,
    passed: bool = False,
    cost: float | None = None,
    loop_id: str = "ralph-fake-1",
    fingerprint: str = "fp",
) -> IterationRecord:
    """A minimal valid record, for tests that need one without a loop."""
    return IterationRecord(
        loop_id=loop_id,
        iteration=iteration,
        timestamp="2026-01-01T00:00:00Z",
        actor_output=ActorOutput(actions=[], rationale="r"),
        evaluator_output=EvaluatorOutput(
            passed=passed, verification_type="unit_tests", reward_signal=reward
        ),
        self_reflection=SelfReflection(reflection_text=f"I failed attempt {iteration}."),
        memory_metadata=MemoryMetadata(omega_capacity=3, current_memory_size=0),
        ralph=RalphExtension(error_fingerprint=fingerprint, usage=Usage(cost_usd=cost)),
    )
