"""One check's result in words: the lines the actor's prompt, the reflector's prompt, the
heuristic reflection and `ralph init` all say about a check, so they say it the same way; and
what an attempt broke (`harm_text`), as the iteration line and the commit's subject say it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ralph.glyphs import plural
from ralph.templates import cap

if TYPE_CHECKING:
    from ralph.evaluators.base import CheckOutcome, Evaluation
    from ralph.evaluators.verdicts import CheckBaseline
    from ralph.records import Diagnostic

MESSAGE_CAP = 1200
WHY_CAP = 160  # one line of a tool's words about why it could not run


def judgement_line(outcome: CheckOutcome) -> str:
    """What one check said of the attempt, relative to the baseline, for the reflector."""
    v = outcome.verdict
    if v is None:
        return "" if outcome.passed else check_summary(outcome)
    parts: list[str] = [v.role]
    if v.fixed:
        parts.append(f"fixed {len(v.fixed)} ({', '.join(v.fixed[:3])})")
    if v.role == "target" and v.remaining:
        parts.append(f"{len(v.remaining)} still failing")
    if v.regressions:
        first = v.regressions[0]
        where = first.location() or first.rule or first.type
        parts.append(f"{len(v.regressions)} newly broken (first: {where})")
    if v.role == "guard" and v.preexisting:
        parts.append(f"{v.preexisting} from before the loop, not the task")
    if v.ok and len(parts) == 1:
        parts.append("ok")
    return "; ".join(parts)


def located_first(errors: Sequence[Diagnostic]) -> list[Diagnostic]:
    """Diagnostics with a file first (stable), since a file:line is where work starts."""
    return sorted(errors, key=lambda d: 0 if d.file else 1)


def diagnostic_view(d: Diagnostic) -> dict[str, str]:
    return {
        "note": "",
        "location": d.location(),
        # continuation lines indented so a multi-line message stays inside its bullet
        "message": cap(d.message.strip(), MESSAGE_CAP).replace("\n", "\n  "),
        "rule": d.rule or "",
        "type": d.type,
    }


def check_summary(outcome: CheckOutcome) -> str:
    """One line a person would say about a failing check: counts, else the exit code; a check
    that could not run says why, never "1 error"."""
    if outcome.result.status == "error":
        return f"could not run: {why_not_run(outcome)}"
    m = outcome.metrics
    if m.tests_total:
        failed = m.tests_failed if m.tests_failed is not None else outcome.error_count
        return f"{failed} of {plural(m.tests_total, 'test')} failed"
    if outcome.error_count:
        return findings_text(outcome)
    code = outcome.result.exit_code
    return f"exit code {code}" if code is not None else "failed"


FINDING_WORDS = {"mypy": "type error", "ruff": "lint error"}


def findings_text(outcome: CheckOutcome) -> str:
    """A type checker's or linter's findings by kind: `2 type errors`, `1 syntax error`; mypy
    stops at a syntax error, so what it found there is no type error."""
    noun = FINDING_WORDS.get(outcome.spec.parser, "error")
    syntax = sum(1 for e in outcome.errors if e.type == "syntax_error")
    others = outcome.error_count - syntax
    said = [plural(others, noun)] if others else []
    return ", ".join([*said, plural(syntax, "syntax error")] if syntax else said)


def why_not_run(outcome: CheckOutcome) -> str:
    """Why a check could not run (status `error`): the tool's own first line, else its exit
    code; `ralph init`, `ralph doctor`, the prompts and the Stop hook all say it so."""
    said = outcome.errors[0].message.strip() if outcome.errors else ""
    if said:
        return said.splitlines()[0][:WHY_CAP]
    code = outcome.result.exit_code
    return f"exit code {code}" if code is not None else "no output"


def harm_text(evaluation: Evaluation) -> str | None:
    """What an attempt broke, per check that broke something: `broke what worked (pytest:
    64 → 54 failing, 1 new; mypy: 1 new error)`, as the iteration line and the commit's subject
    say it. A check's counts are its own (a tests check's tests, never a guard's findings added
    in), and a guard's findings from before the loop are not what it broke. None when the
    attempt broke nothing (or was judged without a baseline)."""
    baseline = evaluation.baseline
    if baseline is None:
        return None
    said = []
    for o in evaluation.outcomes:
        base = baseline.checks.get(o.spec.name)
        if o.verdict is not None and o.verdict.regressions and base is not None:
            said.append(broke_text(o, base))
    return f"broke what worked ({'; '.join(said)})" if said else None


def broke_text(outcome: CheckOutcome, base: CheckBaseline) -> str:
    """What one check's verdict holds against the attempt: `pytest: 64 → 54 failing, 1 new`
    (its tests, which may fall while one breaks), `mypy: 1 new error`, `lint: passed before,
    fails now`, `mypy: ran before, cannot run now`."""
    from ralph.evaluators.judging import check_kind  # not on `ralph check`'s early path

    v = outcome.verdict
    assert v is not None
    name, new = outcome.spec.name, len(v.regressions)
    kind = check_kind(outcome.spec)
    # a guard that cannot run now has its old failures held against it, none of them new
    only_old = v.role == "guard" and v.preexisting == outcome.error_count
    if kind == "tests" and not only_old:
        return f"{name}: {base.error_count} → {outcome.error_count} failing, {new} new"
    if kind == "diagnostics" and not only_old:
        return f"{name}: {plural(new, 'new error')}"
    if base.status == "pass":
        return f"{name}: passed before, fails now"
    return f"{name}: ran before, cannot run now"
