"""The Reflector: turns a failed iteration into a first-person reflection for the next prompt.

An LLM is asked for one JSON object with the fields of `self_reflection`; its answer is parsed
leniently, coerced, validated against the record schema and, if invalid, repaired once. When
there is no model, or it fails or keeps answering garbage, a heuristic reflection is built from
the diagnostics instead: the loop always gets a valid reflection and a reflector never raises.
Everything sent to a model passes through `ralph.redact.redact`.

The module is longer than most because parsing, the heuristic fallback and the quality flags
share one vocabulary (the diagnostics) and one contract (a valid `self_reflection`).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ralph import schemas
from ralph.errors import RalphError
from ralph.loop.prompts import (
    MAX_RELATED,
    all_diagnostics,
    cap,
    failing_outcomes,
    located_first,
    reflection_prompt_context,
    render,
    repair_context,
    repeated_iterations,
)
from ralph.providers.base import ChatClient, ChatResponse, Message
from ralph.records import (
    FAILURE_CATEGORIES,
    ActorOutput,
    CreditAssignment,
    Diagnostic,
    FailureCategory,
    IterationRecord,
    SelfReflection,
    from_json,
)
from ralph.redact import redact

if TYPE_CHECKING:
    from ralph.evaluators.base import CheckOutcome, Evaluation

SYSTEM_PROMPT = (
    "You are the self-reflection component of a Reflexion coding loop. "
    "You reply with exactly one JSON object and nothing else."
)
MAX_ANSWER_TOKENS = 1500
HEURISTIC_CONFIDENCE = 0.3

Source = Literal["llm", "repaired", "heuristic", "success"]


@dataclass
class ReflectionOutcome:
    reflection: SelfReflection
    source: Source
    quality_flags: list[str] = field(default_factory=list)
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None  # None when any call's cost is unknown, never 0 for unknown
    error: str | None = None  # why the LLM reflection was not used, one line


class Reflector:
    """Asks `client` for a reflection; None means heuristic reflections only."""

    def __init__(self, client: ChatClient | None, *, project_root: Path | None = None) -> None:
        self.client = client
        self.project_root = project_root

    def reflect(
        self,
        *,
        task: str,
        iteration: int,
        actor_output: ActorOutput,
        evaluation: Evaluation,
        earlier: list[IterationRecord],
        diff_summary: str = "",
        trajectory: str = "",
    ) -> ReflectionOutcome:
        if evaluation.passed:
            return ReflectionOutcome(success_reflection(evaluation, actor_output), "success")
        usage = _UsageSum()
        try:
            if self.client is None:
                return self._heuristic(evaluation, actor_output, earlier, usage, None, trajectory)
            context = reflection_prompt_context(
                task=task,
                iteration=iteration,
                actor_output=actor_output,
                evaluation=evaluation,
                earlier=earlier,
                diff_summary=diff_summary,
                trajectory=trajectory,
            )
            prompt = redact(render("reflection", context, project_root=self.project_root))
            messages = [Message("system", SYSTEM_PROMPT), Message("user", prompt)]
            answer = self._chat(messages, usage)
            reflection, problems = parse_reflection(answer)
            if reflection is not None:
                return self._done(reflection, "llm", evaluation, usage)
            repair_prompt = render(
                "repair", repair_context(answer, problems), project_root=self.project_root
            )
            messages += [
                Message("assistant", redact(answer) if answer.strip() else "(empty answer)"),
                Message("user", redact(repair_prompt)),
            ]
            reflection, problems = parse_reflection(self._chat(messages, usage))
            if reflection is not None:
                return self._done(reflection, "repaired", evaluation, usage)
            reason = f"reflection invalid after one repair: {problems[0]}"
        except Exception as exc:  # a reflector failure must never stop the loop
            reason = one_line(exc)
        return self._heuristic(evaluation, actor_output, earlier, usage, reason, trajectory)

    def _chat(self, messages: list[Message], usage: _UsageSum) -> str:
        assert self.client is not None
        response = self.client.chat(messages, json_mode=True, max_tokens=MAX_ANSWER_TOKENS)
        usage.add(response)
        return response.text or ""

    def _done(
        self, reflection: SelfReflection, source: Source, evaluation: Evaluation, usage: _UsageSum
    ) -> ReflectionOutcome:
        flags = quality_flags(reflection, evaluation)
        return ReflectionOutcome(reflection, source, flags, *usage.totals())

    def _heuristic(
        self,
        evaluation: Evaluation,
        actor_output: ActorOutput,
        earlier: list[IterationRecord],
        usage: _UsageSum,
        error: str | None,
        trajectory: str = "",
    ) -> ReflectionOutcome:
        reflection = heuristic_reflection(evaluation, actor_output, earlier, trajectory)
        flags = quality_flags(reflection, evaluation)
        return ReflectionOutcome(reflection, "heuristic", flags, *usage.totals(), error=error)


class _UsageSum:
    """Tokens and cost over the (at most two) calls; cost unknown if any call's cost is."""

    def __init__(self) -> None:
        self.tokens_in: int | None = None
        self.tokens_out: int | None = None
        self.cost: float | None = None
        self.cost_unknown = False

    def add(self, response: ChatResponse) -> None:
        if response.tokens_in is not None:
            self.tokens_in = (self.tokens_in or 0) + response.tokens_in
        if response.tokens_out is not None:
            self.tokens_out = (self.tokens_out or 0) + response.tokens_out
        if response.cost_usd is None:
            self.cost_unknown = True
        else:
            self.cost = (self.cost or 0.0) + response.cost_usd

    def totals(self) -> tuple[int | None, int | None, float | None]:
        return self.tokens_in, self.tokens_out, None if self.cost_unknown else self.cost


def one_line(exc: BaseException) -> str:
    message = exc.message if isinstance(exc, RalphError) else str(exc)
    first = (message.strip().splitlines() or [""])[0]
    text = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."


# --- parsing the model's answer ----------------------------------------------------------------

FENCE = re.compile(r"```[a-zA-Z0-9_-]*[ \t]*\n(.*?)```", re.DOTALL)


@functools.cache
def _self_reflection_schema() -> dict[str, Any]:
    defs: dict[str, Any] = schemas.load(schemas.RECORD)["$defs"]
    schema: dict[str, Any] = defs["self_reflection"]
    return schema


@functools.cache
def _validator() -> Any:
    """Validates `#/$defs/self_reflection` with the whole record schema as the $ref root."""
    import jsonschema

    full = schemas.load(schemas.RECORD)
    root = {k: v for k, v in full.items() if k in ("$schema", "$id", "$defs")}
    root["$ref"] = "#/$defs/self_reflection"
    cls = jsonschema.validators.validator_for(full)
    return cls(root)


def extract_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in `text`: fenced blocks first, then any balanced {...} that parses."""
    decoder = json.JSONDecoder()
    for block in [*FENCE.findall(text), text]:
        for match in re.finditer(r"\{", block):
            try:
                value, _ = decoder.raw_decode(block, match.start())
            except (json.JSONDecodeError, RecursionError):  # RecursionError: nested too deep
                continue
            if isinstance(value, dict):
                return value
    return None


def coerce(data: dict[str, Any]) -> dict[str, Any]:
    """Fix the obvious: wrappers, flattened credit fields, '0.8' or 80 confidences, strings for
    lists, categories outside the enum. Unknown keys are dropped; real gaps are left for the
    validator (a missing reflection_text stays missing)."""
    for wrapper in ("self_reflection", "reflection"):
        inner = data.get(wrapper)
        if isinstance(inner, dict) and "reflection_text" not in data:
            data = inner
    allowed = set(_self_reflection_schema()["properties"])
    out = {k: v for k, v in data.items() if k in allowed and v is not None}
    if isinstance(out.get("reflection_text"), list):
        out["reflection_text"] = " ".join(str(v).strip() for v in out["reflection_text"])
    credit = data.get("credit_assignment")
    if isinstance(credit, str):
        credit = {"root_cause": credit}
    credit = dict(credit) if isinstance(credit, dict) else {}
    for key in ("failing_action_indices", "root_cause", "failure_category"):
        if key in data and key not in credit:
            credit[key] = data[key]
    if credit or "credit_assignment" in out:
        out["credit_assignment"] = _coerce_credit(credit)
    if "confidence" in out:
        confidence = _coerce_confidence(out["confidence"])
        if confidence is None:
            del out["confidence"]
        else:
            out["confidence"] = confidence
    for key in ("actionable_insights", "lessons_learned"):
        if key in out:
            out[key] = _string_list(out[key])
    if "related_reflections" in out:
        out["related_reflections"] = _int_list(out["related_reflections"])
    for key in ("reflection_text", "causal_reasoning"):
        if isinstance(out.get(key), str):
            out[key] = out[key].strip()
    return _bounded(out)


# A reflection is read by the next prompt's token budget, not stored whole whatever its size:
# a model answering megabytes must not make megabyte records.
TEXT_LIMITS = {"reflection_text": 4000, "causal_reasoning": 2000, "root_cause": 1000}
ITEM_LIMIT, LIST_LIMIT = 500, 12


def _bounded(out: dict[str, Any]) -> dict[str, Any]:
    for key, limit in TEXT_LIMITS.items():
        holder = out.get("credit_assignment") if key == "root_cause" else out
        if isinstance(holder, dict) and isinstance(holder.get(key), str):
            holder[key] = cap(holder[key], limit)
    for key in ("actionable_insights", "lessons_learned"):
        if isinstance(out.get(key), list):
            out[key] = [cap(v, ITEM_LIMIT) if isinstance(v, str) else v for v in out[key]]
            out[key] = out[key][:LIST_LIMIT]
    credit = out.get("credit_assignment")
    if isinstance(credit, dict) and isinstance(credit.get("failing_action_indices"), list):
        credit["failing_action_indices"] = credit["failing_action_indices"][:100]
    if isinstance(out.get("related_reflections"), list):
        out["related_reflections"] = out["related_reflections"][-MAX_RELATED:]
    return out


def _coerce_credit(credit: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    credit = {k: v for k, v in credit.items() if v is not None}
    if "failing_action_indices" in credit:
        out["failing_action_indices"] = _int_list(credit["failing_action_indices"])
    if isinstance(credit.get("root_cause"), str) and credit["root_cause"].strip():
        out["root_cause"] = credit["root_cause"].strip()
    category = credit.get("failure_category")
    if category is not None:
        slug = re.sub(r"[^a-z]+", "_", str(category).lower()).strip("_")
        out["failure_category"] = slug if slug in FAILURE_CATEGORIES else "other"
    return out


def _coerce_confidence(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip().rstrip("%"))
        except ValueError:
            return None
    if not isinstance(value, int | float):
        return None
    number = float(value)
    if 1 < number <= 100:
        number /= 100  # a percentage
    return number if 0 <= number <= 1 else None


def _string_list(value: Any) -> Any:
    if isinstance(value, str):
        return [value.strip()] if value.strip() else []
    if isinstance(value, list):
        return [
            (v if isinstance(v, str) else json.dumps(v)).strip()
            for v in value
            if v is not None and str(v).strip()
        ]
    return value


def _int_list(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list):
        return value
    out: list[Any] = []
    for v in value:
        if isinstance(v, str) and v.strip().isdigit():
            out.append(int(v.strip()))
        elif isinstance(v, float) and v.is_integer():
            out.append(int(v))
        else:
            out.append(v)
    return out


def validation_errors(data: Any) -> list[str]:
    found = sorted(_validator().iter_errors(data), key=lambda e: list(map(str, e.path)))
    return [f"{e.json_path}: {cap(str(e.message), 200)}" for e in found]


def parse_reflection(text: str) -> tuple[SelfReflection | None, list[str]]:
    """A valid SelfReflection from a model's answer, or None and what is wrong with it."""
    data = extract_json_object(text or "")
    if data is None:
        return None, ["the answer contains no JSON object"]
    data = coerce(data)
    problems = validation_errors(data)
    if problems:
        return None, problems
    return from_json(SelfReflection, data), []


# --- reflections without a model ---------------------------------------------------------------

# How a diagnostic's type maps to a failure category when no model says otherwise:
#   test_failure, logic_error -> logic_error   (the code runs but computes the wrong thing)
#   type_error                -> incorrect_assumption (about a type, signature or API)
#   lint_error, syntax_error  -> incomplete_implementation (the edit was left unfinished/broken)
#   runtime_error             -> edge_case_miss (a crash on an input the change did not handle)
#   timeout                   -> logic_error (usually a loop that never ends)
# and any message naming something that does not exist (no attribute, not defined, no module,
# cannot import, unexpected keyword) -> hallucination. No change at all -> incomplete_impl.
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
    """A first guess from the verdict: a change that broke what worked is an integration
    error, one that fixed part of the targets is incomplete, never a hallucination."""
    if not changed:
        return "incomplete_implementation"
    if broke:
        return "integration_error"
    if fixed:
        return "incomplete_implementation"
    if not errors:
        return "other"
    top = errors[0]
    if INVENTED.search(top.message):
        return "hallucination"
    return CATEGORY_BY_TYPE.get(top.type, "other")


def _first_line(text: str, limit: int = 200) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _changed_files(actor_output: ActorOutput) -> list[str]:
    files = list(actor_output.files_modified or [])
    for action in actor_output.actions:
        if action.file_path and action.file_path not in files:
            files.append(action.file_path)
    return files


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _join(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _sentence(text: str) -> str:
    return text if text.endswith((".", "!", "?")) else text + "."


def heuristic_reflection(
    evaluation: Evaluation,
    actor_output: ActorOutput,
    earlier: Sequence[IterationRecord],
    trajectory: str = "",
) -> SelfReflection:
    """A first-person reflection built only from the diagnostics and the agent's own trace
    (the compact line of ralph.trace): concrete, never invented."""
    from ralph.actors.trace import check_note

    failing = failing_outcomes(evaluation)
    errors = located_first(all_diagnostics(evaluation))
    files = _changed_files(actor_output)
    repeats = repeated_iterations(evaluation, earlier)
    fixed = [key for o in evaluation.outcomes if o.verdict for key in o.verdict.fixed]
    broken = [d for o in evaluation.outcomes if o.verdict for d in o.verdict.regressions]
    insights = [_check_insight(o) for o in failing]
    if not files:
        insights.insert(0, "Make an actual code change: the last attempt changed no files.")
    if repeats:
        insights.insert(
            0,
            f"Abandon the approach of iteration {repeats[-1]}: it produced exactly the same "
            "errors; try a different strategy.",
        )
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
            failure_category=guess_category(
                errors, bool(files), fixed=bool(fixed), broke=bool(broken)
            ),
        ),
        causal_reasoning=redact(_causal(failing, errors)),
        actionable_insights=[redact(s) for s in insights],
        lessons_learned=(
            ["Repeating a change that produced the same errors wastes an iteration."]
            if repeats
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
        text.append(f"My change fixed {_plural(len(fixed), 'target failure')} ({shown}).")
    if broken:
        where = broken[0].location() or broken[0].rule or broken[0].type
        broke = [o.spec.name for o in failing if o.verdict and o.verdict.regressions]
        text.append(
            f"{'But it' if fixed else 'My change'} broke what worked before: {_join(broke)} now "
            f"{'has' if len(broke) == 1 else 'have'} {_plural(len(broken), 'new failure')}, "
            f"the first at {where}: {_first_line(broken[0].message)}"
        )
        text[-1] = _sentence(text[-1])
    text.append(
        f"My attempt did not make the checks pass: {_join(names) if names else 'the checks'} "
        f"still {verb} ({_plural(len(errors), 'error')}, reward {evaluation.reward:.2f})."
    )
    where = errors[0].location() if errors else ""
    if errors:
        place = f" at {where}" if where else ""
        kind = errors[0].type.replace("_", " ")
        text.append(
            _sentence(f"The first error is a {kind}{place}: {_first_line(errors[0].message)}")
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
        message = _first_line(errors[0].message, 300)
        return f"{where}: {message}" if where else message
    codes = ", ".join(f"{o.spec.name} exit code {o.result.exit_code}" for o in failing)
    return f"the checks failed without parsed errors ({codes or 'no details'})"


def _causal(failing: list[CheckOutcome], errors: list[Diagnostic]) -> str:
    names = _join([o.spec.name for o in failing]) if failing else "the checks"
    if not errors:
        return f"{names} failed without structured errors, so their output holds the cause."
    top = errors[0]
    where = top.location() or "an unlocated point"
    if top.type == "test_failure":
        target = top.rule or where
        effect = f"the code exercised by {target} still does not behave as that test asserts"
    else:
        effect = f"the code at {where} still breaks what the check enforces"
    return (
        f"{names} report {_plural(len(errors), 'error')}; the first fails at {where}, so {effect}."
    )


def _check_insight(outcome: CheckOutcome) -> str:
    """Where to start for one failing check; test locations are read, never edited."""
    located = located_first(outcome.errors)
    name = outcome.spec.name
    if not located:
        code = outcome.result.exit_code
        return f"{name}: read its output (exit code {code}) and fix what it reports."
    first = located[0]
    where = first.location() or "the first error"
    message = _first_line(first.message, 160)
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
    what = _first_line(actor_output.strategy or actor_output.rationale or "", 300)
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

STOCK_PHRASES = re.compile(
    r"\b(?:be (?:more )?careful|more carefully|test (?:more )?thoroughly|pay (?:more )?attention"
    r"|try harder|do better next time|double[- ]check (?:my|the) work|think more)\b",
    re.IGNORECASE,
)
FIRST_PERSON = re.compile(r"\bI\b|\bI'(?:m|ve|ll|d)\b|\b(?:my|me|myself|we|our)\b", re.IGNORECASE)
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
QUOTED = re.compile(r"['\"`]([^'\"`\n]{2,60})['\"`]")
MIN_REFLECTION_CHARS = 80


def _all_text(r: SelfReflection) -> str:
    ca = r.credit_assignment
    parts = [r.reflection_text, r.causal_reasoning or "", (ca.root_cause or "") if ca else ""]
    parts += (r.actionable_insights or []) + (r.lessons_learned or [])
    return "\n".join(parts).lower()


def _locations(errors: Sequence[Diagnostic]) -> set[str]:
    found: set[str] = set()
    for d in errors:
        if d.file:
            found.update({d.file, Path(d.file).name, d.location()})
    return {s.lower() for s in found if s}


def _concrete_terms(errors: Sequence[Diagnostic]) -> set[str]:
    """Names a specific reflection would mention: files, rules, code identifiers, error text."""
    terms = _locations(errors)
    for d in errors:
        if d.file:
            stem = Path(d.file).stem
            if len(stem) >= 3:
                terms.add(stem.lower())
        if d.rule:
            terms.add(d.rule.lower())
            terms.update(p.lower() for p in d.rule.split("::") if len(p) >= 3)
        terms.update(q.strip().lower() for q in QUOTED.findall(d.message) if q.strip())
        for word in IDENTIFIER.findall(d.message):
            if len(word) >= 3 and re.search(r"[_.\d]|[a-z][A-Z]", word):
                terms.add(word.lower())
        first = _first_line(d.message, 1000).lower()
        # error text: the start of the message and its colon-separated parts ("exit status 3")
        for part in [first[:40], *first.split(":")]:
            if len(part.strip()) >= 6:
                terms.add(part.strip())
    return terms


def quality_flags(r: SelfReflection, evaluation: Evaluation) -> list[str]:
    """Cheap signs of a weak reflection; recorded, never fatal.

    too_short: reflection text under 80 characters. generic: a stock phrase ("be more careful")
    or no concrete term from the diagnostics anywhere (file, rule, identifier, error text).
    no_location: none of the diagnostics' files or file:line mentioned (only when they have
    any). no_insight: no actionable insights. not_first_person: no I/my/me/we in the text.
    """
    errors = all_diagnostics(evaluation)
    text = _all_text(r)
    flags = []
    if len(r.reflection_text.strip()) < MIN_REFLECTION_CHARS:
        flags.append("too_short")
    terms = _concrete_terms(errors)
    if STOCK_PHRASES.search(text) or (terms and not any(t in text for t in terms)):
        flags.append("generic")
    locations = _locations(errors)
    if locations and not any(loc in text for loc in locations):
        flags.append("no_location")
    if not any(s.strip() for s in r.actionable_insights or []):
        flags.append("no_insight")
    if not FIRST_PERSON.search(r.reflection_text):
        flags.append("not_first_person")
    return flags
