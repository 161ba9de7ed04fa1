"""One loop's figures (`ralph analyze`): its reward series, iterations to green, learning rate,
breakthroughs and error trend, as the definitions in `stats.py` say, and its `--json` entry."""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass
from typing import Any

from ralph.analyze.facts import IterationFacts, LoopFiles, StateFacts
from ralph.analyze.trace_stats import action_stats
from ralph.records import known_sum, sum_costs

BREAKTHROUGH = 0.3
_EPS = 1e-9  # so that 0.4 -> 0.7 counts as a 0.3 jump despite binary floats


@dataclass
class Breakthrough:
    iteration: int
    reward_before: float
    reward: float
    reflection_iteration: int | None = None
    reflection: str | None = None
    category: str | None = None

    @property
    def delta(self) -> float:
        return self.reward - self.reward_before


@dataclass
class LoopAnalysis:
    loop_id: str
    task: str | None
    status: str
    stop_reason: str | None
    created_at: str | None
    baseline_reward: float | None
    baseline_error_count: int | None
    records: list[IterationFacts]
    rewards: list[float]
    iterations_to_green: int | None
    learning_rate: float | None
    breakthroughs: list[Breakthrough]
    error_counts: list[int]
    error_trend: float | None
    failure_categories: dict[str, int]
    tokens: int | None  # None: no record knows its tokens
    cost_usd: float | None
    wall_seconds: float
    invalid_files: int

    @property
    def last_iteration(self) -> int:
        return self.records[-1].iteration if self.records else 0

    @property
    def nothing_to_do(self) -> bool:
        """Green at its baseline, before any attempt: no evidence for or against the loop, so
        it stays out of the success figures and is counted on its own."""
        return self.iterations_to_green == 0


def loop_task(state: StateFacts | None, files: LoopFiles) -> str | None:
    if state is not None:
        return state.task
    return next((r.task for r in files.records if r.task), None)


def loop_created(state: StateFacts | None, files: LoopFiles) -> str | None:
    if state is not None:
        return state.created_at
    return files.records[0].timestamp if files.records else None


def mean_step(series: list[float] | list[int]) -> float | None:
    """Mean of series[i] - series[i-1]; None with fewer than two entries."""
    if len(series) < 2:
        return None
    return sum(b - a for a, b in itertools.pairwise(series)) / (len(series) - 1)


def analyse_loop(
    loop_id: str, state: StateFacts | None, status: str, files: LoopFiles
) -> LoopAnalysis:
    records = files.records
    base = state.baseline_reward if state else None
    base_errors = state.baseline_error_count if state else None
    rewards = ([base] if base is not None else []) + [r.reward for r in records]
    errors = ([base_errors] if base_errors is not None else []) + [r.error_count for r in records]
    green = next((r.iteration for r in records if r.passed), None)
    if green is None and not records and state is not None and state.baseline_passed:
        green = 0
    by_iteration = {r.iteration: r for r in records}
    breakthroughs = []
    previous = base
    for record in records:
        if previous is not None and record.reward - previous >= BREAKTHROUGH - _EPS:
            before = by_iteration.get(record.iteration - 1)
            breakthroughs.append(
                Breakthrough(
                    record.iteration,
                    previous,
                    record.reward,
                    before.iteration if before else None,
                    (before.root_cause or before.reflection) if before else None,
                    before.category if before else None,
                )
            )
        previous = record.reward
    return LoopAnalysis(
        loop_id=loop_id,
        task=loop_task(state, files),
        status=status,
        stop_reason=state.stop_reason if state else None,
        created_at=loop_created(state, files),
        baseline_reward=base,
        baseline_error_count=base_errors,
        records=records,
        rewards=rewards,
        iterations_to_green=green,
        learning_rate=mean_step(rewards),
        breakthroughs=breakthroughs,
        error_counts=errors,
        error_trend=mean_step(errors),
        failure_categories=dict(
            Counter(r.category or "uncategorised" for r in records if not r.passed)
        ),
        tokens=known_sum([r.tokens for r in records]),
        cost_usd=sum_costs(*(r.cost_usd for r in records)) if records else None,
        wall_seconds=sum(r.duration_ms for r in records) / 1000,
        invalid_files=len(files.invalid),
    )


def loop_json(loop: LoopAnalysis) -> dict[str, Any]:
    return {
        "loop_id": loop.loop_id,
        "task": loop.task,
        "status": loop.status,
        "stop_reason": loop.stop_reason,
        "created_at": loop.created_at,
        "iterations": len(loop.records),
        "last_iteration": loop.last_iteration,
        "baseline_reward": loop.baseline_reward,
        "rewards": loop.rewards,
        "best_reward": max(loop.rewards, default=None),
        "iterations_to_green": loop.iterations_to_green,
        "learning_rate": loop.learning_rate,
        "breakthroughs": [
            {
                "iteration": b.iteration,
                "reward_before": b.reward_before,
                "reward": b.reward,
                "delta": b.delta,
                "preceded_by": None
                if b.reflection_iteration is None
                else {
                    "iteration": b.reflection_iteration,
                    "reflection": b.reflection,
                    "category": b.category,
                },
            }
            for b in loop.breakthroughs
        ],
        "baseline_error_count": loop.baseline_error_count,
        "error_counts": loop.error_counts,
        "error_trend": loop.error_trend,
        "failure_categories": loop.failure_categories,
        "tokens": loop.tokens,
        "cost_usd": loop.cost_usd,
        "wall_seconds": loop.wall_seconds,
        "invalid_files": loop.invalid_files,
        "agent_actions": action_stats(loop.records),
    }
