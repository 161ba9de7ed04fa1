"""LoopRunner: the state machine of DESIGN.md section 1.

preflight -> baseline -> (prompt, act, diff, evaluate, reflect, record, commit, decide)*

It knows nothing about rich (it emits events to a Reporter) and nothing about how a check or an
actor works (protocols). Every iteration is saved before the next begins: a record, a commit and
the state file, so Ctrl-C or kill -9 at any point loses at most the attempt in progress.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ralph.errors import EXIT_ABORTED, BudgetExceeded, PreflightError, RalphError
from ralph.evaluators.judging import Baseline
from ralph.files import atomic_write_text
from ralph.loop.policy import Attempt, Decision, Spend, StopPolicy
from ralph.memory.store import LoopState, MemoryStore
from ralph.records import (
    ActorOutput,
    IterationRecord,
    MemoryMetadata,
    PerformanceDelta,
    RalphExtension,
    SelfReflection,
    Usage,
    annotate,
    utc_now,
)
from ralph.templates import render

if TYPE_CHECKING:
    from ralph.actors.base import Actor, ActorResult
    from ralph.config import Settings
    from ralph.evaluators.base import Evaluation, Evaluator
    from ralph.memory.lessons import Lesson
    from ralph.reflection.reflector import Reflector
    from ralph.workspace.base import GitState, Workspace

EXIT_CODES = {
    "success": 0,
    "already_green": 0,
    "limit": 1,
    "stalled": 1,
    "budget": 3,
    "aborted": EXIT_ABORTED,
    "diminishing": 1,  # Self-Refine's stops (stopping.py)
    "degraded": 1,
}
ABORTED_MESSAGE = "aborted by `ralph abort`: the loop is over (start a new one with `ralph run`)"
FINAL_STATUS = {
    "success": "completed",
    "already_green": "completed",
    "limit": "failed",
    "stalled": "failed",
    "budget": "failed",
    "diminishing": "failed",
    "degraded": "failed",
}


class Reporter(Protocol):
    """Receives the loop's events; ui.py has the rich, plain and JSON implementations."""

    def loop_started(self, state: LoopState, resumed: bool) -> None: ...
    def phase(self, iteration: int, name: str) -> None: ...
    def output(self, stream: str, text: str) -> None: ...
    def evaluated(self, iteration: int, evaluation: Evaluation) -> None: ...
    def iteration_done(self, record: IterationRecord, decision: Decision) -> None: ...
    def note(self, message: str) -> None: ...
    def loop_finished(self, result: LoopResult) -> None: ...


@dataclass
class LoopResult:
    loop_id: str
    status: str
    stop_reason: str
    exit_code: int
    iterations: int
    best_iteration: int | None
    best_reward: float | None
    reward_history: list[float]
    usage: dict[str, Any]
    reflections_dir: str
    message: str = ""
    targets: list[str] = field(default_factory=list)
    guards: list[str] = field(default_factory=list)
    regressions: int = 0

    def to_json(self) -> dict[str, Any]:
        """The one object `ralph run --json` prints (DESIGN.md section 10)."""
        return {
            "loop_id": self.loop_id,
            "status": self.status,
            "stop_reason": self.stop_reason,
            "iterations": self.iterations,
            "best_iteration": self.best_iteration,
            "best_reward": self.best_reward,
            "reward_history": self.reward_history,
            "usage": self.usage,
            "reflections_dir": self.reflections_dir,
            "exit_code": self.exit_code,
            "targets": self.targets,
            "guards": self.guards,
            "regressions": self.regressions,
        }


@dataclass
class Parts:
    """The collaborators of one loop; built by `build_parts`, swapped by tests."""

    actor: Actor
    evaluator: Evaluator
    reflector: Reflector
    workspace: Workspace


@dataclass
class LoopRunner:
    settings: Settings
    store: MemoryStore
    parts: Parts
    reporter: Reporter
    records: list[IterationRecord] = field(default_factory=list)
    baseline: Baseline | None = field(default=None, init=False)
    _last_evaluation: Evaluation | None = field(default=None, init=False)
    # evaluations of the trees a rollback may return to: 0 (the baseline) and the best iteration
    _kept: dict[int, Evaluation] = field(default_factory=dict, init=False)
    _reverted: dict[str, Any] | None = field(default=None, init=False)
    _unmatched: list[str] = field(default_factory=list, init=False)
    _record_paths: dict[int, Path] = field(default_factory=dict, init=False)

    @property
    def workdir(self) -> Path:
        return self.parts.workspace.root

    def policy(self) -> StopPolicy:
        from ralph.loop.policy import refine_applies

        s = self.settings
        judges = {c.name for c in s.all_checks() if c.parser == "judge"}
        refine = refine_applies(self.baseline.named("target") if self.baseline else [], judges)
        return StopPolicy(
            s.max_iterations, s.patience, s.budget_usd, s.max_tokens, s.timeout, refine
        )

    def _bind_judges(self, task: str, base_commit: str | None) -> None:
        """Judge checks read the task, the reflector's model and the diff since `base_commit`."""
        bind = getattr(self.parts.evaluator, "bind_loop", None)
        if bind is not None:
            client = getattr(self.parts.reflector, "client", None)
            bind(task=task, client=client, base_commit=base_commit)

    # entry points -------------------------------------------------------------------------
    def start(self, task: str, loop_id: str) -> LoopResult:
        self.parts.evaluator.preflight()
        self.parts.actor.preflight()
        state = LoopState(loop_id=loop_id, task=task, settings=self.settings)
        with self.store.lock(loop_id, self.workdir):
            # a dirty tree is refused before the checks run
            self.parts.workspace.preflight_loop(loop_id, allow_dirty=self.settings.allow_dirty)
            self.store.ensure()
            self.store.claim(state, self.workdir)  # issue 15: saved before the baseline starts
            self._bind_judges(task, self.parts.workspace.current_commit())
            self.reporter.phase(0, "baseline")
            evaluation = self.parts.evaluator.evaluate_baseline(
                self.workdir,
                named=self.settings.named(),
                success=self.settings.success,
                on_output=self.reporter.output,
            )
            if evaluation.baseline is None:
                raise RalphError("the evaluator judged the baseline without keeping it")
            self.baseline = evaluation.baseline
            state.baseline = self.baseline.summary()
            self.store.write_baseline(loop_id, self.baseline.to_json())
            self._last_evaluation = evaluation  # the first prompt names what fails, file:line
            self._kept = {0: evaluation}
            self.reporter.evaluated(0, evaluation)
            self._warn_broken_checks(evaluation)
            self._announce_roles(self.baseline, evaluation)
            if evaluation.passed:
                state.status, state.stop_reason = "completed", "already_green"
                self.store.write_state(state)
                return self._finish(state, "already_green", _green_message(evaluation))
            state.git = self._start_git(loop_id)
            return self._run(state, resumed=False)

    def resume(self, state: LoopState) -> LoopResult:
        if self.store.effective_status(state) == "running":  # its lock is held
            raise PreflightError(
                f"loop {state.loop_id} is still running",
                hint=f"stop it first, or `ralph abort {state.loop_id}`",
            )
        if state.status in ("completed", "aborted"):
            raise PreflightError(f"loop {state.loop_id} is {state.status}: nothing to resume")
        if state.baseline is None:  # killed during its baseline (issue 15): begin again
            with self.store.lock(state.loop_id, self.workdir):
                self._stop_orphans(state)
            return self.start(state.task, state.loop_id)
        self.parts.evaluator.preflight()
        self.parts.actor.preflight()
        with self.store.lock(state.loop_id, self.workdir):
            self._stop_orphans(state)
            self.store.clear_partial_writes(state.loop_id, self.workdir)
            # a record past state.iteration is from an attempt killed before its bookkeeping
            # finished (commit, state): that attempt is done again and its record rewritten
            records = self.store.valid_records(state.loop_id)
            self.records = [r for r in records if r.iteration <= state.iteration]
            # the branch exactly as the state knows it
            for note in self.parts.workspace.resume_loop(state.git, state.loop_id, state.iteration):
                self.reporter.note(note)
            # what fails now, file:line, for the next prompt (and the lessons it brings)
            self.baseline = Baseline.stored(self.store.read_baseline(state.loop_id), state.baseline)
            self._bind_judges(state.task, state.git.base_commit if state.git else None)
            self.reporter.phase(0, "baseline")
            self._last_evaluation = self.parts.evaluator.evaluate(
                self.workdir, baseline=self.baseline, on_output=self.reporter.output
            )
            self.reporter.evaluated(0, self._last_evaluation)
            return self._run(state, resumed=True)

    def _stop_orphans(self, state: LoopState) -> None:
        """What a crashed (kill -9) run had started must not edit the tree under this one."""
        from ralph.process import kill_orphans

        if state.status != "running" or not state.pid:  # with the lock held: it crashed
            return
        stopped = kill_orphans(state.pid)
        if stopped:
            self.reporter.note(
                f"stopped {len(stopped)} process group(s) the crashed run (pid {state.pid}) left"
            )

    def _warn_broken_checks(self, baseline: Evaluation) -> None:
        """A check that cannot run at all (status error, not fail) is usually misconfigured; an
        agent may still make it run, so this is a warning, not a refusal."""
        for outcome in baseline.outcomes:
            if outcome.result.status != "error":
                continue
            first = next(iter(outcome.errors), None)
            why = first.message.splitlines()[0][:200] if first and first.message else "no output"
            self.reporter.note(
                f"warning: check {outcome.spec.name!r} could not run on the untouched tree "
                f"({why}); see `ralph check`"
            )

    def _announce_roles(self, baseline: Baseline, evaluation: Evaluation) -> None:
        """Say at the start what must end green and what must only not get worse."""
        if baseline.success == "strict":
            self.reporter.note("--strict: every check must pass")
            return
        targets = []
        for outcome in evaluation.outcomes:
            check = baseline.checks.get(outcome.spec.name)
            if check is None:
                continue
            if check.role == "target":
                failing = "" if outcome.passed else f": {_failing_units(outcome)} to fix"
                targets.append(f"{check.name}{failing}")
            elif not outcome.passed:
                self.reporter.note(f"guard {check.name}: {check.why}")
        if targets:
            self.reporter.note(f"targets (must end green): {', '.join(targets)}")

    # the loop -----------------------------------------------------------------------------
    def _start_git(self, loop_id: str) -> GitState | None:
        git = self.parts.workspace.start_loop(loop_id, allow_dirty=self.settings.allow_dirty)
        if git is None:
            self.reporter.note("not a git repository (or --no-git): no commits, no rollback")
            return None
        if note := git.user_changes_note():  # issue 15: --allow-dirty keeps your index
            self.reporter.note(note)
        if self.workdir != self.store.root:  # a linked worktree: `resume` must find it again
            git = replace(git, worktree=str(self.workdir))
        return git

    def _run(self, state: LoopState, *, resumed: bool) -> LoopResult:
        state.status, state.stop_reason = "running", None
        state.pid, state.host = os.getpid(), socket.gethostname()
        self.store.write_state(state)
        self.reporter.loop_started(state, resumed)
        started = time.monotonic() - state.usage.wall_seconds
        policy = self.policy()
        try:
            while True:
                self.store.check_abort(state.loop_id)  # `ralph abort` from where no signal reaches
                spend = self._spend(state, started)
                exhausted = policy.budget_exhausted(spend)
                if exhausted:
                    return self._stop(state, Decision("budget", exhausted), started)
                record = self._iteration(state, state.iteration + 1, policy, started)
                decision = policy.decide(
                    self._attempts(), self._baseline(state), self._spend(state, started)
                )
                self.reporter.iteration_done(record, decision)
                if decision.action == "degraded":  # Self-Refine keeps the best iteration
                    self._maybe_rollback(state)
                if decision.stop:
                    return self._stop(state, decision, started)
                self._maybe_rollback(state)
        except KeyboardInterrupt:
            aborted = self.store.abort_requested(state.loop_id)  # `ralph abort` (issue 15)
            state.status, state.stop_reason = (
                ("aborted", "aborted by user") if aborted else ("paused", "interrupted")
            )
            state.usage = replace(state.usage, wall_seconds=round(time.monotonic() - started, 3))
            self.store.write_state(state)
            if aborted:
                return self._finish(state, "aborted", ABORTED_MESSAGE)
            result = self._result(state, 130, "interrupted: `ralph resume` continues the loop")
            self.reporter.loop_finished(result)
            return result
        except BudgetExceeded as exc:
            return self._stop(state, Decision("budget", exc.message), started)
        except RalphError as exc:
            # e.g. a provider failing for good, a full disk: out of time is a budget stop;
            # otherwise the loop is saved (not left "running") and `ralph resume` continues it
            exhausted = policy.budget_exhausted(self._spend(state, started))
            if exhausted:
                reason = f"{exhausted} ({exc.message})"
                return self._stop(state, Decision("budget", reason), started)
            state.status, state.stop_reason = "paused", f"error: {exc.message}"[:500]
            state.usage = replace(state.usage, wall_seconds=round(time.monotonic() - started, 3))
            with contextlib.suppress(RalphError):  # the disk may be what failed
                self.store.write_state(state)
            raise

    def _iteration(
        self, state: LoopState, iteration: int, policy: StopPolicy, started: float
    ) -> IterationRecord:
        from ralph.actors.base import ActorContext
        from ralph.loop import prompts
        from ralph.loop import window as memory

        s = self.settings
        last = self.records[-1] if self.records else None
        attempts, baseline = self._attempts(), self._baseline(state)
        verification = last.evaluator_output.verification_type if last else "combined"
        omega = memory.omega_for(verification, s.omega)
        current_errors = list(last.evaluator_output.errors or []) if last else []
        window = memory.select_window(
            self.records,
            omega=omega,
            policy=s.window_policy,
            token_budget=s.memory_tokens,
            current_fingerprint=last.ralph.error_fingerprint if last and last.ralph else None,
            current_errors=current_errors,
        )
        lessons = self._lessons(state.loop_id, self._last_evaluation)
        pivot = policy.should_pivot(attempts, baseline)
        reverted, self._reverted = self._reverted, None
        self.reporter.phase(iteration, "prompt")
        context = prompts.actor_prompt_context(
            task=state.task,
            iteration=iteration,
            max_iterations=s.max_iterations,
            evaluation=self._last_evaluation,
            reflections=window,
            lessons=[lesson.view() for lesson in lessons],
            pivot=pivot,
            unmatched_edits=self._unmatched,
            reverted=reverted,
        )
        prompt = render("actor", context, project_root=self.store.root)
        artifacts = self.store.artifacts_dir(state.loop_id, iteration)
        atomic_write_text(artifacts / "prompt.md", prompt, durable=False)

        durations: dict[str, int] = {}
        self.reporter.phase(iteration, "act")
        self.parts.workspace.begin_iteration()
        clock = time.monotonic()
        ctx = ActorContext(
            loop_id=state.loop_id,
            iteration=iteration,
            workdir=self.workdir,
            artifacts_dir=artifacts,
            iteration_timeout=self._attempt_timeout(started),
            idle_timeout=s.idle_timeout,
            on_output=self.reporter.output,
        )
        acted = self.parts.actor.act(prompt, ctx)
        durations["actor"] = _ms(clock)
        self._restore_memory(state)
        self._unmatched = list(acted.unmatched_edits)
        changes = self.parts.workspace.changes()

        self.reporter.phase(iteration, "evaluate")
        clock = time.monotonic()
        evaluation = self.parts.evaluator.evaluate(
            self.workdir, baseline=self.baseline, on_output=self.reporter.output
        )
        durations["evaluate"] = _ms(clock)
        self.reporter.evaluated(iteration, evaluation)
        self._write_check_logs(artifacts, evaluation)

        actor_output = ActorOutput(
            actions=changes.actions(),
            rationale=_rationale(acted),
            files_modified=changes.paths() or None,
            total_changes=changes.total(),
        )
        from ralph.actors import trace

        checks = [o.spec.command for o in evaluation.outcomes]
        traced, steps = trace.store_attempt(
            artifacts, acted, self.parts.actor.name, checks, self.workdir
        )
        reflection, source, flags, reflect_usage = self._reflect(
            state, iteration, actor_output, evaluation, changes.summary(), durations, steps
        )
        record = self._record(
            state, iteration, actor_output, evaluation, reflection, window, omega, prompt
        )
        record.ralph = RalphExtension(
            reflection_source=source,
            quality_flags=flags,
            usage=Usage(
                actor_tokens_in=acted.tokens_in,
                actor_tokens_out=acted.tokens_out,
                reflector_tokens_in=reflect_usage[0],
                reflector_tokens_out=reflect_usage[1],
                cost_usd=_sum_known(acted.cost_usd, reflect_usage[2]),
            ),
            duration_ms=durations,
            prompt_sha256=hashlib.sha256(prompt.encode()).hexdigest(),
            lessons_used=[lesson.id for lesson in lessons],
            error_fingerprint=evaluation.fingerprint,
            trace=traced,
            **_judgement_fields(evaluation),
        )
        if acted.timed_out:
            note = f"actor stopped at its {acted.timed_out} timeout"
            record.notes = note
            self.reporter.note(f"iteration {iteration}: {note}")
        # issue 15: what ralph ignored in the agent's output; the agent's own git commands undone
        annotate(record, acted.notes)
        annotate(record, changes.git_moves, flag="actor_moved_git")
        for note in [*acted.notes, *changes.git_moves]:
            self.reporter.note(f"iteration {iteration}: {note}")
        # The commit first, so the record is written once and names it; killed in between,
        # `resume` redoes the iteration (the state does not count it yet).
        sha = self.parts.workspace.commit_iteration(
            f"ralph: {state.loop_id} iteration {iteration} reward {evaluation.reward:.2f}"
        )
        if sha:
            record.ralph.git_commit = sha
            if state.git is not None:
                state.git = state.git.committed(iteration, sha)
        self.store.write_record(record)
        self.records.append(record)
        self._last_evaluation = evaluation
        self._account(state, record, started)
        if state.best_iteration == iteration:  # a rollback may return to this tree
            self._kept = {k: v for k, v in self._kept.items() if k == 0}
            self._kept[iteration] = evaluation
        return record

    def _lessons(self, loop_id: str, last: Evaluation | None) -> list[Lesson]:
        """Lessons of other loops' failures like the last evaluation's (`--lessons`, 0 = none).

        Learning from other loops is a bonus: a memory it cannot read costs a note, not the loop.
        The first attempt gets them too: the last evaluation is then the baseline.
        """
        if self.settings.lessons < 1 or last is None or last.passed:
            return []
        if all(other == loop_id for other in self.store.loop_ids()):
            return []  # no other loop to learn from: skip opening the index
        import sqlite3

        from ralph.memory.retrieval import retrieve_lessons

        try:
            return retrieve_lessons(
                self.store,
                exclude_loop=loop_id,
                current_errors=last.relevant_errors(),
                fingerprint=last.fingerprint,
                limit=self.settings.lessons,
            )
        except (RalphError, OSError, sqlite3.Error) as exc:
            self.reporter.note(f"lessons from other loops skipped: {exc}")
            return []

    def _reflect(
        self,
        state: LoopState,
        iteration: int,
        actor_output: ActorOutput,
        evaluation: Evaluation,
        diff_summary: str,
        durations: dict[str, int],
        trajectory: str = "",
    ) -> tuple[SelfReflection, Any, list[str], tuple[int | None, int | None, float | None]]:
        from ralph.reflection.heuristic import success_reflection
        from ralph.reflection.quality import quality_flags

        if evaluation.passed:
            reflection = success_reflection(evaluation, actor_output)
            return reflection, "success", [], (None, None, None)
        self.reporter.phase(iteration, "reflect")
        clock = time.monotonic()
        outcome = self.parts.reflector.reflect(
            task=state.task,
            iteration=iteration,
            actor_output=actor_output,
            evaluation=evaluation,
            earlier=self.records,
            diff_summary=diff_summary,
            trajectory=trajectory,
        )
        durations["reflect"] = _ms(clock)
        if outcome.error:
            self.reporter.note(f"reflector: {outcome.error}; used a heuristic reflection")
        flags = outcome.quality_flags or quality_flags(outcome.reflection, evaluation)
        usage = (outcome.tokens_in, outcome.tokens_out, outcome.cost_usd)
        return outcome.reflection, outcome.source, flags, usage

    def _record(
        self,
        state: LoopState,
        iteration: int,
        actor_output: ActorOutput,
        evaluation: Evaluation,
        reflection: SelfReflection,
        window: list[IterationRecord],
        omega: int,
        prompt: str,
    ) -> IterationRecord:
        previous_reward, previous_errors = self._previous(state)
        in_context = [r.iteration for r in window]
        generated = sum(1 for r in self.records if not r.evaluator_output.passed)
        return IterationRecord(
            loop_id=state.loop_id,
            iteration=iteration,
            timestamp=utc_now(),
            task_description=state.task,
            actor_output=actor_output,
            evaluator_output=evaluation.output,
            self_reflection=reflection,
            memory_metadata=MemoryMetadata(
                # aiwg's schema wants 1-10: Ω = 0 (no memory) shows as capacity 1 with
                # nothing in context
                omega_capacity=max(omega, 1),
                current_memory_size=len(window),
                reflections_in_context=in_context,
                window_policy=self.settings.window_policy,  # type: ignore[arg-type]
                total_reflections_generated=generated + (0 if evaluation.passed else 1),
            ),
            context_injected=bool(window),
            previous_reflections_used=in_context,
            performance_delta=PerformanceDelta(
                reward_change=round(evaluation.reward - previous_reward, 4),
                error_count_change=evaluation.error_count - previous_errors,
                is_improvement=evaluation.reward > previous_reward,
            ),
        )

    # bookkeeping --------------------------------------------------------------------------
    def _previous(self, state: LoopState) -> tuple[float, int]:
        if self.records:
            last = self.records[-1]
            return last.reward, len(last.evaluator_output.errors or [])
        if state.baseline is None:
            return 0.0, 0
        return state.baseline.reward, state.baseline.error_count

    def _attempts(self) -> list[Attempt]:
        return [
            Attempt(
                r.iteration,
                r.reward,
                r.evaluator_output.passed,
                (r.ralph.error_fingerprint or "") if r.ralph else "",
            )
            for r in self.records
        ]

    @staticmethod
    def _baseline(state: LoopState) -> Attempt | None:
        b = state.baseline
        return None if b is None else Attempt(0, b.reward, b.passed, b.error_fingerprint)

    def _account(self, state: LoopState, record: IterationRecord, started: float) -> None:
        state.count(record)
        state.usage = replace(state.usage, wall_seconds=round(time.monotonic() - started, 3))
        self.store.write_state(state)

    def _spend(self, state: LoopState, started: float) -> Spend:
        return Spend(time.monotonic() - started, state.usage.tokens, state.usage.cost_usd)

    def _attempt_timeout(self, started: float) -> float | None:
        """The attempt's wall limit: --iteration-timeout, cut to what --timeout has left."""
        limits = [t for t in (self.settings.iteration_timeout,) if t is not None]
        if self.settings.timeout is not None:
            left = self.settings.timeout - (time.monotonic() - started)
            if left <= 0:
                raise BudgetExceeded(f"time budget of {self.settings.timeout:.0f}s used")
            limits.append(left)
        return min(limits) if limits else None

    def _maybe_rollback(self, state: LoopState) -> None:
        """After an attempt worse than the best tree so far (the baseline's included), or one
        that broke a guard while gaining nothing, start the next attempt from the best tree."""
        if self.settings.no_rollback or state.git is None or not self.records:
            return
        last = self.records[-1]
        best, best_reward = state.best_iteration, state.best_reward
        base_reward = state.baseline.reward if state.baseline else 0.0
        if best is None or best_reward is None or base_reward >= best_reward:
            best, best_reward = 0, base_reward
        regressed = bool(last.ralph and last.ralph.regressions)
        if best == last.iteration or not (
            last.reward < best_reward or (regressed and last.reward <= best_reward)
        ):
            return
        commit = state.git.commit_of(best)
        if not commit:
            return
        self.parts.workspace.restore(commit)
        where = "the starting point" if best == 0 else f"iteration {best}"
        why = "broke what worked before" if regressed else f"fell to {last.reward:.2f}"
        self.reporter.note(
            f"iteration {last.iteration} {why}: restored the code of {where} "
            f"(reward {best_reward:.2f})"
        )
        from ralph.loop.prompts import reverted_view

        self._reverted = reverted_view(last.iteration, where, self._last_evaluation)
        kept = self._kept.get(best)
        if kept is None:  # after a resume: evaluate the restored tree, so the prompt is true
            self.reporter.phase(last.iteration, "evaluate")
            kept = self.parts.evaluator.evaluate(
                self.workdir, baseline=self.baseline, on_output=self.reporter.output
            )
            self._kept[best] = kept
        self._last_evaluation = kept

    def _restore_memory(self, state: LoopState) -> None:
        """The actor can write anywhere in the tree: put ralph's records and state back.

        A stat per record; a file is read only when it is not as ralph last saw it, and once
        found intact it is remembered, so a resumed loop does not re-read its old records on
        every iteration.
        """
        changed = []
        for record in self.records:
            path = self._record_paths.get(record.iteration)
            if path is None:
                path = self.store.record_path(record.loop_id, record.iteration)
                self._record_paths[record.iteration] = path
            if self.store.untouched(path):
                continue
            try:
                on_disk = json.loads(path.read_text("utf-8"))
            except (OSError, ValueError):
                on_disk = None
            if _same_but_obsolete(on_disk, record):
                self.store._remember(path)  # intact: a stat is enough next time
                continue
            self.store.write_record(record)
            changed.append(path.name)
        self.store.ensure()
        if not self.store.untouched(self.store.state_path(state.loop_id)):
            self.store.write_state(state)
        if changed:
            names = ", ".join(changed)
            self.reporter.note(f"the actor changed ralph's records ({names}): restored them")

    def _write_check_logs(self, artifacts: Path, evaluation: Evaluation) -> None:
        logs: dict[str, str] = getattr(self.parts.evaluator, "last_logs", {}) or {}
        for outcome in evaluation.outcomes:
            text = logs.get(outcome.spec.name)
            if text is None:
                text = (outcome.result.stdout or "") + (outcome.result.stderr or "")
            safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in outcome.spec.name)
            atomic_write_text(artifacts / f"check-{safe}.log", text, durable=False)

    def _stop(self, state: LoopState, decision: Decision, started: float) -> LoopResult:
        state.status = FINAL_STATUS[decision.action]
        state.stop_reason = decision.action
        state.usage = replace(state.usage, wall_seconds=round(time.monotonic() - started, 3))
        self.store.write_state(state)
        return self._finish(state, decision.action, decision.reason)

    def _finish(self, state: LoopState, reason: str, message: str) -> LoopResult:
        result = self._result(state, EXIT_CODES[reason], message)
        self.reporter.loop_finished(result)
        return result

    def _result(self, state: LoopState, code: int, message: str) -> LoopResult:
        baseline = state.baseline
        last = self._last_evaluation
        return LoopResult(
            targets=baseline.named("target") if baseline else [],
            guards=baseline.named("guard") if baseline else [],
            regressions=last.counts()["regressions"] if last is not None else 0,
            loop_id=state.loop_id,
            status=state.status,
            stop_reason=state.stop_reason or "",
            exit_code=code,
            iterations=state.iteration,
            best_iteration=state.best_iteration,
            best_reward=state.best_reward,
            reward_history=list(state.reward_history),
            usage=state.usage.to_json(),
            reflections_dir=str(self.store.reflections_dir(state.loop_id)),
            message=message,
        )


def _failing_units(outcome: Any) -> str:
    """`3 failing tests`, `12 findings` or `failing`: what a target must fix, counted."""
    if outcome.spec.parser == "pytest":
        n = sum(1 for e in outcome.errors if e.type == "test_failure") or outcome.error_count
        return f"{n} failing test{'s' if n != 1 else ''}"
    n = outcome.error_count
    return f"{n} finding{'s' if n != 1 else ''}" if n else "failing"


def _green_message(evaluation: Evaluation) -> str:
    """Why a loop ends before it starts; names the guards that fail, which are not the task."""
    failing = [o.spec.name for o in evaluation.outcomes if not o.passed]
    if not failing:
        return "all checks already pass"
    return (
        f"no target fails: {', '.join(failing)} failed before the loop and only must not get "
        "worse; name the check to work on with --check NAME or --test CMD, or use --strict"
    )


def _judgement_fields(evaluation: Evaluation) -> dict[str, Any]:
    """The record's share of the judgement: roles and counts, when there is a baseline."""
    if evaluation.baseline is None:
        return {}
    return {"check_roles": evaluation.roles(), **evaluation.counts()}


def _same_but_obsolete(on_disk: Any, record: IterationRecord) -> bool:
    """Whether the file holds `record`; the `obsolete` mark a user may set meanwhile (`ralph
    reflections obsolete`) is taken over from the file rather than undone."""
    if not isinstance(on_disk, dict) or not isinstance(on_disk.get("ralph"), dict):
        return bool(on_disk == record.to_json())
    mark = on_disk["ralph"].pop("obsolete", None)
    expected = record.to_json()
    if isinstance(expected.get("ralph"), dict):
        expected["ralph"].pop("obsolete", None)
    if on_disk != expected:
        return False
    if record.ralph is not None:
        record.ralph.obsolete = mark
    return True


def _ms(since: float) -> int:
    return int((time.monotonic() - since) * 1000)


def _sum_known(*costs: float | None) -> float | None:
    known = [c for c in costs if c is not None]
    return round(sum(known), 6) if known else None


def _rationale(acted: ActorResult) -> str:
    if acted.summary:
        return acted.summary.strip()[:2000]
    status = "timed out" if acted.timed_out else f"exited {acted.exit_code}"
    return f"The actor {status} after {acted.duration_ms} ms without a summary of its own."
