"""One iteration as values: compose -> act -> evaluate -> reflect -> remember.

Each step of `LoopRunner._iteration` returns one of the values below; `make_record` turns the
four of them into the iteration's record in one place: the Reflexion record, ralph's extension
(usage: the actor's, the checks' model calls' and the reflector's; durations, roles), and the
notes on what ralph ignored or undid; `name_commit` adds the commit that the record's own
message (workspace/commits.py) describes.
"""

from __future__ import annotations

import functools
import hashlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ralph.loop import protect
from ralph.records import (
    ActorOutput,
    CheckTally,
    IterationRecord,
    MemoryMetadata,
    PerformanceDelta,
    RalphExtension,
    ReflectionSource,
    SelfReflection,
    TraceSummary,
    Usage,
    WindowPolicy,
    annotate,
    known_sum,
    no_summary,
    sum_costs,
    utc_now,
)

if TYPE_CHECKING:
    from ralph.actors.base import ActorResult
    from ralph.evaluators.base import Evaluation
    from ralph.memory.state import BaselineSummary
    from ralph.workspace.base import ChangeSet


@dataclass(frozen=True)
class Prompt:
    """compose: the actor's prompt and what went into it."""

    iteration: int
    text: str
    window: list[IterationRecord]  # the Ω reflections it shows
    omega: int
    lessons: list[str]  # ids of the other loops' lessons it shows
    artifacts: Path  # loops/<id>/NNN/: prompt.md, the logs, the trace
    escalate: bool = False  # it offers the escalation exit (loop/escalation.py)


@dataclass(frozen=True)
class Acted:
    """act: what the actor said and what it changed in the tree (the tree decides)."""

    result: ActorResult
    changes: ChangeSet
    duration_ms: int
    # test files the attempt edited that were put back before the checks (loop/protect.py)
    protected: tuple[str, ...] = ()
    # the reason of its `RALPH-ESCALATE:` line, when the prompt offered one (loop/escalation.py)
    escalation: str | None = None

    @functools.cached_property
    def output(self) -> ActorOutput:
        """The record's actor_output; reading it waits for the diffs, so read it only once
        the checks have run (a git workspace diffs in the background meanwhile)."""
        return ActorOutput(
            actions=self.changes.actions(),
            rationale=rationale(self.result),
            files_modified=self.changes.paths() or None,
            total_changes=self.changes.total(),
        )


@dataclass(frozen=True)
class Evaluated:
    """evaluate: the checks' verdict on the attempt, judged against the baseline."""

    evaluation: Evaluation
    duration_ms: int


@dataclass(frozen=True)
class Reflected:
    """reflect: the self-reflection (a success note when the checks passed) and its cost."""

    reflection: SelfReflection
    source: ReflectionSource
    quality_flags: list[str]
    trace: TraceSummary | None = None  # the agent's trajectory, which the reflection read
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None
    calls: int = 0  # model calls the reflector made; without any it cost nothing
    duration_ms: int | None = None  # None: no reflector ran


@dataclass(frozen=True)
class Iteration:
    """The four steps' values, which `remember` turns into the iteration's record."""

    prompt: Prompt
    acted: Acted
    evaluated: Evaluated
    reflected: Reflected

    @property
    def number(self) -> int:
        return self.prompt.iteration

    @property
    def evaluation(self) -> Evaluation:
        return self.evaluated.evaluation

    def cost_usd(self) -> float | None:
        """The actor's cost, the checks' model calls' (a judge's) and the reflector's, if it
        made calls (`records.sum_costs`: one unknown part makes it unknown)."""
        reflector = [self.reflected.cost_usd] if self.reflected.calls else []
        checks = [call.cost_usd for call in self.evaluation.calls()]
        return sum_costs(self.acted.result.cost_usd, *checks, *reflector)

    def actor_notes(self) -> list[str]:
        """What stopped the actor (a model it could not reach, said so rather than as the timeout
        that ended its retries), and what ralph ignored in its output."""
        result = self.acted.result
        timed_out = [f"actor stopped at its {result.timed_out} timeout"] if result.timed_out else []
        return [*([result.unreachable] if result.unreachable else timed_out), *result.notes]

    def notes(self) -> list[str]:
        """The record's notes, one sentence each: the actor's, then the agent's own git
        commands that ralph undid."""
        return [*self.actor_notes(), *self.acted.changes.git_moves, *self.acted.changes.held_back]


def make_record(
    it: Iteration,
    *,
    loop_id: str,
    task: str,
    earlier: list[IterationRecord],
    baseline: BaselineSummary | None,
    window_policy: WindowPolicy,
) -> IterationRecord:
    """The record of iteration `it` after the `earlier` ones (its commit: `name_commit`)."""
    evaluation, reflected = it.evaluation, it.reflected
    previous_reward, previous_errors = _previous(earlier, baseline)
    in_context = [r.iteration for r in it.prompt.window]
    generated = sum(1 for r in earlier if not r.evaluator_output.passed)
    durations = {"actor": it.acted.duration_ms, "evaluate": it.evaluated.duration_ms}
    if reflected.duration_ms is not None:
        durations["reflect"] = reflected.duration_ms
    result, calls = it.acted.result, evaluation.calls()
    # records stay small enough to commit: at most 50 diagnostics per check, and the total
    recorded, error_count = evaluation.recorded_output()
    record = IterationRecord(
        loop_id=loop_id,
        iteration=it.number,
        timestamp=utc_now(),
        task_description=task,
        actor_output=it.acted.output,
        evaluator_output=recorded,
        self_reflection=reflected.reflection,
        memory_metadata=MemoryMetadata(
            # aiwg's schema wants 1-10: Ω = 0 (no memory) shows as capacity 1 with nothing
            # in context
            omega_capacity=max(it.prompt.omega, 1),
            current_memory_size=len(it.prompt.window),
            reflections_in_context=in_context,
            window_policy=window_policy,
            total_reflections_generated=generated + (0 if evaluation.passed else 1),
        ),
        context_injected=bool(it.prompt.window),
        previous_reflections_used=in_context,
        performance_delta=PerformanceDelta(
            reward_change=round(evaluation.reward - previous_reward, 4),
            error_count_change=evaluation.error_count - previous_errors,
            is_improvement=evaluation.reward > previous_reward,
        ),
        ralph=RalphExtension(
            reflection_source=reflected.source,
            quality_flags=list(reflected.quality_flags),
            usage=Usage(
                actor_tokens_in=result.tokens_in,
                actor_tokens_out=result.tokens_out,
                reflector_tokens_in=reflected.tokens_in,
                reflector_tokens_out=reflected.tokens_out,
                cost_usd=it.cost_usd(),
                evaluator_tokens_in=known_sum(call.tokens_in for call in calls),
                evaluator_tokens_out=known_sum(call.tokens_out for call in calls),
            ),
            duration_ms=durations,
            prompt_sha256=hashlib.sha256(it.prompt.text.encode()).hexdigest(),
            lessons_used=list(it.prompt.lessons),
            error_fingerprint=evaluation.fingerprint,
            trace=reflected.trace,
            error_count=error_count,
            protected_test_edits=list(it.acted.protected) or None,
            escalation=it.acted.escalation,
            **_judgement_fields(evaluation),
        ),
    )
    annotate(record, it.actor_notes())
    annotate(record, [protect.note(list(it.acted.protected))] if it.acted.protected else [])
    annotate(record, it.acted.changes.git_moves, flag="actor_moved_git")
    annotate(record, it.acted.changes.held_back)
    return record


def name_commit(record: IterationRecord, sha: str | None, *, on_branch: bool) -> None:
    """The record names the commit made from it; on a loop branch, an attempt that changed
    nothing has no commit of its own (HEAD holds its tree), and the record says so."""
    if sha and record.ralph is not None:
        record.ralph.git_commit = sha
    elif on_branch:
        annotate(record, ["no changes: nothing to commit"])


def _previous(
    earlier: list[IterationRecord], baseline: BaselineSummary | None
) -> tuple[float, int]:
    """The reward and error count this attempt is compared with: the last one's, else the
    baseline's."""
    if earlier:
        last = earlier[-1]
        return last.reward, last.error_count
    return (baseline.reward, baseline.error_count) if baseline else (0.0, 0)


def _judgement_fields(evaluation: Evaluation) -> dict[str, Any]:
    """The record's share of the judgement: roles and counts, when there is a baseline."""
    if evaluation.baseline is None:
        return {}
    verdicts = {
        o.spec.name: CheckTally(
            errors=o.error_count,
            new=len(o.verdict.regressions),
            fixed=len(o.verdict.fixed),
        )
        for o in evaluation.outcomes
        if o.verdict is not None
    }
    return {
        "check_roles": evaluation.roles(),
        "check_verdicts": verdicts,
        **evaluation.counts(),
        "failures": evaluation.scope() or None,
    }


def rationale(acted: ActorResult) -> str:
    if acted.summary:
        return acted.summary.strip()[:2000]
    status = "timed out" if acted.timed_out else f"exited {acted.exit_code}"
    return no_summary(status, acted.duration_ms)


def ms_since(since: float) -> int:
    return int((time.monotonic() - since) * 1000)
