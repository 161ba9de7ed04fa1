"""StopPolicy: when the loop ends, and when the next prompt should tell the agent to pivot.

- success: the evaluator says every target passes and no guard got worse (never the agent's
  word; judging.py);
- limit: `max_iterations` attempts made;
- stalled (plateau): the last `patience` iterations did not beat the best reward seen before
  them and kept failing the same way (same error fingerprint as the attempt before);
- budget: money (`budget_usd`), tokens (`max_tokens`) or wall time (`timeout`) used up.

Self-Refine's rules, for a loop whose only target is a judge (`refine`): its score is the
reward, so stop on diminishing returns (less than `MIN_GAIN` relative gain over two
iterations) or degradation (the score fell below the best so far; the loop then restores the
best iteration's code).

One iteration before a plateau would stop the loop, `should_pivot` turns on the prompt's pivot
instruction: change the approach rather than retry the same idea.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ralph.glyphs import plural
from ralph.loop.escalation import escalated

if TYPE_CHECKING:
    from ralph.memory.state import BaselineSummary
    from ralph.records import IterationRecord

Action = Literal[
    "continue",
    "success",
    "suspect",
    "limit",
    "stalled",
    "budget",
    "diminishing",
    "degraded",
    "needs_human",
    "usage_limit",
]
MIN_GAIN = 0.05  # Self-Refine: less than 5 % better over two iterations is not worth a third


@dataclass(frozen=True)
class Attempt:
    """What the policy needs to know about one finished iteration."""

    iteration: int
    reward: float
    passed: bool
    fingerprint: str
    escalation: str | None = None  # the agent asked for a person: why, and the evidence


def attempts(records: Sequence[IterationRecord]) -> list[Attempt]:
    return [
        Attempt(
            r.iteration,
            r.reward,
            r.evaluator_output.passed,
            (r.ralph.error_fingerprint or "") if r.ralph else "",
            escalated(r),
        )
        for r in records
    ]


def baseline_attempt(summary: BaselineSummary | None) -> Attempt | None:
    """The untouched tree as attempt 0."""
    if summary is None:
        return None
    return Attempt(0, summary.reward, summary.passed, summary.error_fingerprint)


@dataclass(frozen=True)
class Decision:
    action: Action
    reason: str

    @property
    def stop(self) -> bool:
        return self.action != "continue"


@dataclass(frozen=True)
class Spend:
    """Resources used so far by the whole loop."""

    seconds: float = 0.0
    tokens: int = 0
    cost_usd: float | None = None


@dataclass
class StopPolicy:
    max_iterations: int = 5
    patience: int = 3
    budget_usd: float | None = None
    max_tokens: int | None = None
    timeout: float | None = None
    refine: bool = False  # the only target is a judge: Self-Refine's stopping rules apply

    def stalled_run(self, history: list[Attempt], baseline: Attempt | None) -> int:
        """How many of the latest attempts in a row failed the same way without improving.

        Linear: asked twice per iteration, it must not cost more at iteration 200 than the
        one walk over the history."""
        best = baseline.reward if baseline else None
        best_before = []  # the best reward before each attempt (0.0 before anything)
        for attempt in history:
            best_before.append(0.0 if best is None else best)
            best = attempt.reward if best is None else max(best, attempt.reward)
        run = 0
        for index in range(len(history) - 1, -1, -1):
            attempt = history[index]
            previous = history[index - 1] if index else baseline
            same_failure = previous is not None and previous.fingerprint == attempt.fingerprint
            if attempt.passed or attempt.reward > best_before[index] or not same_failure:
                break
            run += 1
        return run

    def budget_exhausted(self, spend: Spend) -> str | None:
        if self.budget_usd is not None and (spend.cost_usd or 0.0) >= self.budget_usd:
            return f"budget of ${self.budget_usd:.2f} used (${spend.cost_usd or 0.0:.2f})"
        if self.max_tokens is not None and spend.tokens >= self.max_tokens:
            return f"token budget of {self.max_tokens} used ({spend.tokens})"
        if self.timeout is not None and spend.seconds >= self.timeout:
            return f"time budget of {self.timeout:.0f}s used"
        return None

    def decide(self, history: list[Attempt], baseline: Attempt | None, spend: Spend) -> Decision:
        """After an iteration: stop (and why) or go on."""
        if history and history[-1].passed:
            done = history[-1].iteration
            return Decision(
                "success", f"every target passes and no guard got worse at iteration {done}"
            )
        if history and history[-1].escalation:  # never a success: the checks did not pass
            return Decision("needs_human", history[-1].escalation)
        exhausted = self.budget_exhausted(spend)
        if exhausted:
            return Decision("budget", exhausted)
        if len(history) >= self.max_iterations:
            return Decision("limit", f"reached --max-iterations {self.max_iterations}")
        refined = refine_decision(history) if self.refine else None
        if refined is not None:
            return refined
        if self.stalled_run(history, baseline) >= self.patience:
            return Decision(
                "stalled",
                f"no improvement for {plural(self.patience, 'iteration')} with the same failure",
            )
        return Decision("continue", "")

    def should_pivot(self, history: list[Attempt], baseline: Attempt | None) -> bool:
        """True when one more identical failure would stop the loop as stalled."""
        return self.patience > 1 and self.stalled_run(history, baseline) >= self.patience - 1


def stop_reason(decision: Decision) -> str:
    """The state's `stop_reason`: the action, and for a stop for a person its reason too (what
    `ralph status`, `notify` and `--json` then say)."""
    if decision.action == "needs_human":
        return f"needs_human: {decision.reason}"[:500]
    return decision.action


def refine_decision(history: list[Attempt]) -> Decision | None:
    """Self-Refine's stops with their figures: degradation first (keep the best), then
    diminishing returns over the last two iterations."""
    if len(history) < 2:
        return None
    last, best = history[-1], max(history[:-1], key=lambda a: a.reward)
    if last.reward < history[-2].reward and last.reward < best.reward:
        return Decision(
            "degraded",
            f"the judge's score fell to {last.reward * 10:.1f} at iteration {last.iteration} "
            f"(best {best.reward * 10:.1f} at iteration {best.iteration}, which is kept)",
        )
    if len(history) < 3:
        return None
    before = history[-3]
    gain = (last.reward - before.reward) / before.reward if before.reward > 0 else float("inf")
    if gain < MIN_GAIN:
        return Decision(
            "diminishing",
            f"diminishing returns: the judge's score went {before.reward * 10:.1f} -> "
            f"{last.reward * 10:.1f} over iterations {before.iteration}-{last.iteration} "
            f"({gain:+.1%}, under {MIN_GAIN:.0%})",
        )
    return None


def refine_applies(targets: list[str], judges: set[str]) -> bool:
    """Whether every target of the loop is a judge check (then Self-Refine's rules apply)."""
    return bool(targets) and set(targets) <= judges
