"""Lessons from other loops: which earlier failures resemble this one, and what they taught.

Before each attempt ralph looks for failed iterations of *other* loops whose diagnostics resemble
the current ones (the Reflexion integration guide: similarity above a threshold, top 3), and puts
their lessons in the prompt's `lessons` section, apart from this loop's own Ω window.

- Similarity compares the shape of two failures (`Failure`): the (type, file, rule/test id)
  signatures, files, rules, error types and message words, by weighted Jaccard overlap in [0, 1];
  the same error fingerprint is 1. Only candidates at or above `SIMILARITY_THRESHOLD` count.
- A record's lessons are its `lessons_learned`; without any, its insights that make sense outside
  their loop (no "iteration 3"); without those, its root cause.
- Obsolete reflections (`ralph.obsolete`) and success notes are never injected, nor reflections
  of the category `ENVIRONMENT_CATEGORY`: tests that could not be imported, as at their loop's
  baseline, say something about that loop's environment, not about code (reflection/heuristic).
- Hygiene: near-identical lessons (word-set Jaccard >= `DUPLICATE_THRESHOLD`) count once and the
  newest wording wins; each lesson is capped and all of them fit `LESSON_TOKENS` tokens.
- Candidates come from the FTS5 index (`ralph.memory.search`), so this stays fast on a large memory.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ralph.records import FailureCategory, message_id, scope_key

ENVIRONMENT_CATEGORY: FailureCategory = "configuration_error"  # never a lesson for another loop
SIMILARITY_THRESHOLD = 0.5
DUPLICATE_THRESHOLD = 0.8
LESSON_TOKENS = 400  # all injected lessons together
LESSON_MAX_TOKENS = 120  # one lesson
MAX_ERRORS = 50  # per record, for the index and for similarity
MAX_LESSONS = 5  # per record
WORD = re.compile(r"[a-z][a-z0-9_]{2,}")
LOCAL_REFERENCE = re.compile(r"\b(iteration|attempt)s? \d+", re.IGNORECASE)

# Weights of the parts of a failure in `Failure.similarity`; parts that neither side has are
# left out and the rest renormalised, so two shell failures compare by their messages alone.
SIGNATURE_WEIGHT, FILE_WEIGHT, RULE_WEIGHT, TYPE_WEIGHT, WORD_WEIGHT = 0.4, 0.2, 0.15, 0.05, 0.2


@dataclass
class Lesson:
    """A lesson learned in another loop, offered to this one (`source` is `loop#iteration`)."""

    id: str
    text: str
    source: str
    score: float = 0.0
    ts: float = 0.0  # when the record was written (POSIX time): the newest wording wins
    failure: str = ""  # which of the current failures it is for (`tests: tests/t.py::test_x`)
    offered: int = 0  # times it was given to an attempt (memory/merit.py), duplicates included
    helped: int = 0  # of those, the attempts that fixed the failure it is for

    def view(self) -> dict[str, str]:
        """The `{text, source, failure}` form `prompts.actor_prompt_context` takes."""
        return {"text": self.text, "source": self.source, "failure": self.failure}


@dataclass(frozen=True)
class Failure:
    """The comparable shape of a set of diagnostics: where, which rule or test, what words."""

    signatures: frozenset[str]  # type|file|rule of each located or ruled diagnostic
    files: frozenset[str]
    rules: frozenset[str]  # lint/type codes, test ids
    types: frozenset[str]
    words: frozenset[str]  # of the messages

    @classmethod
    def of(cls, errors: Iterable[tuple[str, str | None, str | None, str]]) -> Failure:
        """From (type, file, rule, message) tuples."""
        sigs: set[str] = set()
        files: set[str] = set()
        rules: set[str] = set()
        types: set[str] = set()
        words: set[str] = set()
        for kind, file, rule, message in list(errors)[:MAX_ERRORS]:
            types.add(kind)
            if file:
                files.add(file)
            if rule:
                rules.add(rule)
            if file or rule:
                sigs.add(f"{kind}|{file or ''}|{rule or ''}")
            words.update(WORD.findall((message or "")[:500].lower()))
        return cls(*(frozenset(s) for s in (sigs, files, rules, types, words)))

    @classmethod
    def of_diagnostics(cls, errors: Iterable[Any]) -> Failure:
        return cls.of((d.type, d.file, d.rule, d.message) for d in errors)

    @classmethod
    def of_json(cls, errors: Any) -> Failure:
        return cls.of(
            (str(e.get("type")), e.get("file"), e.get("rule"), str(e.get("message") or ""))
            for e in errors or []
            if isinstance(e, dict)
        )

    def parts(self) -> tuple[tuple[float, frozenset[str]], ...]:
        return (
            (SIGNATURE_WEIGHT, self.signatures),
            (FILE_WEIGHT, self.files),
            (RULE_WEIGHT, self.rules),
            (TYPE_WEIGHT, self.types),
            (WORD_WEIGHT, self.words),
        )

    def similarity(self, other: Failure) -> float:
        """Weighted Jaccard overlap in [0, 1]: 1 for the same diagnostics, 0 for nothing shared."""
        total = score = 0.0
        for (weight, mine), (_, theirs) in zip(self.parts(), other.parts(), strict=True):
            union = len(mine | theirs)
            if union:
                total += weight
                score += weight * len(mine & theirs) / union
        return min(1.0, round(score / total, 6)) if total else 0.0

    def tokens(self) -> list[str]:
        """Opaque single-word tokens of every part, for the FTS `signature` column."""
        out: list[str] = []
        for prefix, items in zip("sfrtw", (p for _, p in self.parts()), strict=True):
            out.extend(_token(prefix, item) for item in sorted(items))
        return out

    def query_tokens(self) -> list[str]:
        """The tokens that find similar failures: where and what; the words when nothing else."""
        located = [
            _token(prefix, item)
            for prefix, items in zip("sfr", (self.signatures, self.files, self.rules), strict=True)
            for item in sorted(items)
        ]
        return located or [_token("w", word) for word in sorted(self.words)]

    def to_json(self) -> list[list[str]]:
        return [sorted(p) for _, p in self.parts()]

    @classmethod
    def from_json(cls, data: str) -> Failure:
        return cls(*(frozenset(p) for p in json.loads(data)))


def _token(prefix: str, item: str) -> str:
    return prefix + hashlib.blake2b(item.encode(), digest_size=8).hexdigest()


def lesson_texts(sr: dict[str, Any]) -> list[str]:
    """A reflection's lessons; without any, its insights (those that make sense elsewhere)."""
    lessons = [s.strip() for s in sr.get("lessons_learned") or [] if isinstance(s, str)]
    lessons = [s for s in lessons if s]
    if not lessons:
        insights = [s.strip() for s in sr.get("actionable_insights") or [] if isinstance(s, str)]
        lessons = [s for s in insights if s and not LOCAL_REFERENCE.search(s)]
    if not lessons:
        root = (sr.get("credit_assignment") or {}).get("root_cause")
        lessons = [root.strip()] if isinstance(root, str) and root.strip() else []
    return lessons[:MAX_LESSONS]


def error_key(error: dict[str, Any]) -> str:
    """A recorded diagnostic's scope key (`records.FailureScope.key`)."""
    rule = error.get("rule")
    file = error.get("file")
    failure_id = rule if isinstance(rule, str) and rule else message_id(str(error.get("message")))
    return scope_key(failure_id, file if isinstance(file, str) else None)


def record_scope(ext: dict[str, Any], errors: list[dict[str, Any]]) -> dict[str, str]:
    """What a record's lessons are for, as {key: label}: its `ralph.failures` (the failures
    its attempt had to work on); a record written before they were kept, its diagnostics."""
    scope: dict[str, str] = {}
    failures = ext.get("failures")
    if isinstance(failures, list):
        for f in failures:
            if isinstance(f, dict) and isinstance(f.get("id"), str):
                file = f.get("file") if isinstance(f.get("file"), str) else None
                where = f["id"] if not f["id"].startswith("m:") else (file or f["id"])
                scope[scope_key(f["id"], file)] = f"{f.get('check') or 'check'}: {where}"
        return scope
    for e in errors:
        key = error_key(e)
        where = e.get("rule") or e.get("file") or clip_message(e.get("message"))
        scope.setdefault(key, f"{e.get('type') or 'error'}: {where}")
    return scope


def clip_message(message: Any) -> str:
    first = (str(message or "").strip().splitlines() or [""])[0]
    return first[:80]


def parse_lesson_id(lesson_id: str) -> tuple[str, int] | None:
    """`loop#iteration.k` -> (loop, iteration); None for an id of another shape."""
    match = re.fullmatch(r"(ralph-[a-z0-9-]+)#(\d+)(?:\.\d+)?", lesson_id)
    return (match.group(1), int(match.group(2))) if match else None


# --- choosing the lessons for the next prompt --------------------------------------------------
