"""Search across every loop's reflections, and find the failures that resemble the current one.

An SQLite FTS5 index, `.aiwg/ralph/search.sqlite`, over each record's task, reflection, root
cause, insights, lessons and error messages; ranking is FTS5's own bm25(). The JSON records stay
the source of truth, and the index is brought up to date before every query, cheaply: a loop's
folder is listed again only when its modification time changed (every record write is an atomic
rename inside that folder, so it always does), and a file is read again only when its (mtime,
size, inode) changed. A folder modified in the last seconds is not trusted to stay that way (the
"racy timestamp" problem: a second write in the same clock tick leaves the time unchanged), so it
is listed again next time. (A file rewritten in place, not through a rename, changes no folder
time: it is seen once anything else in its loop's folder changes, or after deleting the index.)
An index that is corrupt is deleted and rebuilt; one that cannot be written (a read-only
checkout) is built in memory.

Usage is derived, never stored on its own: a record lists the lessons its prompt was given
(`ralph.lessons_used`, ids `loop#iteration.k`), so a reflection was retrieved as often as records
name it, and it helped each time the record that used it improved
(`performance_delta.is_improvement`). An obsolete mark is the record's `ralph.obsolete`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ralph.errors import StoreError
from ralph.files import RACY_NS, atomic_write_text
from ralph.ids import LOOP_ID_PATTERN
from ralph.memory.indexed import INDEX_VERSION, SCHEMA, record_document
from ralph.memory.lessons import (
    ENVIRONMENT_CATEGORY,
    Failure,
)
from ralph.memory.sqlite_cache import create, open_cache
from ralph.memory.store import MAX_RECORD_BYTES, RECORD_NAME, MemoryStore
from ralph.reading import read_json_bounded

INDEX_NAME = "search.sqlite"
# bm25 column weights for `ralph reflections search`: the root cause and lessons say most.
# bm25 weights of the columns: task, reflection, root_cause, insights, lessons, errors
SEARCH_WEIGHTS = (0.5, 1.0, 2.0, 1.0, 1.5, 1.0)
CANDIDATES = 100
# A query's terms, rarest first, are kept while the documents they match stay under this many:
# bm25() scores every matching row, so this bounds a query's cost however large the memory is,
# and the rarest terms are the ones that decide a bm25 ranking anyway.
MATCH_BUDGET = 5000

# --- results -----------------------------------------------------------------------------------


@dataclass
class Hit:
    """One search result."""

    loop_id: str
    iteration: int
    score: float  # BM25 relevance, to four decimals
    timestamp: str
    category: str | None
    confidence: float | None
    passed: bool
    obsolete: bool
    summary: str
    root_cause: str | None
    retrieved: int = 0
    helped: int = 0


@dataclass
class Candidate:
    """A failure of another loop that may resemble the current one, with its lessons."""

    loop_id: str
    iteration: int
    ts: float
    failure: Failure
    fingerprint: str | None
    lessons: list[str]
    scope: dict[str, str] = field(default_factory=dict)  # what its lessons are for: key -> label


@dataclass
class LessonUsage:
    """How often a reflection's lessons were given to other attempts, and how often that helped."""

    retrieved: int
    helped: int
    used_by: list[str]

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


# --- the index ---------------------------------------------------------------------------------


class SearchIndex:
    """Open, sync, query; use as a context manager (`with SearchIndex(store) as index:`)."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self.db = self._open()
        self._synced = False

    def __enter__(self) -> SearchIndex:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self.db.close()

    # opening ------------------------------------------------------------------------------
    def _open(self) -> sqlite3.Connection:
        if self.store.base.is_dir():
            _ignore_in_git(self.store)
            db = open_cache(
                self.store.base / INDEX_NAME,
                version=INDEX_VERSION,
                schema=SCHEMA,
                timeout=10.0,
                pragmas=("journal_mode = WAL", "synchronous = NORMAL"),
            )
            if db is not None:
                return db
        # no memory yet, or read-only or busy: build it in memory
        return create(sqlite3.connect(":memory:"), version=INDEX_VERSION, schema=SCHEMA)

    # keeping it fresh ---------------------------------------------------------------------
    def sync(
        self, progress: Callable[[int, int], None] | None = None, *, skip: str | None = None
    ) -> None:
        """Bring the index up to the JSON files; cheap when little changed.

        `progress(done, total)` hears about each changed loop: a first build over a large
        memory takes seconds, and a person should see it move. `skip` leaves one loop's changes
        for a later sync: the running loop, whose folder changes every iteration, asking for
        lessons of the others (re-listing its growing folder each time would cost O(iteration)).
        """
        if self._synced:
            return
        known = dict(self.db.execute("SELECT loop_id, mtime_ns FROM loops"))
        changed, seen = self._changed_loops(known)
        changed = [loop for loop in changed if loop[0] != skip]
        now = time.time_ns()
        try:
            with self.db:
                for done, (loop_id, path, mtime) in enumerate(changed):
                    if progress is not None:
                        progress(done, len(changed))
                    self._sync_loop(loop_id, path)
                    stamp = mtime if now - mtime > RACY_NS else -1
                    self.db.execute("INSERT OR REPLACE INTO loops VALUES (?, ?)", (loop_id, stamp))
                for gone in set(known) - seen:
                    self._forget(gone, None)
                    self.db.execute("DELETE FROM loops WHERE loop_id = ?", (gone,))
        except sqlite3.OperationalError as exc:
            raise StoreError(
                f"cannot update the search index {self.store.base / INDEX_NAME}: {exc}",
                hint="another ralph may be writing it; try again, or delete the file",
            ) from None
        self._synced = skip is None

    def _changed_loops(self, known: dict[str, int]) -> tuple[list[tuple[str, str, int]], set[str]]:
        """Loop folders whose time differs from the index's, and every loop folder's name.

        The one cost paid on every query (a stat per loop), so it is kept to the bare minimum.
        """
        changed: list[tuple[str, str, int]] = []
        seen: set[str] = set()
        try:
            entries = os.scandir(self.store.base / "reflections")
        except OSError:
            return changed, seen
        with entries:
            for entry in entries:
                name = entry.name
                try:
                    mtime = entry.stat().st_mtime_ns
                except OSError:
                    continue
                if known.get(name) == mtime:
                    seen.add(name)
                elif LOOP_ID_PATTERN.fullmatch(name) and entry.is_dir():
                    seen.add(name)
                    changed.append((name, entry.path, mtime))
        return changed, seen

    def _sync_loop(self, loop_id: str, path: str) -> None:
        rows = {
            it: (doc, (m, s, i))
            for doc, it, m, s, i in self.db.execute(
                "SELECT id, iteration, mtime_ns, size, inode FROM docs WHERE loop_id = ?",
                (loop_id,),
            )
        }
        present: set[int] = set()
        for entry in _scandir(path):
            match = RECORD_NAME.match(entry.name)
            if not match:
                continue
            iteration = int(match.group(1))
            try:
                st = entry.stat()
            except OSError:
                continue
            present.add(iteration)
            key = (st.st_mtime_ns, st.st_size, st.st_ino)
            row = rows.get(iteration)
            if row is not None and row[1] == key:
                continue
            if row is not None:
                self._forget(loop_id, iteration)
            self._add(loop_id, iteration, entry.path, key)
        for iteration in set(rows) - present:
            self._forget(loop_id, iteration)

    def _forget(self, loop_id: str, iteration: int | None) -> None:
        if iteration is None:
            docs = "SELECT id FROM docs WHERE loop_id = ?"
            args: tuple[Any, ...] = (loop_id,)
        else:
            docs = "SELECT id FROM docs WHERE loop_id = ? AND iteration = ?"
            args = (loop_id, iteration)
        self.db.execute(f"DELETE FROM fts WHERE rowid IN ({docs})", args)
        self.db.execute(f"DELETE FROM failures WHERE rowid IN ({docs})", args)
        self.db.execute(f"DELETE FROM uses WHERE doc IN ({docs})", args)
        self.db.execute(f"DELETE FROM docs WHERE id IN ({docs})", args)

    def _add(self, loop_id: str, iteration: int, path: str, key: tuple[int, int, int]) -> None:
        try:
            data = read_json_bounded(path, MAX_RECORD_BYTES)  # Unreadable is a ValueError
            doc = record_document(data, loop_id, iteration)
        except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
            # unreadable or malformed: remembered, so it is not read again until it changes
            self.db.execute(
                "INSERT INTO docs (loop_id, iteration, mtime_ns, size, inode, valid)"
                " VALUES (?, ?, ?, ?, ?, 0)",
                (loop_id, iteration, *key),
            )
            return
        row, texts, uses = doc
        cursor = self.db.execute(
            "INSERT INTO docs (loop_id, iteration, mtime_ns, size, inode, valid, ts, timestamp,"
            " passed, obsolete, category, confidence, fingerprint, improved, summary,"
            " root_cause, failure, lessons, scope) VALUES (?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?,"
            " ?, ?, ?, ?, ?, ?)",
            (loop_id, iteration, *key, *row),
        )
        doc_id = cursor.lastrowid
        self.db.execute(
            "INSERT INTO fts (rowid, task, reflection, root_cause, insights, lessons, errors)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (doc_id, *texts[:-1]),
        )
        if texts[-1]:  # a failure with lessons to give
            self.db.execute(
                "INSERT INTO failures (rowid, tokens) VALUES (?, ?)", (doc_id, texts[-1])
            )
        self.db.executemany(
            "INSERT INTO uses VALUES (?, ?, ?, ?, ?)", [(doc_id, *use) for use in uses]
        )

    # queries ------------------------------------------------------------------------------
    def search(
        self,
        query: str,
        *,
        category: str | None = None,
        min_confidence: float | None = None,
        loop_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 10,
    ) -> list[Hit]:
        """Records ranked by bm25 relevance to the query's words, best first."""
        words = re.findall(r"\w+", query.lower())
        if not words:
            raise StoreError(
                f"nothing to search for in {query!r}", hint="give some words, e.g. 'date format'"
            )
        self.sync()
        counts = {
            w: self.db.execute(
                "SELECT COUNT(*) FROM fts WHERE fts MATCH ?", (_quote(w),)
            ).fetchone()[0]
            for w in dict.fromkeys(words)
        }
        where, args = [], []
        for clause, value in (
            ("d.category = ?", category),
            ("d.confidence >= ?", min_confidence),
            ("d.loop_id = ?", loop_id),
            ("d.ts >= ?", _epoch(since)),
            ("d.ts <= ?", _epoch(until)),
        ):
            if value is not None:
                where.append(f" AND {clause}")
                args.append(value)
        weights = ", ".join(str(w) for w in SEARCH_WEIGHTS)
        sql = (
            f"SELECT d.loop_id, d.iteration, bm25(fts, {weights}) AS score, d.timestamp,"
            " d.category, d.confidence, d.passed, d.obsolete, d.summary, d.root_cause"
            f" FROM fts JOIN docs d ON d.id = fts.rowid WHERE fts MATCH ?{''.join(where)}"
            " ORDER BY score LIMIT ?"
        )
        chosen = self._rarest(counts)
        present = [w for w, n in counts.items() if n]
        if not present:
            return []
        rows = self.db.execute(sql, [" OR ".join(map(_quote, chosen)), *args, limit]).fetchall()
        if len(rows) < limit and len(chosen) < len(present):
            # too few among the rarest terms' matches: the full query, whatever it costs
            full = " OR ".join(map(_quote, present))
            rows = self.db.execute(sql, [full, *args, limit]).fetchall()
        hits = [
            Hit(lp, it, round(-score, 4), ts, cat, conf, bool(passed), bool(obs), summary, root)
            for lp, it, score, ts, cat, conf, passed, obs, summary, root in rows
        ]
        for hit in hits:
            usage = self.usage(hit.loop_id, hit.iteration)
            hit.retrieved, hit.helped = usage.retrieved, usage.helped
        return hits

    def similar_failures(
        self,
        failure: Failure,
        fingerprint: str | None,
        *,
        exclude_loop: str | None,
        before: float | None = None,
    ) -> list[Candidate]:
        """Failed, non-obsolete records of other loops sharing something with `failure`.

        bm25 over the opaque failure tokens picks the candidates (rare tokens such as one test id
        outweigh common ones such as an error type); the caller scores them exactly.
        """
        self.sync(skip=exclude_loop)
        base = (
            "SELECT d.loop_id, d.iteration, d.ts, d.failure, d.fingerprint, d.lessons, d.scope"
            " FROM docs d WHERE d.valid = 1 AND d.passed = 0 AND d.obsolete = 0"
            " AND d.lessons IS NOT NULL AND d.loop_id IS NOT ?"
            # an environment's failure (tests that could not be imported) teaches nothing
            f" AND d.category IS NOT '{ENVIRONMENT_CATEGORY}'"
            + (" AND d.ts < ?" if before is not None else "")
        )
        scope: tuple[Any, ...] = (exclude_loop,) if before is None else (exclude_loop, before)
        rows: dict[tuple[str, int], Any] = {}
        tokens = list(dict.fromkeys(failure.query_tokens()))
        counts = dict.fromkeys(tokens, 0)
        marks = ", ".join("?" * len(tokens))
        counts.update(
            self.db.execute(f"SELECT term, doc FROM failures_terms WHERE term IN ({marks})", tokens)
        )
        chosen = self._rarest(counts)
        if chosen:
            sql = base.replace("FROM docs d", "FROM failures f JOIN docs d ON d.id = f.rowid")
            for row in self.db.execute(
                sql + " AND failures MATCH ? ORDER BY bm25(failures) LIMIT ?",
                (*scope, " OR ".join(chosen), CANDIDATES),
            ):
                rows[(row[0], row[1])] = row
        if fingerprint:
            for row in self.db.execute(
                base + " AND d.fingerprint = ? LIMIT ?", (*scope, fingerprint, CANDIDATES)
            ):
                rows[(row[0], row[1])] = row
        return [
            Candidate(
                lp,
                it,
                ts or 0.0,
                Failure.from_json(feat),
                fp,
                json.loads(lessons),
                json.loads(held) if held else {},
            )
            for lp, it, ts, feat, fp, lessons, held in rows.values()
        ]

    def _rarest(self, counts: dict[str, int]) -> list[str]:
        """The terms worth matching: rarest first, within MATCH_BUDGET documents (at least one).

        Terms in half the documents or more are left out: FTS5's bm25 clamps their IDF to ~0,
        so they cannot change a ranking, but scoring their rows would cost the most.
        """
        present = sorted((n, t) for t, n in counts.items() if n > 0)
        total = self.db.execute("SELECT COUNT(*) FROM docs").fetchone()[0]  # O(1), unlike WHERE
        chosen: list[str] = []
        matched = 0
        for n, term in present:
            if chosen and (matched + n > MATCH_BUDGET or 2 * n >= total):
                break
            chosen.append(term)
            matched += n
        return chosen

    def usage(self, loop_id: str, iteration: int) -> LessonUsage:
        """How often the reflection's lessons were injected, and how often that attempt improved."""
        self.sync()
        users = self.db.execute(
            "SELECT DISTINCT d.loop_id, d.iteration, u.improved FROM uses u"
            " JOIN docs d ON d.id = u.doc WHERE u.source_loop = ? AND u.source_iteration = ?"
            " ORDER BY d.loop_id, d.iteration",
            (loop_id, iteration),
        ).fetchall()
        return LessonUsage(
            retrieved=len(users),
            helped=sum(1 for *_, improved in users if improved),
            used_by=[f"{lp}#{it}" for lp, it, _ in users],
        )


def _ignore_in_git(store: MemoryStore) -> None:
    """Memory written before the search index existed has a .gitignore that does not name it."""
    path = store.base / ".gitignore"
    with contextlib.suppress(OSError, StoreError):
        text = path.read_text("utf-8")
        if "search.sqlite" not in text:
            atomic_write_text(path, text.rstrip("\n") + "\nsearch.sqlite*\n")


def _scandir(folder: Any) -> Iterator[os.DirEntry[str]]:
    try:
        yield from os.scandir(folder)
    except FileNotFoundError:
        return


def _quote(word: str) -> str:
    return '"' + word.replace('"', '""') + '"'


def _epoch(when: datetime | None) -> float | None:
    if when is None:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()
