"""From a model's answer to a SelfReflection: find the JSON object, coerce the obvious mistakes
(wrappers, flattened credit fields, '80' confidences), bound the text, validate against the record
schema's self_reflection."""

from __future__ import annotations

import functools
import json
import re
from typing import TYPE_CHECKING, Any

from ralph import schemas
from ralph.providers.answers import extract_json_object, repair_context
from ralph.records import (
    FAILURE_CATEGORIES,
    SelfReflection,
    from_json,
)
from ralph.reflection.context import MAX_RELATED
from ralph.templates import cap

if TYPE_CHECKING:
    pass


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


def reflection_repair_context(previous_answer: str, problems: list[str]) -> dict[str, Any]:
    """What repair.mustache reads: the common repair context plus the fields and categories."""
    return repair_context(
        previous_answer,
        problems,
        fields=", ".join(_self_reflection_schema()["properties"]),
        categories=", ".join(FAILURE_CATEGORIES),
    )
