"""The evaluator: every configured check in parallel, combined into one verdict and one reward.

Reward (docs/architecture.md, Judging): each check scores in [0, 1]; scores are combined by weights
(tests 0.5, type check 0.3, lint 0.2, shell 0.5 unless configured), renormalised over the
checks present. `passed` means every check passes; nothing else decides completion.
"""

from __future__ import annotations

import re
import shutil
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ralph.config import CheckSpec, Settings
from ralph.errors import ConfigError, PreflightError
from ralph.evaluators.base import (
    Baseline,
    BaselineRules,
    Check,
    CheckOutcome,
    Evaluation,
    EvaluationRequest,
    JudgeContext,
    OutputCallback,
)
from ralph.evaluators.command import CommandCheck, kill_running_checks, make_result, memory_of
from ralph.evaluators.mypy import MypyCheck
from ralph.evaluators.pytest import PytestCheck
from ralph.evaluators.ruff import RuffCheck
from ralph.evaluators.shell import ShellCheck
from ralph.evaluators.tools import DROP_HINT, missing_tool
from ralph.files import AIWG_DIR, CHECKS_PYCACHE, forget_bytecode
from ralph.process import DEFAULT_CAP, ProcessResult
from ralph.records import Diagnostic, EvaluatorOutput, Metrics, VerificationType, known_sum
from ralph.workspace.bytecode import touched_since
from ralph.workspace.fingerprint import TreeChange, TreeGuard

if TYPE_CHECKING:
    from ralph.sandbox import Sandbox


def _judge_check(spec: CheckSpec, **options: Any) -> Check:
    """The LLM judge, imported only where a check is one (`ralph check` starts without it)."""
    from ralph.evaluators.judge import JudgeCheck

    return JudgeCheck(spec, **options)


DEFAULT_WEIGHTS = {"pytest": 0.5, "mypy": 0.3, "ruff": 0.2, "shell": 0.5}
CHECK_CLASSES: dict[str, Callable[..., Check]] = {
    "pytest": PytestCheck,
    "mypy": MypyCheck,
    "ruff": RuffCheck,
    "shell": ShellCheck,
    "judge": _judge_check,
}


def make_check(
    spec: CheckSpec, *, timeout: float | None, cap: int, judging: JudgeContext | None = None
) -> Check:
    """The check for `spec.parser`; `timeout` applies unless the spec sets its own; a judge
    is given what the loop knows (`judging`: None outside a loop)."""
    cls = CHECK_CLASSES.get(spec.parser)
    if cls is None:
        raise ConfigError(
            f"check {spec.name!r}: unknown parser {spec.parser!r}",
            hint=f"use one of: {', '.join(CHECK_CLASSES)}",
        )
    if spec.parser == "judge":
        return cls(spec, timeout=timeout, cap=cap, context=judging)
    return cls(spec, timeout=timeout, cap=cap)


# Python trusts bytecode whose recorded source mtime (whole seconds) and size match: a file
# edited to the same size within the second of the last evaluation's compile is not seen, and
# the checks judge the old code (a fast agent in a fresh worktree: the flaky
# test_worktreeinclude_copies_the_ignored_file_and_the_loop_goes_green). An evaluation that
# starts this soon after the last one ends first forgets the tree's bytecode in ralph's prefix
# (files.bytecode_env); a real agent's attempt takes longer, so the cache stays warm.
STALE_WINDOW = 2.0  # seconds


class CheckSuite:
    """The Evaluator: runs its checks in parallel threads, each in its own process group."""

    def __init__(
        self,
        specs: Sequence[CheckSpec],
        weights: Mapping[str, float] | None = None,
        *,
        check_timeout: float | None = 900.0,
        cap: int = DEFAULT_CAP,
        judging: JudgeContext | None = None,
    ) -> None:
        self.checks: list[Check] = [
            make_check(s, timeout=check_timeout, cap=cap, judging=judging) for s in specs
        ]
        self.weights = dict(weights or {})
        self.tree_guard = TreeGuard()  # one per suite: its stat cache serves every evaluation
        self._last_end: float | None = None  # monotonic: when the last evaluation ended
        self._sealed_ns: int | None = None  # wall clock: the checks' bytecode as they left it

    @classmethod
    def from_settings(cls, settings: Settings, judging: JudgeContext | None = None) -> CheckSuite:
        """The suite the settings name, with their weights, time limit and output cap; its
        judges given `judging` (a loop's task and model)."""
        return cls(
            settings.all_checks(),
            settings.weights,
            check_timeout=settings.check_timeout,
            cap=settings.output_cap,
            judging=judging,
        )

    @classmethod
    def from_checks(
        cls, checks: Sequence[Check], weights: Mapping[str, float] | None = None
    ) -> CheckSuite:
        """A suite over ready-made checks (fakes in tests)."""
        suite = cls([], weights)
        suite.checks = list(checks)
        return suite

    def use_environment(self, variables: Mapping[str, str]) -> None:
        """Run every command check with `variables` over ralph's environment (a worktree loop's
        `PYTHONPATH`: workspace/worktree.import_path)."""
        for check in self.checks:
            if isinstance(check, CommandCheck):
                check.environment = dict(variables)

    def use_sandbox(self, sandbox: Sandbox | None) -> None:
        """Run every command check confined (ralph/sandbox.py); None: as ralph runs."""
        for check in self.checks:
            if isinstance(check, CommandCheck):
                check.sandbox = sandbox

    def preflight(self) -> None:
        if not self.checks:
            raise PreflightError(
                "no checks configured: ralph has nothing to judge the work by",
                hint="pass --test CMD or --check NAME|CMD, or run `ralph init` to detect them",
            )
        names = [c.spec.name for c in self.checks]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ConfigError(
                f"two checks are named {duplicates[0]!r}",
                hint="give each check its own `name:` in .aiwg/ralph/config.yaml",
            )
        for check in self.checks:
            problem = missing_tool(check)
            if problem is not None:
                message, package = problem
                raise PreflightError(message, hint=f"pip install {package} {DROP_HINT}")
        for check in self.checks:  # what else a check needs (a judge: its model)
            check.preflight()

    def handle(self, request: EvaluationRequest) -> Evaluation:
        """The Evaluator's one call: every check on the tree, judged (evaluators/base.py)."""
        baseline = request.baseline
        counts = {n: c.error_count for n, c in baseline.checks.items()} if baseline else {}
        outcomes = self.run_checks(
            request.cwd, counts, on_output=request.on_output, on_done=request.on_done
        )
        if request.establish is not None:
            return self.establish(outcomes, request.establish)
        return self.judge(outcomes, baseline)

    def evaluate(
        self,
        cwd: Path,
        *,
        baseline: Baseline | None = None,
        on_output: OutputCallback | None = None,
        on_done: Callable[[CheckOutcome], None] | None = None,
    ) -> Evaluation:
        """`handle` with the request spelt out: `on_output` receives (check name, output
        chunk) from the worker threads, `on_done` each check's outcome as it finishes."""
        request = EvaluationRequest(cwd, baseline, on_output=on_output, on_done=on_done)
        return self.handle(request)

    def run_checks(
        self,
        cwd: Path,
        baseline_counts: Mapping[str, int] | None = None,
        *,
        on_output: OutputCallback | None = None,
        on_done: Callable[[CheckOutcome], None] | None = None,
        on_started: Callable[[], None] | None = None,
    ) -> list[CheckOutcome]:
        """Every check at once, each in a thread of its own; their outcomes, not yet judged.

        Plain threads, not a pool: `concurrent.futures` (and the logging it imports) would delay
        `ralph check`'s first check (cli/early.py; `python -X importtime` shows it). The wait is
        on an Event, never on `Thread.join`: a Ctrl-C inside a join can mark a running thread as
        stopped (Python 3.11), and the wait for the killed checks would then end too early.

        The tree's fingerprint is taken before and compared after (workspace/fingerprint.py):
        what a check changed is put back, even after a Ctrl-C, and the checks that could have
        changed it report an error naming the files (`blame_writers`)."""
        if not self.checks:
            self.preflight()
        if self._last_end is not None and time.monotonic() - self._last_end < STALE_WINDOW:
            forget_bytecode(memory_of(cwd), cwd, (CHECKS_PYCACHE,))
        pycache = memory_of(cwd) / AIWG_DIR / "tmp" / CHECKS_PYCACHE
        if self._sealed_ns is not None and touched_since(pycache, self._sealed_ns):
            # written between evaluations (an agent without a sandbox): no check trusts it
            shutil.rmtree(pycache, ignore_errors=True)
        counts = baseline_counts or {}
        results: dict[int, CheckOutcome] = {}
        failures: list[BaseException] = []
        left = [len(self.checks)]
        lock = threading.Lock()
        all_done = threading.Event()
        windows: dict[str, tuple[int, int]] = {}  # wall clock, ns: when each check ran
        taken = self.tree_guard.take(cwd)

        def work(index: int, check: Check) -> None:
            started = time.time_ns()
            try:
                baseline = counts.get(check.spec.name)
                results[index] = _run_one(check, cwd, baseline, on_output, on_done)
            except BaseException as error:  # (an `on_done` that raised) the caller's, as a pool's
                failures.append(error)
            finally:
                windows[check.spec.name] = (started, time.time_ns())
                with lock:
                    left[0] -= 1
                    if left[0] == 0:
                        all_done.set()

        workers = [
            threading.Thread(target=work, args=(i, c), name=f"ralph-check-{c.spec.name}")
            for i, c in enumerate(self.checks)
        ]
        try:
            for worker in workers:
                worker.start()
            if on_started is not None:  # the fingerprint taken, the checks under way
                on_started()
            while not all_done.wait(timeout=0.25):  # short waits: a Ctrl-C here is noticed
                pass
        except BaseException:  # stop the tools the workers are waiting on, then re-raise
            kill_running_checks()
            for worker in workers:
                if worker.ident is not None:
                    worker.join()
            if taken is not None:
                taken.verify()  # the tree back as it was, though nobody is left to tell
            raise
        change = taken.verify() if taken is not None else None
        self._last_end = time.monotonic()
        self._sealed_ns = time.time_ns()
        if failures:
            raise failures[0]
        outcomes = [results[i] for i in range(len(self.checks))]
        if change is not None:
            blame_writers(outcomes, change, windows)
        return outcomes

    def evaluate_baseline(
        self,
        cwd: Path,
        *,
        named: Collection[str] = (),
        success: str = "baseline",
        on_output: OutputCallback | None = None,
        on_done: Callable[[CheckOutcome], None] | None = None,
    ) -> Evaluation:
        """The untouched tree: run the checks, give each its role, judge the tree by them."""
        rules = BaselineRules(named, success)
        request = EvaluationRequest(cwd, establish=rules, on_output=on_output, on_done=on_done)
        return self.handle(request)

    def establish(self, outcomes: Sequence[CheckOutcome], rules: BaselineRules) -> Evaluation:
        """The untouched tree's outcomes: each check's role, and the tree judged by them."""
        from ralph.evaluators.judging import assign_roles, make_baseline

        roles = assign_roles(
            [c.spec for c in self.checks], outcomes, named=set(rules.named), success=rules.success
        )
        baseline = make_baseline(outcomes, roles, rules.success)
        judged = self.judge(outcomes, baseline)
        judged.baseline = replace(
            baseline,
            passed=judged.passed,
            reward=judged.reward,
            error_count=judged.error_count,
            fingerprint=judged.fingerprint,
        )
        return judged

    def judge(self, outcomes: Sequence[CheckOutcome], baseline: Baseline | None) -> Evaluation:
        """Each outcome's verdict against `baseline`, and the whole attempt's (see judging)."""
        from ralph.evaluators.judging import combine, judge_check

        pairs = []
        for o in outcomes:
            o.verdict = judge_check(o, baseline.checks.get(o.spec.name) if baseline else None)
            pairs.append((check_weight(o.spec, self.weights), o.verdict))
        passed, reward = combine(pairs)
        output = EvaluatorOutput(
            passed=passed,
            verification_type=verification_type([o.spec for o in outcomes]),
            results=[o.result for o in outcomes],
            errors=[e for o in outcomes for e in o.errors],
            reward_signal=reward,
            metrics=merge_metrics([o.metrics for o in outcomes]),
        )
        evaluation = Evaluation(output, list(outcomes), "", baseline)
        evaluation.fingerprint = fingerprint(outcomes, evaluation.relevant_errors())
        return evaluation


def _run_one(
    check: Check,
    cwd: Path,
    baseline_errors: int | None,
    on_output: OutputCallback | None,
    on_done: Callable[[CheckOutcome], None] | None = None,
) -> CheckOutcome:
    """One check; a bug in reading its output becomes that check's error, not a dead loop."""
    try:
        outcome = check.run(cwd, baseline_errors=baseline_errors, on_output=on_output)
    except Exception as exc:
        res = ProcessResult(exit_code=None, stdout="", stderr="", duration_ms=0)
        diagnostic = Diagnostic(
            type="runtime_error",
            message=f"ralph could not run check {check.spec.name!r}: {type(exc).__name__}: {exc}",
            severity="error",
        )
        outcome = CheckOutcome(check.spec, make_result(check.spec, "error", res), [diagnostic])
    if on_done is not None:
        on_done(outcome)
    return outcome


# A file's mtime is the kernel's coarse clock: up to a tick (1-10 ms) behind the time of the
# write, never after it. So a write inside a check's run has an mtime in [start - tick, end].
TICK_NS = 20_000_000
FILES_NAMED = 10


def blame_writers(
    outcomes: Sequence[CheckOutcome], change: TreeChange, windows: Mapping[str, tuple[int, int]]
) -> None:
    """The checks that could have made `change` report an error naming its files.

    A file found written names the checks running when it was written (by its mtime); a
    deleted file, or a time no check's run covers, names every check of the evaluation."""
    everyone = [o.spec.name for o in outcomes]
    suspects: set[str] = set()
    for path in change.paths():
        written = change.written_ns.get(path)
        running = {
            name
            for name, (start, end) in windows.items()
            if written is not None and start - TICK_NS <= written <= end
        }
        suspects |= running or set(everyone)
    names = [n for n in everyone if n in suspects]
    who = " or ".join(repr(n) for n in names)
    together = " (they ran at the same time)" if len(names) > 1 else ""
    paths = change.paths()
    listed = ", ".join(paths[:FILES_NAMED])
    if len(paths) > FILES_NAMED:
        listed += f" and {len(paths) - FILES_NAMED} more"
    if change.restored:
        how = "put back"
    else:
        how = f"could not put back {', '.join(change.not_restored[:FILES_NAMED])}"
    message = f"check {who}{together} changed files in the tree: {listed} ({how})"
    for outcome in outcomes:
        if outcome.spec.name not in suspects:
            continue
        outcome.result = replace(outcome.result, status="error")
        diagnostic = Diagnostic(type="runtime_error", message=message, severity="error")
        outcome.errors.insert(0, diagnostic)
        outcome.score = 0.0
        outcome.changed_files = paths


def verification_type(specs: Sequence[CheckSpec]) -> VerificationType:
    parsers = {s.parser for s in specs}
    kinds: dict[str, VerificationType] = {
        "pytest": "unit_tests",
        "mypy": "type_check",
        "ruff": "lint",
    }
    if len(parsers) == 1:
        return kinds.get(parsers.pop(), "combined")
    return "combined"


def check_weight(spec: CheckSpec, weights: Mapping[str, float]) -> float:
    """`weights[name]` (settings) over the check's own `weight` over the parser's default."""
    if spec.name in weights:
        return max(0.0, float(weights[spec.name]))
    if spec.weight is not None:
        return max(0.0, float(spec.weight))
    return DEFAULT_WEIGHTS.get(spec.parser, 0.5)


def merge_metrics(all_metrics: Sequence[Metrics]) -> Metrics:
    """Counts summed over the checks that report them; None where no check does."""
    merged = Metrics()
    for name in ("tests_passed", "tests_failed", "tests_total", "lint_errors", "lint_warnings"):
        setattr(merged, name, known_sum(getattr(m, name) for m in all_metrics))
    merged.type_errors = known_sum(m.type_errors for m in all_metrics)
    coverage = [m.coverage_percentage for m in all_metrics if m.coverage_percentage is not None]
    merged.coverage_percentage = coverage[0] if coverage else None
    return merged


def fingerprint(
    outcomes: Sequence[CheckOutcome], relevant: Sequence[Diagnostic] | None = None
) -> str:
    """Identity of "the same failure": check, type, rule, file, test id or message — no lines.

    Numbers in messages are masked so timings and addresses do not make a failure look new.
    Only `relevant` diagnostics count when given (what a guard had before the loop never
    changes, and would make every loop of the project look alike).
    """
    keep = {id(d) for d in relevant} if relevant is not None else None
    items = []
    for outcome in outcomes:
        for e in outcome.errors:
            if keep is not None and id(e) not in keep:
                continue
            what = e.rule if e.type == "test_failure" and e.rule else _masked_first_line(e.message)
            items.append(f"{outcome.spec.name}|{e.type}|{e.rule or ''}|{e.file or ''}|{what}")
    import hashlib  # here, not at import: `ralph check` starts its checks before this is needed

    digest = hashlib.sha256("\n".join(sorted(items)).encode("utf-8"))
    return digest.hexdigest()[:16]


def _masked_first_line(message: str) -> str:
    """The first line with numbers and addresses masked: the same error at another line or
    object id fingerprints the same."""
    line = message.strip().splitlines()[0] if message.strip() else ""
    return re.sub(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?", "N", line)
