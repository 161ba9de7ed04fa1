"""The reflection written without a model: from the checks' verdict and the attempt's actions,
when no reflector is configured or the model's answers cannot be used twice in a row; and the short
note on success."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ralph.actors.trace import check_note
from ralph.evaluators.describe import located_first
from ralph.evaluators.judging import failure_key
from ralph.glyphs import first_line, plural
from ralph.memory.lessons import ENVIRONMENT_CATEGORY
from ralph.records import (
    ActorOutput,
    CreditAssignment,
    Diagnostic,
    FailureCategory,
    IterationRecord,
    SelfReflection,
    actor_said,
    gist,
)
from ralph.redact import redact
from ralph.reflection.context import repeated_iterations

if TYPE_CHECKING:
    from ralph.evaluators.base import CheckOutcome, Evaluation


HEURISTIC_CONFIDENCE = 0.3
CATEGORY_BY_TYPE: dict[str, FailureCategory] = {
    "test_failure": "logic_error",
    "logic_error": "logic_error",
    "type_error": "incorrect_assumption",
    "lint_error": "incomplete_implementation",
    "syntax_error": "incomplete_implementation",
    "runtime_error": "edge_case_miss",
    "timeout": "logic_error",
}

INVENTED = re.compile(
    r"has no attribute|is not defined|undefined name|no module named|cannot import name|"
    r"unexpected keyword argument|has no member",
    re.IGNORECASE,
)


def guess_category(
    errors: Sequence[Diagnostic], changed: bool, *, fixed: bool = False, broke: bool = False
) -> FailureCategory:
    """The category follows the top failure's own type (an assertion is a logic error, an
    import the attempt made fail an integration error, never a hallucination): what broke or
    was fixed only decides when the failure itself says nothing, so a plain failing assertion
    is never an integration error. `errors`: what the attempt broke first, if any."""
    if not changed:
        return "incomplete_implementation"
    if errors:
        top = errors[0]
        if top.is_import_failure():  # the attempt's own (one at the baseline is the
            return "integration_error"  # environment's, `ENVIRONMENT_CATEGORY`): a lesson to keep
        if INVENTED.search(top.message):
            return "hallucination"
        category = CATEGORY_BY_TYPE.get(top.type, "other")
        if category != "other":
            return category
    if broke:
        return "integration_error"
    if fixed:
        return "incomplete_implementation"
    return "other"


ENVIRONMENT_INSIGHT = (
    "As before the loop, the tests cannot even be imported ({error}): that usually comes from "
    "the environment (a generated or git-ignored file, a package not installed), not from the "
    "code the task is about."
)


def environment_failure(evaluation: Evaluation) -> bool:
    """The attempt failed only on tests that could not be imported, each one as at the baseline:
    the environment's failure, not the agent's (a category of its own, never a lesson)."""
    baseline = evaluation.baseline
    failing = evaluation.failing()
    if baseline is None or not failing:
        return False
    for outcome in failing:
        verdict, base = outcome.verdict, baseline.checks.get(outcome.spec.name)
        errors = [*verdict.remaining, *verdict.regressions] if verdict else []
        if base is None or not errors:
            return False
        if not all(d.is_import_failure() and failure_key(d) in base.failing for d in errors):
            return False
    return True


def category_follows_failure(reflection: SelfReflection, evaluation: Evaluation) -> SelfReflection:
    """A model's category yields to the failure's own: an environment failure is
    `ENVIRONMENT_CATEGORY` (configuration_error), whatever the reflection says."""
    if not environment_failure(evaluation):
        return reflection
    credit = reflection.credit_assignment or CreditAssignment()
    return dataclasses.replace(
        reflection,
        credit_assignment=dataclasses.replace(credit, failure_category=ENVIRONMENT_CATEGORY),
    )


def _changed_files(actor_output: ActorOutput) -> list[str]:
    files = list(actor_output.files_modified or [])
    for action in actor_output.actions:
        if action.file_path and action.file_path not in files:
            files.append(action.file_path)
    return files


def _join(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def tests_edited(paths: Sequence[str]) -> str:
    """What an attempt that edited the protected tests (loop/protect.py) must do instead."""
    return (
        f"Change the code, not the tests: my edits of {', '.join(paths)} were put back before "
        "the checks ran and did not count."
    )


def _sentence(text: str) -> str:
    return text if text.endswith((".", "!", "?")) else text + "."


def heuristic_reflection(
    evaluation: Evaluation,
    actor_output: ActorOutput,
    earlier: Sequence[IterationRecord],
    trajectory: str = "",
    protected_edits: Sequence[str] = (),
) -> SelfReflection:
    """A first-person reflection built only from the diagnostics and the agent's own trace
    (the compact line of ralph.trace): concrete, never invented."""
    failing = evaluation.failing()
    errors = located_first(evaluation.relevant_errors())
    files = _changed_files(actor_output)
    repeats = repeated_iterations(evaluation, earlier)
    fixed = [key for o in evaluation.outcomes if o.verdict for key in o.verdict.fixed]
    broken = [d for o in evaluation.outcomes if o.verdict for d in o.verdict.regressions]
    insights = [_check_insight(o) for o in failing]
    environment = environment_failure(evaluation)
    if environment:  # not "fix pkg/__init__.py:1 first": the import is not the task
        insights = [ENVIRONMENT_INSIGHT.format(error=first_line(errors[0].message, 160))]
    if not files and not protected_edits:  # else it did change files: the tests, put back
        insights.insert(0, "Make an actual code change: the last attempt changed no files.")
    if repeats:
        insights.insert(
            0,
            f"Abandon the approach of iteration {repeats[-1]}: it produced exactly the same "
            "errors; try a different strategy.",
        )
    if protected_edits:
        insights.insert(0, tests_edited(protected_edits))
    notes = [check_note(trajectory, o.spec.name, o.spec.command) for o in failing]
    traced = [note for note in notes if note]
    insights[:0] = [advice for _, advice in traced]
    indices = [
        i
        for i, action in enumerate(actor_output.actions)
        if action.file_path and any(d.file == action.file_path for d in errors)
    ]
    return SelfReflection(
        reflection_text=redact(
            " ".join(
                [
                    _heuristic_text(evaluation, failing, errors, files, repeats, fixed, broken),
                    *(note for note, _ in traced),
                ]
            )
        ),
        credit_assignment=CreditAssignment(
            failing_action_indices=indices,
            root_cause=redact(_root_cause(failing, broken or errors)),
            failure_category=(
                ENVIRONMENT_CATEGORY
                if environment
                else guess_category(
                    located_first(broken) or errors,
                    bool(files),
                    fixed=bool(fixed),
                    broke=bool(broken),
                )
            ),
        ),
        causal_reasoning=redact(_causal(failing, errors)),
        actionable_insights=[redact(s) for s in insights],
        lessons_learned=(
            ["Repeating a change that produced the same errors wastes an iteration."]
            if repeats and files
            else []
        ),
        confidence=HEURISTIC_CONFIDENCE,
        related_reflections=repeats,
    )


def _heuristic_text(
    evaluation: Evaluation,
    failing: list[CheckOutcome],
    errors: list[Diagnostic],
    files: list[str],
    repeats: list[int],
    fixed: Sequence[str] = (),
    broken: Sequence[Diagnostic] = (),
) -> str:
    names = [o.spec.name for o in failing]
    verb = "fails" if len(names) == 1 else "fail"
    text = []
    if fixed:
        shown = ", ".join(fixed[:3]) + (f" and {len(fixed) - 3} more" if len(fixed) > 3 else "")
        text.append(f"My change fixed {plural(len(fixed), 'target failure')} ({shown}).")
    if broken:
        where = broken[0].location() or broken[0].rule or broken[0].type
        broke = [o.spec.name for o in failing if o.verdict and o.verdict.regressions]
        text.append(
            f"{'But it' if fixed else 'My change'} broke what worked before: {_join(broke)} now "
            f"{'has' if len(broke) == 1 else 'have'} {plural(len(broken), 'new failure')}, "
            f"the first at {where}: {first_line(broken[0].message, 200)}"
        )
        text[-1] = _sentence(text[-1])
    text.append(
        f"My attempt did not make the checks pass: {_join(names) if names else 'the checks'} "
        f"still {verb} ({plural(len(errors), 'error')}, reward {evaluation.reward:.2f})."
    )
    where = errors[0].location() if errors else ""
    if errors:
        place = f" at {where}" if where else ""
        kind = errors[0].type.replace("_", " ")
        text.append(
            _sentence(f"The first error is a {kind}{place}: {first_line(errors[0].message, 200)}")
        )
    if not files:
        text.append("I did not change any files, so nothing I did could have fixed it.")
    elif not fixed and not broken:
        shown = ", ".join(files[:5]) + (f" and {len(files) - 5} more" if len(files) > 5 else "")
        text.append(f"I changed {shown}, but that did not fix it.")
    if repeats:
        text.append(
            f"This is exactly the same failure as iteration {repeats[-1]}, so my approach is not "
            "working: I must try a different approach instead of repeating it."
        )
    if where:
        text.append(f"Next I will start at {where} and work out why it fails before editing.")
    return " ".join(text)


def _root_cause(failing: list[CheckOutcome], errors: list[Diagnostic]) -> str:
    if errors:
        where = errors[0].location()
        message = first_line(errors[0].message, 300)
        return f"{where}: {message}" if where else message
    codes = ", ".join(f"{o.spec.name} exit code {o.result.exit_code}" for o in failing)
    return f"the checks failed without parsed errors ({codes or 'no details'})"


def _causal(failing: list[CheckOutcome], errors: list[Diagnostic]) -> str:
    names = _join([o.spec.name for o in failing]) if failing else "the checks"
    if not errors:
        their = "its" if len(failing) == 1 else "their"
        return f"{names} failed without structured errors, so {their} output holds the cause."
    top = errors[0]
    where = top.location() or "an unlocated point"
    if top.type == "test_failure":
        target = top.rule or where
        effect = f"the code exercised by {target} still does not behave as that test asserts"
    else:
        effect = f"the code at {where} still breaks what the check enforces"
    return (
        f"{names} {'reports' if len(failing) == 1 else 'report'} {plural(len(errors), 'error')}; "
        f"the first fails at {where}, so {effect}."
    )


def _check_insight(outcome: CheckOutcome) -> str:
    """Where to start for one failing check; test locations are read, never edited."""
    # what the verdict holds against the attempt: a guard's new findings, a target's remaining
    # failures; never a guard's failures from before the loop, which are not the task
    verdict = outcome.verdict
    relevant = [*verdict.regressions, *verdict.remaining] if verdict else []
    located = located_first(relevant or outcome.errors)
    name = outcome.spec.name
    if not located:
        code = outcome.result.exit_code
        return f"{name}: read its output (exit code {code}) and fix what it reports."
    first = located[0]
    where = first.location() or "the first error"
    message = first_line(first.message, 160)
    if first.type == "test_failure":
        test = first.rule or "the failing test"
        return f"{name}: make {test} pass without editing the test; it fails at {where}: {message}"
    rule = f" [{first.rule}]" if first.rule else ""
    return f"{name}: fix {where}{rule} first: {message}"


def success_reflection(evaluation: Evaluation, actor_output: ActorOutput) -> SelfReflection:
    """The note a passing iteration leaves: what worked, for other loops to learn from."""
    files = _changed_files(actor_output)
    targets = [
        o.spec.name for o in evaluation.outcomes if not o.verdict or o.verdict.role == "target"
    ]
    older = [
        f"{o.spec.name}: {o.verdict.preexisting}"
        for o in evaluation.outcomes
        if o.verdict and o.verdict.role == "guard" and o.verdict.preexisting
    ]
    if older:
        text = (
            f"I made every target pass ({', '.join(targets) or 'none'}; reward "
            f"{evaluation.reward:.2f}) without breaking what passed before; the guards' "
            f"failures from before the loop ({', '.join(older)}) were not the task."
        )
    else:
        names = ", ".join(o.spec.name for o in evaluation.outcomes) or "every check"
        text = f"I made every check pass ({names}; reward {evaluation.reward:.2f})."
    if files:
        text += f" I changed {', '.join(files[:5])}."
    what = first_line(gist(actor_output.strategy or actor_said(actor_output.rationale)), 300)
    if what:
        text += f" What worked: {what}"
    return SelfReflection(
        reflection_text=redact(text),
        actionable_insights=[],
        lessons_learned=[redact(f"What worked: {what}")] if what else [],
        confidence=1.0,
        related_reflections=[],
    )


# --- quality -----------------------------------------------------------------------------------
