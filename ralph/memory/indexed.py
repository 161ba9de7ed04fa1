"""What a record puts in the search index: the tables (`SCHEMA`) and a record's row, its
searchable texts and the lessons it used (`record_document`). The two change together, and
`INDEX_VERSION` with them: an index of another version is rebuilt."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from ralph.glyphs import clip
from ralph.memory.lessons import (
    MAX_ERRORS,
    Failure,
    error_key,
    lesson_texts,
    parse_lesson_id,
    record_scope,
)

INDEX_VERSION = 4  # bump when what is indexed changes: an index of another version is rebuilt

SCHEMA = """
CREATE TABLE IF NOT EXISTS loops (loop_id TEXT PRIMARY KEY, mtime_ns INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS docs (
    id INTEGER PRIMARY KEY, loop_id TEXT NOT NULL, iteration INTEGER NOT NULL,
    mtime_ns INTEGER, size INTEGER, inode INTEGER, valid INTEGER NOT NULL,
    ts REAL, timestamp TEXT, passed INTEGER, obsolete INTEGER, category TEXT, confidence REAL,
    fingerprint TEXT, improved INTEGER, summary TEXT, root_cause TEXT, failure TEXT,
    lessons TEXT, scope TEXT, UNIQUE (loop_id, iteration));
CREATE INDEX IF NOT EXISTS docs_fingerprint ON docs (fingerprint);
CREATE TABLE IF NOT EXISTS uses (doc INTEGER NOT NULL, source_loop TEXT NOT NULL,
    source_iteration INTEGER NOT NULL, lesson TEXT NOT NULL, improved INTEGER);
CREATE INDEX IF NOT EXISTS uses_source ON uses (source_loop, source_iteration);
CREATE INDEX IF NOT EXISTS uses_doc ON uses (doc);
CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5 (
    task, reflection, root_cause, insights, lessons, errors, tokenize = 'porter unicode61');
CREATE VIRTUAL TABLE IF NOT EXISTS failures USING fts5 (tokens, tokenize = 'unicode61');
CREATE VIRTUAL TABLE IF NOT EXISTS failures_terms USING fts5vocab (failures, row);
"""


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def record_document(
    data: Any, loop_id: str, iteration: int
) -> tuple[tuple[Any, ...], tuple[str, ...], list[tuple[str, int, str, int | None]]]:
    """(docs row, fts texts, uses) of a parsed record; KeyError, TypeError, ValueError if bad."""
    if not isinstance(data, dict) or data["loop_id"] != loop_id or data["iteration"] != iteration:
        raise ValueError("not this loop's record")
    ev, sr = data["evaluator_output"], data["self_reflection"]
    text = sr["reflection_text"]
    if not isinstance(text, str) or not isinstance(ev["passed"], bool):
        raise ValueError("malformed record")
    credit = sr.get("credit_assignment") or {}
    ext = data.get("ralph") or {}
    delta = data.get("performance_delta") or {}
    errors = [e for e in (ev.get("errors") or [])[:MAX_ERRORS] if isinstance(e, dict)]
    scope = record_scope(ext, errors)
    # the failure its lessons are for: the diagnostics in its scope, not a guard's old ones
    scoped = [e for e in errors if error_key(e) in scope] if ext.get("failures") else errors
    failure = Failure.of_json(scoped)
    lessons = lesson_texts(sr)
    confidence = sr.get("confidence")
    improved = delta.get("is_improvement")
    timestamp = str(data["timestamp"])
    try:
        ts = datetime.fromisoformat(timestamp).timestamp()
    except ValueError:
        ts = 0.0
    root = credit.get("root_cause")
    row = (
        ts,
        timestamp,
        int(ev["passed"]),
        int(bool(ext.get("obsolete"))),
        credit.get("failure_category"),
        float(confidence) if isinstance(confidence, int | float) else None,
        ext.get("error_fingerprint") or None,
        None if improved is None else int(bool(improved)),
        clip((text.strip().splitlines() or [""])[0], 200),
        root if isinstance(root, str) and root else None,
        json.dumps(failure.to_json()),
        json.dumps(lessons) if lessons else None,
        json.dumps(scope) if scope else None,
    )
    error_text = "\n".join(
        " ".join(_text(e.get(k)) for k in ("type", "file", "rule")) + " " + _text(e.get("message"))
        for e in errors
    )
    wanted = not ev["passed"] and lessons and not ext.get("obsolete")
    texts = (
        _text(data.get("task_description")),
        text + "\n" + _text(sr.get("causal_reasoning")),
        _text(root),
        "\n".join(_text(s) for s in sr.get("actionable_insights") or []),
        "\n".join(_text(s) for s in sr.get("lessons_learned") or []),
        error_text,
        " ".join(failure.tokens()) if wanted else "",
    )
    uses = []
    for lesson_id in ext.get("lessons_used") or []:
        source = parse_lesson_id(str(lesson_id))
        if source is not None:
            uses.append((source[0], source[1], str(lesson_id), row[7]))
    return row, texts, uses
