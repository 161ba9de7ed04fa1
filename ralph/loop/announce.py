"""What the loop says once the baseline is judged: checks that cannot run, what must end green
and what must only not get worse, and why a loop with nothing to do ends at once."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ralph.glyphs import plural

if TYPE_CHECKING:
    from ralph.evaluators.base import CheckOutcome, Evaluation
    from ralph.evaluators.judging import Baseline


def baseline_notes(baseline: Baseline, evaluation: Evaluation) -> list[str]:
    """Warnings for checks that could not run, then the roles, one note each."""
    return [*_broken_checks(evaluation), *_environment(evaluation), *_roles(baseline, evaluation)]


def _environment(evaluation: Evaluation) -> list[str]:
    """Tests that cannot even be imported are the environment's problem, not the agent's task:
    said before the first attempt, in plain words."""
    notes = []
    for outcome in evaluation.outcomes:
        failures = [d for d in outcome.errors if d.is_import_failure()]
        if not failures:
            continue
        where = f" ({failures[0].location()})" if failures[0].location() else ""
        notes.append(
            f"warning: the tests of check {outcome.spec.name!r} cannot even be imported "
            f"before the loop: {failures[0].message.splitlines()[0][:200]}{where}. That is an "
            "environment problem (a generated or git-ignored file, a package not installed), "
            "not the task: fix the environment (README: Several loops at once) rather than "
            "let the agent work around it"
        )
    return notes


def _broken_checks(evaluation: Evaluation) -> list[str]:
    """A check that cannot run at all (status error, not fail) is usually misconfigured; an
    agent may still make it run, so this is a warning, not a refusal."""
    notes = []
    for outcome in evaluation.outcomes:
        if outcome.result.status != "error":
            continue
        first = next(iter(outcome.errors), None)
        why = first.message.splitlines()[0][:200] if first and first.message else "no output"
        notes.append(
            f"warning: check {outcome.spec.name!r} could not run on the untouched tree "
            f"({why}); see `ralph check`"
        )
    return notes


def _roles(baseline: Baseline, evaluation: Evaluation) -> list[str]:
    """What must end green and what must only not get worse."""
    if baseline.success == "strict":
        return ["--strict: every check must pass"]
    notes, targets = [], []
    for outcome in evaluation.outcomes:
        check = baseline.checks.get(outcome.spec.name)
        if check is None:
            continue
        if check.role == "target":
            failing = "" if outcome.passed else f": {_failing_units(outcome)} to fix"
            targets.append(f"{check.name}{failing}")
        elif not outcome.passed:
            notes.append(f"guard {check.name}: {check.why}")
    if targets:
        notes.append(f"targets (must end green): {', '.join(targets)}")
    return notes


def _failing_units(outcome: CheckOutcome) -> str:
    """`3 failing tests`, `12 findings` or `failing`: what a target must fix, counted."""
    if outcome.spec.parser == "pytest":
        n = sum(1 for e in outcome.errors if e.type == "test_failure") or outcome.error_count
        return plural(n, "failing test")
    n = outcome.error_count
    return plural(n, "finding") if n else "failing"


# what to do when no check gives the loop work: said by the loop, `--dry-run` and `ralph doctor`
NAME_WHAT_MUST_CHANGE = "name what must change with --check NAME or --test CMD, or use --strict"


def green_message(evaluation: Evaluation) -> str:
    """Why a loop ends before it starts, in words a newcomer acts on; names the guards that
    fail, which are not the task."""
    failing = [o.spec.name for o in evaluation.outcomes if not o.passed]
    if not failing:
        why = "every check passes already"
    else:
        names = ", ".join(failing)
        why = f"no target fails: {names} failed before the loop and only must not get worse"
    return f"{why}, so there is nothing for the loop to fix: {NAME_WHAT_MUST_CHANGE}"
