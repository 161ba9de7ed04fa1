"""The Reflector protocol and what a reflection returns: the seam between the loop and
self-reflection, so the loop holds any reflector (the model's, a heuristic one, a test's fake)
as it holds any Actor or Evaluator."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from ralph.records import ReflectionSource, SelfReflection

if TYPE_CHECKING:
    from ralph.evaluators.base import Evaluation
    from ralph.records import ActorOutput, IterationRecord

# the seam: what other packages use
__all__ = ["ReflectionOutcome", "Reflector"]


@dataclass
class ReflectionOutcome:
    reflection: SelfReflection
    source: ReflectionSource
    quality_flags: list[str] = field(default_factory=list)
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None  # None when any call's cost is unknown, never 0 for unknown
    error: str | None = None  # why the LLM reflection was not used, one line
    calls: int = 0  # answers the model gave (their cost is the reflection's)


class Reflector(Protocol):
    def reflect(
        self,
        *,
        task: str,
        iteration: int,
        actor_output: ActorOutput,
        evaluation: Evaluation,
        earlier: list[IterationRecord],
        diff_summary: str = "",
        trajectory: str = "",
        protected_edits: Sequence[str] = (),
    ) -> ReflectionOutcome:
        """A reflection on a failed attempt (the loop writes a passing one's note itself);
        never raises: a reflector that fails falls back to a heuristic reflection and says why
        in `error`. `protected_edits`: test files the attempt edited that ralph put back
        unjudged."""
        ...
