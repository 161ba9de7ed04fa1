"""LoopRunner: the Reflexion loop as a state machine (docs/architecture.md, "The cycle").

preflight -> baseline -> (compose -> act -> evaluate -> reflect -> remember -> decide)*

Each step returns one typed value (iteration.py); `remember` commits the attempt, writes its
record, then the state, so Ctrl-C or kill -9 at any point loses at most the attempt in progress.
The runner decides and emits typed events (lifecycle.py); hooks keep the books: the state
file (one writer), the records, the reporter and the budgets. It knows nothing about rich and
nothing about how a check, an actor or git works (the seams in `Parts`, which tests replace
with the in-process fakes of `ralph.testing`).
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ralph.errors import BudgetExceeded, PreflightError, RalphError
from ralph.evaluators.base import Baseline, BaselineRules, EvaluationRequest
from ralph.evaluators.describe import harm_text
from ralph.glyphs import plural
from ralph.loop import holdout, steps
from ralph.loop.announce import baseline_notes, green_message
from ralph.loop.guard import MemoryGuard
from ralph.loop.iteration import Iteration, Prompt, make_record, name_commit
from ralph.loop.lifecycle import (
    AttemptStarting,
    BudgetHook,
    Hook,
    IterationDone,
    IterationRemembered,
    LoopFinished,
    LoopStarted,
    RecordWriter,
    ReportHook,
    StateChanged,
    StateWriter,
    emit,
)
from ralph.loop.limits import Waiter
from ralph.loop.policy import (
    Attempt,
    Decision,
    Spend,
    StopPolicy,
    attempts,
    baseline_attempt,
    refine_applies,
    stop_reason,
)
from ralph.loop.prompts import reverted_view
from ralph.loop.result import (
    ABORTED_MESSAGE,
    EXIT_CODES,
    FINAL_STATUS,
    INTERRUPTED_MESSAGE,
    LoopResult,
)
from ralph.loop.rollback import judge
from ralph.loop.steps import Parts, Reporter
from ralph.loop.window import window_policy
from ralph.memory.state import LoopState
from ralph.memory.store import MemoryStore
from ralph.records import IterationRecord
from ralph.usage_limits import UsageLimited
from ralph.workspace.base import GitState

if TYPE_CHECKING:
    from ralph.config import Settings
    from ralph.evaluators.base import Evaluation

# the seam: what other packages use
__all__ = ["LoopRunner"]


@dataclass
class LoopRunner:
    settings: Settings
    store: MemoryStore
    parts: Parts
    reporter: Reporter
    records: list[IterationRecord] = field(default_factory=list)
    # the lifecycle's hooks, after the runner's own (records, state, reporter, budgets)
    hooks: list[Hook] = field(default_factory=list)
    waiter: Waiter = field(default_factory=Waiter)  # a usage limit waited out
    baseline: Baseline | None = field(default=None, init=False)
    _last_evaluation: Evaluation | None = field(default=None, init=False)
    # evaluations of the trees a rollback may return to: 0 (the baseline) and the best iteration
    _kept: dict[int, Evaluation] = field(default_factory=dict, init=False)
    _reverted: dict[str, Any] | None = field(default=None, init=False)
    _unmatched: list[str] = field(default_factory=list, init=False)
    _attempts: list[Attempt] = field(default_factory=list, init=False)  # `records` for the policy
    _guard: MemoryGuard = field(init=False)
    _policy: StopPolicy | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self._guard = MemoryGuard(self.store, self.workdir)
        own: list[Hook] = [
            RecordWriter(self.store),  # a record before the state that counts it
            StateWriter(self.store),
            ReportHook(self.reporter),
            BudgetHook(self._budget_exhausted),
        ]
        self.hooks = own + self.hooks

    @property
    def workdir(self) -> Path:
        return self.parts.workspace.root

    def policy(self) -> StopPolicy:
        s = self.settings
        judges = {c.name for c in s.all_checks() if c.parser == "judge"}
        refine = refine_applies(self.baseline.named("target") if self.baseline else [], judges)
        return StopPolicy(
            s.max_iterations, s.patience, s.budget_usd, s.max_tokens, s.timeout, refine
        )

    # entry points -------------------------------------------------------------------------
    def start(self, task: str, loop_id: str) -> LoopResult:
        self.parts.evaluator.preflight()  # a judge's model too
        self.parts.actor.preflight()
        state = LoopState(loop_id=loop_id, task=task, settings=self.settings)
        with self.store.lock(loop_id, self.workdir):
            # a dirty tree is refused before the checks run
            self.parts.workspace.preflight_loop(loop_id, allow_dirty=self.settings.allow_dirty)
            self.store.ensure()
            self._claim(state)  # saved before the baseline starts
            self.reporter.phase(0, "baseline")
            rules = BaselineRules(self.settings.named(), self.settings.success)
            request = EvaluationRequest(
                self.workdir, establish=rules, on_output=self.reporter.output
            )
            evaluation = self.parts.evaluator.handle(request)
            if evaluation.baseline is None:
                raise RalphError("the evaluator judged the baseline without keeping it")
            self.baseline = evaluation.baseline
            state.baseline = self.baseline.summary()
            state.count_calls(evaluation.calls())  # a judge's on a dirty tree: no record's
            self.store.write_baseline(loop_id, self.baseline.to_json())
            self._last_evaluation = evaluation  # the first prompt names what fails, file:line
            self._kept = {0: evaluation}
            self.reporter.evaluated(0, evaluation)
            for note in baseline_notes(self.baseline, evaluation):
                self.reporter.note(note)
            if evaluation.passed:
                state.status, state.stop_reason = "completed", "already_green"
                self._save(state)
                return self._finish(state, "already_green", green_message(evaluation))
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
        if state.baseline is None:  # killed during its baseline: begin again
            with self.store.lock(state.loop_id, self.workdir):
                self._stop_orphans(state)
            return self.start(state.task, state.loop_id)
        self.parts.evaluator.preflight()  # a judge's model too
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
            self.reporter.phase(0, "baseline")
            self._last_evaluation = self._evaluate()
            state.count_calls(self._last_evaluation.calls())  # a judge's again: no record's
            self.reporter.evaluated(0, self._last_evaluation)
            return self._run(state, resumed=True)

    def _claim(self, state: LoopState) -> None:
        """Mark `state` running in this process and save it, before anything (the baseline's
        checks first) starts a process `resume` may have to stop."""
        state.status, state.stop_reason = "running", None
        state.pid, state.host = os.getpid(), socket.gethostname()
        if self.workdir != self.store.root and not state.git:
            state.git = GitState(worktree=str(self.workdir))  # so `resume` finds it
        self._save(state)

    def _stop_orphans(self, state: LoopState) -> None:
        """What a crashed (kill -9) run had started must not edit the tree under this one."""
        from ralph.process import kill_orphans

        if state.status != "running" or not state.pid:  # with the lock held: it crashed
            return
        if stopped := kill_orphans(state.pid):
            self.reporter.note(
                f"stopped {plural(len(stopped), 'process group')} "
                f"the crashed run (pid {state.pid}) left"
            )

    def _start_git(self, loop_id: str) -> GitState | None:
        git = self.parts.workspace.start_loop(loop_id, allow_dirty=self.settings.allow_dirty)
        if git is None:
            self.reporter.note("not a git repository (or --no-git): no commits, no rollback")
            return None
        if note := git.user_changes_note():  # --allow-dirty keeps your index
            self.reporter.note(note)
        if self.workdir != self.store.root:  # a linked worktree: `resume` must find it again
            git = replace(git, worktree=str(self.workdir))
        return git

    # the loop -----------------------------------------------------------------------------
    def _run(self, state: LoopState, *, resumed: bool) -> LoopResult:
        self._claim(state)
        emit(self.hooks, LoopStarted(state, resumed))
        started = time.monotonic() - state.usage.wall_seconds
        policy = self._policy = self.policy()
        try:
            while True:
                self.store.check_abort(state.loop_id)  # `ralph abort` from where no signal reaches
                emit(self.hooks, AttemptStarting(state, self._spend(state, started)))
                try:  # a usage limit: the attempt does not count (loop/limits.py)
                    self.waiter.ahead(self.store, self.parts.actor.name)
                    record = self._iteration(state, state.iteration + 1, policy, started)
                except UsageLimited as exc:
                    if paused := self.waiter.wait_out(self, state, exc.limit, started):
                        return self._stop(state, paused, started)
                    continue
                history = self._history()
                spend = self._spend(state, started)
                decision = policy.decide(history, baseline_attempt(state.baseline), spend)
                decision = holdout.second_look(self.parts, decision, self.reporter)
                emit(self.hooks, IterationDone(record, decision))
                if decision.action == "degraded":  # Self-Refine keeps the best iteration
                    self._rollback(state)
                if decision.stop:
                    return self._stop(state, decision, started)
                self._rollback(state)
        except KeyboardInterrupt:
            aborted = self.store.abort_requested(state.loop_id)  # `ralph abort`
            state.status, state.stop_reason = (
                ("aborted", "aborted by user") if aborted else ("paused", "interrupted")
            )
            self._save(state, started)
            if aborted:
                return self._finish(state, "aborted", ABORTED_MESSAGE)
            return self._finish(state, "interrupted", INTERRUPTED_MESSAGE)
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
            with contextlib.suppress(RalphError):  # the disk may be what failed
                self._save(state, started)
            raise

    def _iteration(
        self, state: LoopState, number: int, policy: StopPolicy, started: float
    ) -> IterationRecord:
        prompt = self._compose(state, number, policy)
        acted = steps.act(
            self.parts,
            self.reporter,
            prompt,
            loop_id=state.loop_id,
            iteration_timeout=self._attempt_timeout(started),
            idle_timeout=self.settings.idle_timeout,
        )
        self._guard_memory(state)
        self._unmatched = list(acted.result.unmatched_edits)
        if not self.settings.allow_test_edits:  # the tests as the baseline ran them
            acted = steps.protect(self.parts, self.reporter, prompt, acted, self.baseline)
        evaluated = steps.evaluate(self.parts, self.reporter, prompt, self.baseline)
        reflected = steps.reflect(
            self.parts,
            self.reporter,
            prompt,
            acted,
            evaluated.evaluation,
            task=state.task,
            earlier=self.records,
        )
        return self._remember(state, Iteration(prompt, acted, evaluated, reflected), started)

    def _compose(self, state: LoopState, number: int, policy: StopPolicy) -> Prompt:
        reflections = steps.window(self.records, self.settings)
        lessons = steps.lessons(
            self.store,
            state.loop_id,
            self._last_evaluation,
            self.settings.lessons,
            self.reporter.note,
            self.settings.lessons_before,
            retire_after=self.settings.lesson_retire_after,
        )
        reverted, self._reverted = self._reverted, None
        last = self.records[-1] if self.records else None
        self.reporter.phase(number, "prompt")
        return steps.prompt(
            self.store,
            state,
            number,
            max_iterations=self.settings.max_iterations,
            evaluation=self._last_evaluation,
            reflections=reflections,
            lessons=lessons,
            pivot=policy.should_pivot(self._history(), baseline_attempt(state.baseline)),
            unmatched_edits=self._unmatched,
            reverted=reverted,
            protected_edits=last.ralph.protected_test_edits if last and last.ralph else None,
            memory_tools=self.parts.memory_tools,
            escalate=self.settings.escalate,
        )

    def _remember(self, state: LoopState, it: Iteration, started: float) -> IterationRecord:
        """Commit the attempt, then write its record, then the state that counts it."""
        from ralph.workspace.commits import iteration_message

        for note in it.notes():
            self.reporter.note(f"iteration {it.number}: {note}")
        record = make_record(
            it,
            loop_id=state.loop_id,
            task=state.task,
            earlier=self.records,
            baseline=state.baseline,
            window_policy=window_policy(self.settings.window_policy),
        )
        # The commit first, so the record is written once and names it; killed in between,
        # `resume` redoes the iteration (the state does not count it yet).
        message = iteration_message(
            record,
            holding=[o.spec.name for o in it.evaluation.failing()],
            harm=harm_text(it.evaluation),
        )
        sha = self.parts.workspace.commit_iteration(message)
        name_commit(record, sha, on_branch=state.git is not None)
        commit = sha or self.parts.workspace.current_commit()  # holds this iteration's tree
        emit(self.hooks, IterationRemembered(record))
        self.records.append(record)
        self._last_evaluation = it.evaluation
        if commit and state.git is not None:
            state.git = state.git.committed(it.number, commit)
        known = state.iteration == 0 or state.usage.cost_usd is not None
        state.count(record)
        self._save(state, started)
        if known and state.usage.cost_usd is None and self.settings.budget_usd is not None:
            self.reporter.note(
                f"iteration {it.number}: cost unknown: --budget-usd cannot hold from here"
            )
        if state.best_iteration == it.number:  # a rollback may return to this tree
            self._kept = {k: v for k, v in self._kept.items() if k == 0}
            self._kept[it.number] = it.evaluation
        return record

    # bookkeeping --------------------------------------------------------------------------
    def _history(self) -> list[Attempt]:
        """`records` as the policy sees them, extended as they grow, not rebuilt each time."""
        if len(self._attempts) > len(self.records):
            self._attempts = []
        self._attempts.extend(attempts(self.records[len(self._attempts) :]))
        return self._attempts

    def _save(self, state: LoopState, started: float | None = None) -> None:
        """The state changed: the hooks save it (lifecycle.StateWriter); `started`: its clock."""
        emit(self.hooks, StateChanged(state, started))

    def _budget_exhausted(self, spend: Spend) -> str | None:
        return self._policy.budget_exhausted(spend) if self._policy is not None else None

    def _guard_memory(self, state: LoopState) -> None:
        """The actor can write anywhere in the tree: put ralph's records and state back."""
        changed = self._guard.restore(self.records)
        for note in self._guard.settings():  # never obeyed: loop/planted.py
            self.reporter.note(f"iteration {state.iteration + 1}: {note}")
        if self._guard.state_touched(state.loop_id):
            self._save(state)
        if changed:
            names = ", ".join(changed)
            self.reporter.note(f"the actor changed ralph's records ({names}): restored them")

    def _evaluate(self) -> Evaluation:
        """The tree as it is, judged against the loop's baseline."""
        request = EvaluationRequest(
            self.workdir, baseline=self.baseline, on_output=self.reporter.output
        )
        return self.parts.evaluator.handle(request)

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

    def _rollback(self, state: LoopState) -> None:
        """Start the next attempt from the best tree when the last one fell below it."""
        if not self.records:
            return
        worse = judge(self.records[-1], state, self.records, no_rollback=self.settings.no_rollback)
        if worse is None:
            return
        rollback = worse.rollback
        if rollback is None:  # kept, and why: an attempt that broke something is never silent
            self.reporter.note(worse.text)
            return
        self.parts.workspace.restore(rollback.commit)
        self.reporter.note(rollback.note)
        self._reverted = reverted_view(
            rollback.last, rollback.where, self._last_evaluation, self.records[-1]
        )
        kept = self._kept.get(rollback.to)
        if kept is None:  # after a resume: evaluate the restored tree, so the prompt is true
            self.reporter.phase(rollback.last, "evaluate")
            kept = self._evaluate()
            state.count_calls(kept.calls())
            self._kept[rollback.to] = kept
        self._last_evaluation = kept

    def _stop(self, state: LoopState, decision: Decision, started: float) -> LoopResult:
        state.status = FINAL_STATUS[decision.action]
        state.stop_reason = stop_reason(decision)
        self._save(state, started)
        return self._finish(state, decision.action, decision.reason)

    def _finish(self, state: LoopState, reason: str, message: str) -> LoopResult:
        last = self._last_evaluation
        from ralph.loop.handoff import let_go

        given = let_go(self.parts.workspace, state)  # --allow-dirty: the user's tree back
        result = LoopResult.of(
            state,
            EXIT_CODES[reason],
            message,
            reflections_dir=str(self.store.reflections_dir(state.loop_id)),
            regressions=last.counts()["regressions"] if last is not None else 0,
            store=self.store,
            given_back=given,
        )
        emit(self.hooks, LoopFinished(result))
        return result
