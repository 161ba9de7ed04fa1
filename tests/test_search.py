"""`ralph reflections search`: BM25 (SQLite FTS5) over every loop's reflections, kept fresh."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from datetime import datetime
from pathlib import Path

import pytest

from ralph.memory.search import INDEX_NAME, SearchIndex
from ralph.memory.store import MemoryStore
from ralph.records import (
    ActorOutput,
    CreditAssignment,
    Diagnostic,
    EvaluatorOutput,
    IterationRecord,
    MemoryMetadata,
    RalphExtension,
    SelfReflection,
)

from .conftest import RunCli

TOPICS = {
    ("ralph-dates", 1): (
        "I assumed slash dates are day-first, but the tests expect US month-first order.",
        "Guessed the date format instead of reading the tests",
        "incorrect_assumption",
        0.8,
        "2026-01-10T10:00:00Z",
        Diagnostic("test_failure", "assert date(2024, 3, 4) == date(2024, 4, 3)", "t.py"),
    ),
    ("ralph-imports", 1): (
        "Ruff flagged an unused import I left after moving the helper into utils.",
        "Left the old import of os behind",
        "incomplete_implementation",
        0.6,
        "2026-02-10T10:00:00Z",
        Diagnostic("lint_error", "`os` imported but unused", "app.py", rule="F401"),
    ),
    ("ralph-timeout", 2): (
        "The HTTP client retried forever because the timeout was never passed down.",
        "The retry loop ignores the configured timeout",
        "logic_error",
        0.9,
        "2026-03-10T10:00:00Z",
        Diagnostic("timeout", "test_fetch timed out after 30 seconds", "net.py"),
    ),
    ("ralph-types", 1): (
        "mypy rejects passing an int where parse expects a string.",
        "Called parse with the raw integer from the CLI",
        "integration_error",
        0.7,
        "2026-04-10T10:00:00Z",
        Diagnostic("type_error", 'Argument 1 has incompatible type "int"', "cli.py"),
    ),
}


def make(key: tuple[str, int], *, passed: bool = False) -> IterationRecord:
    text, root, category, confidence, timestamp, error = TOPICS[key]
    return IterationRecord(
        loop_id=key[0],
        iteration=key[1],
        timestamp=timestamp,
        task_description=f"task of {key[0]}",
        actor_output=ActorOutput(actions=[], rationale="r"),
        evaluator_output=EvaluatorOutput(
            passed=passed, verification_type="combined", errors=[error], reward_signal=0.5
        ),
        self_reflection=SelfReflection(
            reflection_text=text,
            credit_assignment=CreditAssignment(root_cause=root, failure_category=category),  # type: ignore[arg-type]
            lessons_learned=[f"Lesson about {root.lower()}."],
            confidence=confidence,
        ),
        memory_metadata=MemoryMetadata(omega_capacity=3, current_memory_size=0),
        ralph=RalphExtension(reflection_source="llm"),
    )


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    s = MemoryStore(tmp_path)
    s.ensure()
    for key in TOPICS:
        s.write_record(make(key))
    return s


def ranked(store: MemoryStore, query: str, **filters: object) -> list[str]:
    with SearchIndex(store) as index:
        return [hit.loop_id for hit in index.search(query, **filters)]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("query", "first"),
    [
        ("date format month first", "ralph-dates"),
        ("unused import", "ralph-imports"),
        ("retry timeout http", "ralph-timeout"),
        ("incompatible type int string", "ralph-types"),
        ("F401", "ralph-imports"),
    ],
)
def test_the_obviously_relevant_record_ranks_first(
    store: MemoryStore, query: str, first: str
) -> None:
    assert ranked(store, query)[0] == first


def test_filters_category_confidence_loop_and_date(store: MemoryStore) -> None:
    query = "the"
    assert ranked(store, query, category="logic_error") == ["ralph-timeout"]
    assert set(ranked(store, query, min_confidence=0.75)) == {"ralph-dates", "ralph-timeout"}
    assert ranked(store, query, loop_id="ralph-imports") == ["ralph-imports"]
    since, until = datetime(2026, 2, 1), datetime(2026, 3, 31)
    assert set(ranked(store, query, since=since, until=until)) == {
        "ralph-imports",
        "ralph-timeout",
    }
    assert len(ranked(store, query, limit=2)) == 2


def test_the_index_follows_the_json_files(store: MemoryStore) -> None:
    assert ranked(store, "fibonacci") == []
    extra = make(("ralph-dates", 1))
    extra.loop_id, extra.iteration = "ralph-new", 3
    extra.self_reflection.reflection_text = "The fibonacci memo cache was never invalidated."
    store.write_record(extra)
    assert ranked(store, "fibonacci") == ["ralph-new"]
    changed = make(("ralph-dates", 1))
    changed.self_reflection.reflection_text = "Nothing about calendars any more: fibonacci."
    store.write_record(changed)
    assert set(ranked(store, "fibonacci")) == {"ralph-dates", "ralph-new"}
    assert ranked(store, "slash") == []  # the old text is gone from the index
    store.record_path("ralph-new", 3).unlink()
    assert ranked(store, "fibonacci") == ["ralph-dates"]


def test_sync_reports_progress_over_the_loops_it_reads(store: MemoryStore) -> None:
    hour_ago = time.time() - 3600  # folders this fresh are re-read every time, like git's racy
    for folder in (store.base / "reflections").iterdir():
        os.utime(folder, (hour_ago, hour_ago))
    calls: list[tuple[int, int]] = []
    with SearchIndex(store) as index:
        index.sync(lambda done, total: calls.append((done, total)))
    total = len({loop_id for loop_id, _ in TOPICS})
    assert calls == [(n, total) for n in range(total)]
    calls.clear()
    with SearchIndex(store) as index:
        index.sync(lambda done, total: calls.append((done, total)))
    assert calls == []  # nothing changed: nothing to read, nothing to show


def test_a_record_rewritten_within_the_same_clock_tick_is_still_seen(store: MemoryStore) -> None:
    folder = store.reflections_dir("ralph-dates")
    stat = folder.stat()
    ranked(store, "anything")  # indexed while the folder's time is recent
    record = make(("ralph-dates", 1))
    record.self_reflection.reflection_text = "zebra"
    store.write_record(record)
    os.utime(folder, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # a coarse clock: same time
    assert ranked(store, "zebra") == ["ralph-dates"]


def test_a_corrupt_or_foreign_index_is_rebuilt(store: MemoryStore) -> None:
    path = store.base / INDEX_NAME
    assert ranked(store, "unused import")[0] == "ralph-imports"
    for suffix in ("-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    path.write_bytes(b"garbage" * 1000)
    assert ranked(store, "unused import")[0] == "ralph-imports"
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 99")
    db.commit()
    db.close()
    assert ranked(store, "unused import")[0] == "ralph-imports"


def test_invalid_records_are_skipped_not_fatal(store: MemoryStore) -> None:
    bad = store.reflections_dir("ralph-broken")
    bad.mkdir()
    (bad / "001.json").write_text("{not json")
    (bad / "002.json").write_text(json.dumps({"loop_id": "ralph-broken"}))
    assert ranked(store, "unused import")[0] == "ralph-imports"


def test_cli_search_json_and_table(ralph: RunCli, store: MemoryStore) -> None:
    result = ralph("reflections", "search", "unused import", "--json", cwd=store.root)
    assert result.code == 0, result.err
    hits = json.loads(result.out)
    assert hits[0]["loop_id"] == "ralph-imports" and hits[0]["iteration"] == 1
    assert hits[0]["category"] == "incomplete_implementation"
    assert hits[0]["score"] > 0 and {"retrieved", "helped", "obsolete"} <= set(hits[0])
    table = ralph("reflections", "search", "unused import", "--limit", "1", cwd=store.root)
    assert table.code == 0 and "ralph-imports#1" in table.out and "ralph-dates" not in table.out
    rows = ralph("reflections", "search", "unused import", cwd=store.root).out.splitlines()
    shares = [int(row.split("\t")[0].rstrip("%")) for row in rows[1:]]
    assert shares[0] == 100 and shares == sorted(shares, reverse=True)  # relative to the best
    filtered = ralph(
        "reflections", "search", "the", "--category", "logic_error", "--json", cwd=store.root
    )
    assert [h["loop_id"] for h in json.loads(filtered.out)] == ["ralph-timeout"]
    since = ralph("reflections", "search", "the", "--since", "2026-04-01", "--json", cwd=store.root)
    assert [h["loop_id"] for h in json.loads(since.out)] == ["ralph-types"]
    none = ralph("reflections", "search", "xylophone", cwd=store.root)
    assert none.code == 0 and "no reflection matches" in none.out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["!!!"], "nothing to search for"),
        (["x", "--loop", "../etc"], "invalid loop id"),
        (["x", "--category", "typo"], "unknown failure category 'typo'"),
        (["x", "--since", "last tuesday"], "--since 'last tuesday' is not a date"),
    ],
)
def test_cli_search_bad_input_is_one_line(
    ralph: RunCli, store: MemoryStore, args: list[str], message: str
) -> None:
    result = ralph("reflections", "search", *args, cwd=store.root)
    assert result.code == 2 and message in result.err and "Traceback" not in result.err


def test_the_index_is_local_and_ignored_by_git(store: MemoryStore) -> None:
    ranked(store, "anything")
    assert (store.base / INDEX_NAME).exists()
    assert "search.sqlite*" in (store.base / ".gitignore").read_text().splitlines()


def test_search_needs_a_memory(ralph: RunCli, tmp_path: Path) -> None:
    result = ralph("reflections", "search", "anything", cwd=tmp_path)
    assert result.code == 2 and "no ralph memory here" in result.err


def test_lessons_for_a_running_loop_leave_its_own_folder_for_later(store: MemoryStore) -> None:
    from ralph.memory.lessons import Failure

    error = Diagnostic("test_failure", "assert 1 == 2", "t.py")
    running = make(("ralph-dates", 1))
    running.loop_id = "ralph-running"
    store.write_record(running)
    with SearchIndex(store) as index:
        index.similar_failures(Failure.of_diagnostics([error]), None, exclude_loop="ralph-running")
        mine = "SELECT count(*) FROM docs WHERE loop_id = 'ralph-running'"
        assert index.db.execute(mine).fetchone() == (0,)  # its growing folder was not listed
        others = "SELECT count(DISTINCT loop_id) FROM docs"
        assert index.db.execute(others).fetchone() == (len({k for k, _ in TOPICS}),)
    assert "ralph-running" in ranked(store, "slash")  # a later search sees it
