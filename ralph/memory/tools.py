"""ralph's memory as four read-only tools for an agent (`ralph mcp` serves them over MCP):
search past reflections, lessons for a failure, one record, the recent loops.

Each is a plain function of the store returning JSON data, so the server, the tests and any
other caller get the same answers. Every answer goes through the one redaction and has terminal
escapes taken out of its text: it reaches a model, and through it a person's terminal. Bad
arguments raise a RalphError with a one-line message (the server turns it into a tool error).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ralph.errors import ConfigError
from ralph.escapes import strip_escapes
from ralph.memory.lessons import lesson_texts
from ralph.records import FAILURE_CATEGORIES, Diagnostic, ErrorType, FailureScope
from ralph.redact import redact_data
from ralph.rendering import to_data

if TYPE_CHECKING:
    from ralph.memory.store import MemoryStore

SERVER_NAME = "ralph"  # the MCP server's name in an agent's configuration
TOOL_NAMES = ("search_reflections", "lessons_for", "get_reflection", "list_loops")
MAX_LIMIT = 50
MAX_FAILURE_CHARS = 20_000  # a pasted failure; the lessons' similarity reads 50 lines anyway


def clean(data: Any) -> Any:
    """An answer as it may leave ralph: redacted, without terminal escapes in any string."""
    return _strip(redact_data(data))


def _answer(data: dict[str, Any]) -> dict[str, Any]:
    cleaned: dict[str, Any] = clean(data)
    return cleaned


def _strip(data: Any) -> Any:
    if isinstance(data, str):
        return strip_escapes(data)
    if isinstance(data, dict):
        return {str(k): _strip(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_strip(v) for v in data]
    return data


def _limit(value: int, name: str = "limit") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        raise ConfigError(f"{name} must be a whole number from 1 to {MAX_LIMIT}, got {value!r}")
    return value


def search_reflections(
    store: MemoryStore, query: str, limit: int = 5, category: str | None = None
) -> dict[str, Any]:
    """Reflections of every loop ranked as `ralph reflections search` ranks them (BM25), each
    with its task, root cause, category, lessons and reward."""
    from ralph.memory.merit import scope_of
    from ralph.memory.search import SearchIndex

    limit = _limit(limit)
    if category is not None and category not in FAILURE_CATEGORIES:
        raise ConfigError(
            f"unknown failure category {category!r}; one of: {', '.join(FAILURE_CATEGORIES)}"
        )
    store.require()
    # the failures the query names (test ids, file:line: messages): a record whose lessons are
    # for one of them ranks first, the rest as bm25 ranks them
    wanted = {FailureScope.of("", d).key for d in failure_diagnostics(query[:MAX_FAILURE_CHARS])}
    with SearchIndex(store) as index:
        hits = index.search(query, category=category, limit=MAX_LIMIT)
        scopes = {(h.loop_id, h.iteration): scope_of(index, h.loop_id, h.iteration) for h in hits}
    matched = {
        at: [label for key, label in scope.items() if key in wanted] for at, scope in scopes.items()
    }
    hits = sorted(hits, key=lambda h: not matched[(h.loop_id, h.iteration)])[:limit]
    results = []
    for hit in hits:
        item: dict[str, Any] = {
            "loop_id": hit.loop_id,
            "iteration": hit.iteration,
            "score": round(hit.score, 4),
            "category": hit.category,
            "root_cause": hit.root_cause,
            "summary": hit.summary,
            "passed": hit.passed,
            "obsolete": hit.obsolete,
            "for_failures": list(scopes[(hit.loop_id, hit.iteration)].values())[:10],
            "matches_failure": matched[(hit.loop_id, hit.iteration)],
        }
        try:
            record = store.read_record(hit.loop_id, hit.iteration).to_json()
        except Exception:  # changed since it was indexed: the hit still says what it can
            record = {}
        item["task"] = record.get("task_description")
        item["lessons"] = lesson_texts(record.get("self_reflection") or {})
        item["reward"] = (record.get("evaluator_output") or {}).get("reward_signal")
        results.append(item)
    return _answer({"query": query, "results": results})


def lessons_for(store: MemoryStore, failure: str, limit: int = 3) -> dict[str, Any]:
    """Lessons of past loops whose failures resemble `failure` (pasted check output), chosen as
    the prompt's are (`retrieval.retrieve_lessons`: obsolete reflections never, people's
    verdicts first, rejected work as a lesson)."""
    from ralph.memory.retrieval import retrieve_lessons

    limit = _limit(limit)
    if not isinstance(failure, str) or not failure.strip():
        raise ConfigError("failure is empty: paste the failing output (file:line: message)")
    errors = failure_diagnostics(failure[:MAX_FAILURE_CHARS])
    store.require()
    lessons = retrieve_lessons(store, exclude_loop=None, current_errors=errors, limit=limit)
    return _answer(
        {
            "lessons": [
                {
                    "text": lesson.text,
                    "source": lesson.source,
                    "failure": lesson.failure,
                    "score": lesson.score,
                }
                for lesson in lessons
            ]
        }
    )


def get_reflection(store: MemoryStore, loop_id: str, iteration: int) -> dict[str, Any]:
    """One iteration's record as stored (`ralph reflections show --json`)."""
    from ralph.memory.shown import record_data

    if isinstance(iteration, bool) or not isinstance(iteration, int) or iteration < 0:
        raise ConfigError(f"iteration must be a whole number >= 0, got {iteration!r}")
    store.require()
    data = record_data(store, store.resolve_loop_id(loop_id), iteration)
    return _answer(data if isinstance(data, dict) else {"record": data})


def list_loops(store: MemoryStore, limit: int = 20) -> dict[str, Any]:
    """The most recent loops, newest first, with status, iterations and best reward."""
    from ralph.memory.listing import list_loops as listing

    limit = _limit(limit)
    store.require()
    rows = list(reversed(listing(store)))[:limit]
    return _answer({"loops": to_data(rows)})


# --- a pasted failure as diagnostics --------------------------------------------------------
# The shapes the checks print, so a failure pasted from their output compares with the
# recorded ones by file, rule and test id (memory/lessons.Failure), not by its words alone.
TEST_ID = re.compile(
    r"(?:FAILED|ERROR)?\s*(?P<id>(?P<file>[\w./-]+\.py)::\S+)(?:\s+-\s+(?P<msg>.*))?"
)
LOCATED = re.compile(r"(?P<file>[\w./-]+\.\w+):(?P<line>\d+)(?::\d+)?:\s*(?P<rest>.*)")
MYPY_CODE = re.compile(r"^(?:error|note|warning):\s*(?P<msg>.*?)\s*\[(?P<code>[\w-]+)\]\s*$")
RUFF_CODE = re.compile(r"^(?P<code>[A-Z]{1,4}\d{2,4})\s+(?P<msg>.*)$")
SYNTAX = ("SyntaxError", "IndentationError", "TabError")


def failure_diagnostics(text: str) -> list[Diagnostic]:
    """One diagnostic a line: a pytest id (`tests/t.py::test_x - msg`), a type error
    (`f.py:3: error: msg [code]`), a lint finding (`f.py:3:1: F401 msg`), a located error
    (`f.py:3: ValueError: msg`), or the line's words."""
    found: list[Diagnostic] = []
    for raw in text.splitlines():
        line = raw.strip()
        if line:
            found.append(_diagnostic(line))
    return found[:50]


def _diagnostic(line: str) -> Diagnostic:
    test = TEST_ID.match(line)
    if test:
        message = test["msg"] or "failed"
        return Diagnostic("test_failure", message, file=test["file"], rule=test["id"])
    located = LOCATED.match(line)
    if located:
        file, number, rest = located["file"], int(located["line"]), located["rest"]
        typed = MYPY_CODE.match(rest)
        if typed:
            return Diagnostic(
                "type_error", typed["msg"], file=file, line=number, rule=typed["code"]
            )
        lint = RUFF_CODE.match(rest)
        if lint:
            return Diagnostic("lint_error", lint["msg"], file=file, line=number, rule=lint["code"])
        kind: ErrorType = "syntax_error" if rest.startswith(SYNTAX) else "runtime_error"
        return Diagnostic(kind, rest, file=file, line=number)
    return Diagnostic("other", line)
