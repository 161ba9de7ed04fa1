"""Quality flags on a reflection: stock phrases, not first person, nothing concrete from the errors.
Flags are stored in the record and shown by `analyze`; they never reject a reflection.

The gate is stricter for what the memory teaches: a lesson or an insight goes to later prompts
and other loops, so one that says nothing (a header, a lone fragment such as "E") or that the
record contradicts ("repeating a change" after an attempt that changed no files) is dropped
before it is stored (`gated`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ralph.glyphs import first_line
from ralph.records import (
    Diagnostic,
    SelfReflection,
)

if TYPE_CHECKING:
    from ralph.evaluators.base import Evaluation


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
        first = first_line(d.message, 1000).lower()
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
    errors = evaluation.relevant_errors()
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


WORD = re.compile(r"[A-Za-z]{2,}")
# the part after the last colon is a fragment: "tests: fix the first error first: E"
FRAGMENT_TAIL = re.compile(r":\s*\S{0,2}\s*$")
# claims about a change the attempt made
ABOUT_A_CHANGE = re.compile(
    r"\b(?:repeat\w*|reappl\w*|the same|my|that) (?:a |the )?(?:change|edit|fix)(?:es|s)?\b",
    re.IGNORECASE,
)


def says_something(text: str) -> bool:
    """A lesson or insight with content: three words at least, not a header (ending with a
    colon) nor ending in a fragment after its last colon."""
    text = text.strip()
    return len(WORD.findall(text)) >= 3 and not FRAGMENT_TAIL.search(text)


def gated(r: SelfReflection, *, changed_files: bool) -> SelfReflection:
    """The reflection with only the lessons and insights worth teaching: `says_something`, and
    none about the attempt's change when it changed no files."""

    def kept(items: Sequence[str] | None) -> list[str]:
        return [
            s
            for s in items or []
            if says_something(s) and (changed_files or not ABOUT_A_CHANGE.search(s))
        ]

    return replace(
        r,
        lessons_learned=kept(r.lessons_learned),
        actionable_insights=kept(r.actionable_insights),
    )
