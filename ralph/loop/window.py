"""The Ω window: which earlier reflections go into the next prompt, and how much of them.

Reflexion keeps a bounded episodic memory (Ω reflections) so the prompt stays within context
however long a loop runs. Definitions used here (docs/architecture.md, The cycle):

- Candidates are the failed iterations' reflections; success notes never enter the window.
- `fifo`: a queue of the last Ω reflections. Under the token budget it evicts from the old end
  until the rest fits, so the window is always a contiguous run of the newest reflections.
- `recency`: the same last Ω, but packed newest first: each reflection that still fits in what
  is left of the budget is kept, one that does not is dropped and older, shorter ones may still
  get in. Newest reflections are weighted first.
- `relevance_weighted`: every candidate is scored by recency decay (0.5 ** age, newest age 0)
  plus overlap with the current failure (same fingerprint 2.0; Jaccard overlap of files 1.0,
  rules 0.7, error types 0.3); the top Ω are packed by score like `recency`.
- Whatever the policy, when the highest-ranked reflection alone exceeds the budget its text
  fields are truncated to fit (a copy; records are never changed). The window is returned in
  iteration order, oldest first, as the prompt reads best.
- Tokens are estimated as len(text) / 4 (rounded up) over the fields the actor prompt renders.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ralph.errors import ConfigError
from ralph.records import CreditAssignment, Diagnostic, IterationRecord, WindowPolicy
from ralph.templates import TRUNCATION_MARKER, estimate_tokens

OMEGA_BY_VERIFICATION: dict[str, int] = {
    "unit_tests": 1,
    "integration_tests": 3,
    "type_check": 1,
    "lint": 1,
    "combined": 3,
    "manual_review": 5,
}
DEFAULT_OMEGA = 3
OMEGA_MIN, OMEGA_MAX = 0, 10  # 0: no reflections at all (`ralph bench`'s no-memory arm)
POLICIES: tuple[WindowPolicy, ...] = ("fifo", "recency", "relevance_weighted")
MIN_TRUNCATED_TOKENS = 16  # below this a truncated reflection says nothing useful


def omega_for(verification_type: str, override: int | None) -> int:
    """`--omega` if given (0..10), else the Reflexion guide's default for the verification type."""
    if override is not None:
        if isinstance(override, bool) or not OMEGA_MIN <= override <= OMEGA_MAX:
            raise ConfigError(
                f"omega must be between {OMEGA_MIN} and {OMEGA_MAX}, got {override!r}",
                hint="--omega 1 for simple fixes, 3 for multi-file work, 5 for open-ended tasks",
            )
        return override
    return OMEGA_BY_VERIFICATION.get(verification_type, DEFAULT_OMEGA)


def window_policy(name: str) -> WindowPolicy:
    """`name` as a window policy; a ConfigError names the ones there are."""
    for policy in POLICIES:
        if policy == name:
            return policy
    raise ConfigError(f"unknown window policy {name!r}", hint=f"use one of: {', '.join(POLICIES)}")


def rendered_fields(record: IterationRecord) -> list[str]:
    """The reflection's text fields the actor prompt shows, in the order it shows them."""
    sr = record.self_reflection
    ca = sr.credit_assignment
    fields = [sr.reflection_text]
    if ca is not None and ca.root_cause:
        fields.append(ca.root_cause)
    fields.extend(sr.actionable_insights or [])
    fields.extend(sr.lessons_learned or [])
    return fields


def reflection_tokens(record: IterationRecord) -> int:
    return estimate_tokens("\n".join(rendered_fields(record)))


def select_window(
    records: Sequence[IterationRecord],
    *,
    omega: int,
    policy: str,
    token_budget: int,
    current_fingerprint: str | None = None,
    current_errors: Sequence[Diagnostic] = (),
) -> list[IterationRecord]:
    """The reflections for the next prompt: at most Ω, within the budget, oldest first."""
    window_policy(policy)
    candidates = _candidates(records)
    if omega < 1 or token_budget < 1 or not candidates:
        return []
    if policy == "relevance_weighted":
        ranked = _by_relevance(candidates, current_fingerprint, current_errors)[:omega]
    else:
        ranked = list(reversed(candidates[-omega:]))  # newest first
    kept = _pack(ranked, token_budget, contiguous=policy == "fifo")
    return sorted(kept, key=lambda r: r.iteration)


def _candidates(records: Iterable[IterationRecord]) -> list[IterationRecord]:
    """Failed iterations with a reflection, one per iteration number (the last one written)."""
    by_iteration: dict[int, IterationRecord] = {}
    for record in records:
        if record.evaluator_output.passed:
            continue
        if record.ralph is not None and record.ralph.reflection_source == "success":
            continue
        if not record.self_reflection.reflection_text.strip():
            continue
        by_iteration[record.iteration] = record
    return [by_iteration[i] for i in sorted(by_iteration)]


def _pack(ranked: list[IterationRecord], budget: int, *, contiguous: bool) -> list[IterationRecord]:
    """Keep reflections best-first while they fit; truncate the best one if it alone does not."""
    kept: list[IterationRecord] = []
    used = 0
    for record in ranked:
        cost = reflection_tokens(record)
        if used + cost <= budget:
            kept.append(record)
            used += cost
        elif not kept:
            if budget < MIN_TRUNCATED_TOKENS:
                return []
            kept.append(truncate_reflection(record, budget))
            used = reflection_tokens(kept[0])
        elif contiguous:
            break
    return kept


def truncate_reflection(record: IterationRecord, budget: int) -> IterationRecord:
    """A copy whose rendered fields fit in `budget` tokens; reflection text keeps priority."""
    clone = copy.deepcopy(record)
    sr = clone.self_reflection
    chars = budget * 4
    fields = rendered_fields(clone)
    # "\n" separators between fields count too; spend the rest field by field, in order.
    remaining = chars - (len(fields) - 1)
    fitted: list[str] = []
    for text in fields:
        if len(text) <= remaining:
            piece = text
        elif remaining > 2 * len(TRUNCATION_MARKER):
            piece = _cut(text, remaining)
        else:
            break
        fitted.append(piece)
        remaining -= len(piece)
    if not fitted:
        fitted = [_cut(fields[0], max(1, chars))]
    sr.reflection_text = fitted[0]
    index = 1
    ca = sr.credit_assignment
    if ca is not None and ca.root_cause:
        root = fitted[index] if index < len(fitted) else None
        sr.credit_assignment = CreditAssignment(
            ca.failing_action_indices, root, ca.failure_category
        )
        index += 1
    insights = sr.actionable_insights or []
    sr.actionable_insights = fitted[index : index + len(insights)]
    index += len(insights)
    sr.lessons_learned = fitted[index:]
    while reflection_tokens(clone) > budget and len(sr.reflection_text) > 1:
        sr.reflection_text = _cut(sr.reflection_text, len(sr.reflection_text) - 4)
    return clone


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    if limit <= len(TRUNCATION_MARKER):
        return text[: max(1, limit)]
    return text[: limit - len(TRUNCATION_MARKER)].rstrip() + TRUNCATION_MARKER


# --- relevance ---------------------------------------------------------------------------------

FINGERPRINT_WEIGHT = 2.0
FILE_WEIGHT = 1.0
RULE_WEIGHT = 0.7
TYPE_WEIGHT = 0.3


@dataclass(frozen=True)
class _Features:
    files: frozenset[str]
    rules: frozenset[str]
    types: frozenset[str]


def _features(errors: Iterable[Diagnostic]) -> _Features:
    errors = list(errors)
    return _Features(
        frozenset(d.file for d in errors if d.file),
        frozenset(d.rule for d in errors if d.rule),
        frozenset(d.type for d in errors),
    )


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def relevance(
    record: IterationRecord,
    age: int,
    current: _Features,
    current_fingerprint: str | None,
) -> float:
    """Recency decay plus overlap of the record's failure with the current one."""
    mine = _features(record.evaluator_output.errors or [])
    fingerprint = record.ralph.error_fingerprint if record.ralph else None
    same = bool(current_fingerprint) and fingerprint == current_fingerprint
    return (
        0.5**age
        + FINGERPRINT_WEIGHT * same
        + FILE_WEIGHT * _jaccard(mine.files, current.files)
        + RULE_WEIGHT * _jaccard(mine.rules, current.rules)
        + TYPE_WEIGHT * _jaccard(mine.types, current.types)
    )


def _by_relevance(
    candidates: list[IterationRecord],
    current_fingerprint: str | None,
    current_errors: Sequence[Diagnostic],
) -> list[IterationRecord]:
    current = _features(current_errors)
    newest_first = list(reversed(candidates))
    scored = [
        (relevance(r, age, current, current_fingerprint), -age, r)
        for age, r in enumerate(newest_first)
    ]
    scored.sort(key=lambda item: (item[0], item[1]), reverse=True)
    return [r for _, _, r in scored]
