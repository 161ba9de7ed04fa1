"""Lessons for the next prompt: other loops' failures like this one (FTS5 candidates from
`search`, scored by `Failure.similarity`), people's verdicts first (`feedback`), near-duplicates
dropped, the rest fitted to the token budget. See `lessons` for the rules."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from ralph.memory.feedback import boost_confirmed, feedback_lessons
from ralph.memory.lessons import (
    DUPLICATE_THRESHOLD,
    LESSON_MAX_TOKENS,
    LESSON_TOKENS,
    SIMILARITY_THRESHOLD,
    Failure,
    Lesson,
)
from ralph.memory.merit import RETIRE_AFTER, Merit, merits
from ralph.memory.search import SearchIndex
from ralph.memory.transfer import imported_from
from ralph.records import FailureScope
from ralph.templates import TRUNCATION_MARKER, estimate_tokens

if TYPE_CHECKING:
    from ralph.memory.store import MemoryStore
    from ralph.records import Diagnostic


def retrieve_lessons(
    store: MemoryStore,
    *,
    exclude_loop: str | None,
    current_errors: Sequence[Diagnostic],
    fingerprint: str | None = None,
    limit: int = 3,
    threshold: float = SIMILARITY_THRESHOLD,
    token_budget: int = LESSON_TOKENS,
    before: float | None = None,
    retire_after: int = RETIRE_AFTER,
) -> list[Lesson]:
    """The lessons of other loops' failures most like the current one (at most `limit`);
    with `before` (epoch seconds), only from records written before then. A lesson offered
    `retire_after` times without helping is retired (`merit`); one that helped ranks higher."""
    if limit < 1 or token_budget < 1 or not (current_errors or fingerprint):
        return []
    current = Failure.of_diagnostics(current_errors)
    with SearchIndex(store) as index:
        candidates = index.similar_failures(
            current, fingerprint, exclude_loop=exclude_loop, before=before
        )
        earned = merits(index, store) if candidates else {}
    # a lesson is for the failures its record had to work on: offered only when one of them is
    # among the current ones (the loop's targets and regressions), never for another's failure
    current_keys = {FailureScope.of("", d).key for d in current_errors}
    lessons: list[Lesson] = []
    for candidate in candidates:
        matched = [label for key, label in candidate.scope.items() if key in current_keys]
        if not matched:
            continue
        same = bool(fingerprint) and candidate.fingerprint == fingerprint
        similarity = 1.0 if same else current.similarity(candidate.failure)
        score = 0.5 + 0.5 * similarity  # a matched failure first, then the likeness of the rest
        for k, text in enumerate(candidate.lessons):
            lessons.append(
                Lesson(
                    id=f"{candidate.loop_id}#{candidate.iteration}.{k}",
                    text=text,
                    source=f"{candidate.loop_id}#{candidate.iteration}",
                    score=round(score, 4),
                    ts=candidate.ts,
                    failure=", ".join(matched[:3]),
                    **_counts(earned, f"{candidate.loop_id}#{candidate.iteration}.{k}"),
                )
            )
    # people's verdicts first
    lessons = boost_confirmed(store, lessons) + feedback_lessons(
        store, exclude_loop=exclude_loop, current=current, fingerprint=fingerprint,
        threshold=threshold,
    )  # fmt: skip
    merged = deduplicate(lessons)
    alive = [m for m in merged if not Merit(m.offered, m.helped).retired(retire_after)]
    kept = fit_lessons(alive, limit=limit, token_budget=token_budget)
    return said_where_from(store, kept)


def _counts(earned: dict[str, Merit], lesson_id: str) -> dict[str, int]:
    merit = earned.get(lesson_id, Merit())
    return {"offered": merit.offered, "helped": merit.helped}


def said_where_from(store: MemoryStore, lessons: list[Lesson]) -> list[Lesson]:
    """An imported lesson's source names the archive it came from (`transfer.imported_from`):
    another machine's notes are not this project's experience, and the prompt says so."""
    imported = imported_from(store) if lessons else {}
    return [
        replace(m, source=f"{m.source}, imported from {imported[m.source]}")
        if m.source in imported
        else m
        for m in lessons
    ]


STOP_WORDS = frozenset(
    {"a", "an", "and", "are", "as", "at", "be", "by", "for", "in", "is", "it", "of", "on", "or"}
    | {"that", "the", "this", "to", "with"}
)


def _words(text: str) -> frozenset[str]:
    """The words that carry a lesson's meaning, for near-duplicate detection."""
    return frozenset(re.findall(r"\w+", text.lower())) - STOP_WORDS


def deduplicate(lessons: Iterable[Lesson]) -> list[Lesson]:
    """Near-identical lessons count once: the group keeps its best score and its newest text,
    and its members' counts add up; one that helped ranks first among equal matches."""
    groups: list[tuple[frozenset[str], list[Lesson]]] = []
    for lesson in lessons:
        words = _words(lesson.text)
        if not words:
            continue
        for key, members in groups:
            if len(key & words) / len(key | words) >= DUPLICATE_THRESHOLD:
                members.append(lesson)
                break
        else:
            groups.append((words, [lesson]))
    kept = []
    for _, members in groups:
        newest = max(members, key=lambda m: (m.ts, m.source))
        best = max(m.score for m in members)
        offered = sum(m.offered for m in members)
        helped = sum(m.helped for m in members)
        kept.append(replace(newest, score=best, offered=offered, helped=helped))
    return sorted(kept, key=lambda m: (-m.score, -m.helped, -m.ts, m.id))


def fit_lessons(ranked: Sequence[Lesson], *, limit: int, token_budget: int) -> list[Lesson]:
    """The best `limit` lessons, each capped, that fit the budget together (best first)."""
    kept: list[Lesson] = []
    used = 0
    for lesson in ranked:
        if len(kept) == limit:
            break
        text = lesson.text
        if estimate_tokens(text) > LESSON_MAX_TOKENS:
            cut = LESSON_MAX_TOKENS * 4 - len(TRUNCATION_MARKER)
            text = text[:cut].rstrip() + TRUNCATION_MARKER
        cost = estimate_tokens(text)
        if used + cost > token_budget:
            continue
        kept.append(replace(lesson, text=text))
        used += cost
    return kept
