"""Judging against the baseline: which checks are targets, which are guards, and whether an
attempt met its targets without breaking what worked before.

Real repositories are rarely fully green, so "only the checks decide" means what SWE-bench
means by a resolved task: the tests that failed before must pass (FAIL_TO_PASS) and the tests
that passed must keep passing (PASS_TO_PASS); and what linters mean by a baseline: no *new*
diagnostics. docs/architecture.md (section "Judging") has the rules in a table.

- A **target** must end fully green. A **guard** must not get worse than the baseline: no test
  that passed fails, no diagnostic that was not there before (matched by file, code and message
  with numbers masked, so moving code does not make a finding new).
- `success: strict` (`--strict`) makes every check a target: every check must pass.
- The reward (`combine`) shows harm as harm: a small share for what still works of what worked
  before the loop, the rest for progress on the targets; an attempt that broke anything scores
  below every attempt that broke nothing, the baseline included. It is 1.0 exactly when the
  attempt succeeds and at most 0.99 otherwise.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from ralph.evaluators.verdicts import Baseline, CheckBaseline, CheckVerdict, Kind
from ralph.glyphs import plural
from ralph.records import Diagnostic, shown_reward

if TYPE_CHECKING:
    from ralph.config import CheckSpec, Role
    from ralph.evaluators.base import CheckOutcome

__all__ = ["Baseline", "CheckBaseline", "CheckVerdict", "combine", "judge_check"]

KEPT_SHARE = 0.1  # the reward's share for keeping what worked; the rest is progress on targets


def check_kind(spec: CheckSpec) -> Kind:
    """Tests report individual tests; mypy and ruff report located findings; the rest exit."""
    if spec.parser == "pytest":
        return "tests"
    if spec.parser in ("mypy", "ruff"):
        return "diagnostics"
    return "command"


def failure_key(d: Diagnostic) -> str:
    """A failure's identity across attempts: the test id, else file, code and message (no line)."""
    if d.type == "test_failure" and d.rule:
        return d.rule
    first = d.message.strip().splitlines()[0] if d.message.strip() else ""
    masked = re.sub(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?", "N", first)
    return f"{d.file or ''}|{d.rule or ''}|{masked}"


def assign_roles(
    specs: Sequence[CheckSpec],
    outcomes: Sequence[CheckOutcome],
    *,
    named: set[str],
    success: str,
) -> dict[str, tuple[Role, str]]:
    """Each check's role and the reason, from the baseline outcome (see the module docstring)."""
    roles: dict[str, tuple[Role, str]] = {}
    by_name = {o.spec.name: o for o in outcomes}
    for spec in specs:
        outcome = by_name.get(spec.name)
        status = outcome.result.status if outcome else "error"
        count = outcome.error_count if outcome else 0
        roles[spec.name] = role_of(spec, status, count, named=spec.name in named, success=success)
    return roles


ROLE_MEANING: dict[str, str] = {"target": "must end green", "guard": "must not get worse"}


def role_text(role: Role, why: str) -> str:
    """A role in the words every screen uses (init, doctor, run): `a guard (must not get
    worse): passes now: no test may start failing`."""
    return f"a {role} ({ROLE_MEANING[role]}): {why}"


def role_of(
    spec: CheckSpec, status: str, count: int = 0, *, named: bool = False, success: str = "baseline"
) -> tuple[Role, str]:
    """A check's role and why, from its status on the untouched tree: the one rule, which
    `ralph init` says before a loop and the loop applies."""
    if success == "strict":
        return "target", "--strict: every check must pass"
    if spec.role == "target":
        return "target", "role set in the configuration"
    if spec.role == "guard":
        return "guard", f"{_guard_why(spec, status, count)} (role set in the configuration)"
    if spec.parser == "judge":
        return "target", "a judge only adds requirements: its criteria must be met"
    kind = check_kind(spec)
    if kind == "tests":
        if status != "pass":
            return "target", "the tests failing now must pass; the passing ones must keep passing"
        if named:
            return "target", "named on the command line"
        return "guard", "passes now: no test may start failing"
    if named:
        return "target", "named on the command line"
    if status == "pass":
        return "target", "passes now: must keep passing"
    return "guard", _guard_why(spec, status, count)


def _guard_why(spec: CheckSpec, status: str, count: int) -> str:
    if status == "pass":
        return "passes now: must keep passing"
    if status == "error":
        return "could not run on the untouched tree: not judged (--strict judges it)"
    kind = check_kind(spec)
    noun = {"tests": "failing test", "diagnostics": "finding"}.get(kind)
    what = plural(count, noun) if noun else "failing"
    return f"{what} before the loop, not your task: no new ones allowed"


def make_baseline(
    outcomes: Sequence[CheckOutcome], roles: Mapping[str, tuple[Role, str]], success: str
) -> Baseline:
    """The baseline of `outcomes` (the untouched tree's); its verdict is judged separately."""
    checks = {}
    for o in outcomes:
        role, why = roles.get(o.spec.name, ("target", ""))
        kind = check_kind(o.spec)
        passing = tuple(sorted(o.passed_tests)) if o.passed_tests is not None else None
        checks[o.spec.name] = CheckBaseline(
            name=o.spec.name,
            kind=kind,
            role=role,
            status=o.result.status,
            error_count=o.error_count,
            why=why,
            failing=tuple(failure_key(d) for d in o.errors),
            passing=passing if kind == "tests" else None,
        )
    return Baseline(success, checks)


def judge_check(outcome: CheckOutcome, base: CheckBaseline | None) -> CheckVerdict:
    """One check's verdict; without a baseline (`ralph check`), passing is all that counts."""
    if base is None:
        return CheckVerdict(
            "target", outcome.passed, remaining=list(outcome.errors), progress=outcome.score
        )
    kind = check_kind(outcome.spec)
    status = outcome.result.status
    broke = base.status != "error" and status == "error"  # ran before, cannot run now
    before = Counter(base.failing)
    seen: Counter[str] = Counter()
    new: list[Diagnostic] = []
    kept: list[Diagnostic] = []
    for d in outcome.errors:
        key = failure_key(d)
        seen[key] += 1
        (kept if seen[key] <= before[key] else new).append(d)
    if kind == "tests":
        return _judge_tests(outcome, base, new, kept, broke)
    if kind == "command":
        regressions = list(outcome.errors) if base.status == "pass" and status != "pass" else []
    else:
        regressions = new
    if base.role == "target":
        ok = status == "pass"
        fixed = list((before - seen).elements())
        remaining = _without(outcome.errors, regressions)
        graded = kind == "diagnostics" or outcome.spec.parser == "judge"  # a judge's score
        score = outcome.score if graded else float(ok)
        # a command that failed before has nothing to lose; findings can always grow (a loop
        # from before roles stored no findings, nor the kind: judged as it was then)
        at_stake = base.kind == kind and (kind == "diagnostics" or base.status == "pass")
        share = _kept(regressions, None) if at_stake else None
        return CheckVerdict("target", ok, True, fixed, remaining, regressions, 0, score, share)
    if not base.judged:
        return CheckVerdict("guard", True, False, preexisting=outcome.error_count)
    if broke and not regressions:
        regressions = list(outcome.errors)
    ok = not regressions
    share = _kept(regressions, None)
    return CheckVerdict("guard", ok, True, [], [], regressions, len(kept), float(ok), share)


def _judge_tests(
    outcome: CheckOutcome,
    base: CheckBaseline,
    new: list[Diagnostic],
    kept: list[Diagnostic],
    broke: bool,
) -> CheckVerdict:
    """Per test: the baseline's failures are the targets, the baseline's passes are guarded.
    A test counts as passing only where the report shows it passing: one the baseline ran
    that is missing now (not collected, deselected, skipped, xfailed) did not pass."""
    passed_before = set(base.passing) if base.passing is not None else None
    # nothing new could have stopped the run early (`-x`): every test it ran should be there
    unseen = _unseen(outcome, base, passed_before) if not new and not broke else []
    lost = [d for d in unseen if failure_key(d) in (passed_before or ())]
    if base.role == "guard":  # any failure the baseline did not have is worse
        regressions = new or lost or (list(outcome.errors) if broke else [])
        ok = not regressions
        share = _kept(regressions, passed_before or None)
        return CheckVerdict("guard", ok, True, [], [], regressions, len(kept), float(ok), share)
    if passed_before is not None:  # a test that passed before the loop and fails now broke
        regressions = [d for d in outcome.errors if failure_key(d) in passed_before]
    else:
        regressions = new
    unheard = _without(new, regressions)  # failing, and not seen at all before the loop
    kept = kept + _without(unseen, lost)  # a target the report does not show: not fixed
    targets = list(dict.fromkeys(base.failing))
    passed_now = outcome.passed_tests
    if passed_now is not None:
        fixed = [k for k in targets if k in passed_now]
    else:
        fixed = targets if outcome.passed and passed_before is None else []
    ok = outcome.passed and len(fixed) == len(targets) and not regressions
    if targets:  # progress on what failed before, set back by what broke or appeared
        score = len(fixed) / (len(targets) + len(unheard) + len(regressions))
    else:
        score = outcome.score
    # only tests that passed before can regress when they are known; else any new failure (a
    # loop from before roles stored no tests: judged as it was then)
    legacy = base.kind != "tests"
    held = None if legacy or passed_before == set() else _kept(regressions, passed_before)
    remaining = kept + unheard
    return CheckVerdict("target", ok, True, fixed, remaining, regressions, 0, score, held)


NOT_RUN = (
    "did not run (not collected, deselected, skipped or xfailed), though it ran before the "
    "loop: only a test the report shows passing counts"
)


def _unseen(
    outcome: CheckOutcome, base: CheckBaseline, passed_before: set[str] | None
) -> list[Diagnostic]:
    """A failure for each test the baseline ran that the report does not show now (added to
    the outcome, which then fails): a target deselected is not fixed, a guard's is lost."""
    passed_now = outcome.passed_tests
    if passed_now is None or passed_before is None:
        return []
    failing = {failure_key(d) for d in outcome.errors}
    tests = (k for k in base.failing if "::" in k and "|" not in k.partition("::")[0])
    ran = [*dict.fromkeys(tests), *sorted(passed_before)]
    gone = [k for k in ran if k not in passed_now and k not in failing]
    found = [
        Diagnostic(type="test_failure", message=NOT_RUN, file=k.split("::")[0], rule=k)
        for k in gone
    ]
    if found:
        outcome.errors.extend(found)
        outcome.result = replace(outcome.result, status="fail")
    return found


def _kept(regressions: Sequence[Diagnostic], worked: set[str] | None) -> float:
    """The share of `worked` (the tests that passed before) not among `regressions`; without
    known tests the check is one thing that works or does not. Below 1 whenever something
    regressed."""
    if not worked:
        return 0.0 if regressions else 1.0
    lost = len({failure_key(d) for d in regressions})  # a guard's new tests count too
    return max(0.0, 1.0 - lost / len(worked))


def _without(items: Sequence[Diagnostic], drop: Sequence[Diagnostic]) -> list[Diagnostic]:
    """`items` less the very objects in `drop` (equal diagnostics may occur twice)."""
    gone = {id(d) for d in drop}
    return [d for d in items if id(d) not in gone]


def combine(verdicts: Sequence[tuple[float, CheckVerdict]]) -> tuple[bool, float]:
    """(success, reward) from (weight, verdict) pairs: success is every target green and no
    guard worse, and only success scores 1.0. Otherwise, with P the weighted progress on the
    targets and K the weighted share of what worked before that still works:

    - nothing to lose (no check has anything that worked): P;
    - nothing broken: KEPT_SHARE + (1 - KEPT_SHARE) * P, so more fixed scores higher;
    - something broken: KEPT_SHARE * K * (1 + P) / 2, below KEPT_SHARE and so below the
      baseline (which kept everything), still ordered by what was kept and fixed;

    at most 0.99 (`records.shown_reward`, the one cap)."""
    if all(v.ok for _, v in verdicts):
        return True, 1.0
    progress = _weighted([(w, v.progress) for w, v in verdicts if v.role == "target"], 1.0)
    at_stake = [(w, v.kept) for w, v in verdicts if v.kept is not None]
    if not at_stake:
        reward = progress
    elif any(v.regressions for _, v in verdicts if v.kept is not None):
        kept = _weighted([(w, k) for w, k in at_stake if k is not None], 1.0)
        reward = KEPT_SHARE * kept * (1 + progress) / 2
        # strictly below the baseline's KEPT_SHARE or more, after rounding too
        return False, min(round(reward, 4), KEPT_SHARE - 0.0001)
    else:
        reward = KEPT_SHARE + (1 - KEPT_SHARE) * progress
    return False, round(shown_reward(reward, passed=False), 4)


def _weighted(pairs: Sequence[tuple[float, float]], empty: float) -> float:
    """The weighted mean of values clamped to [0, 1]; equal weights when every weight is 0."""
    if not pairs:
        return empty
    total = sum(w for w, _ in pairs)
    if total <= 0:
        pairs, total = [(1.0, v) for _, v in pairs], float(len(pairs))
    return sum(w * min(1.0, max(0.0, v)) for w, v in pairs) / total
