"""`FactsReader`: the facts `ralph analyze` uses of each file (facts.py), read through an
optional SQLite cache of them.

Reading 20,000 records means 20,000 `json.loads` of a few kilobytes each; analysing them needs a
dozen fields of each. Those fields are kept in `.aiwg/ralph/index.sqlite`, each file's under its
(mtime_ns, size, inode). The JSON files stay the source of truth: a changed file is read again,
a vanished one forgotten, and a cache that cannot be opened, read or written is simply not used
(it is deleted and rebuilt when corrupt). The cache is local, ignored by git (see the store's
`.gitignore`). A file whose facts cannot be extracted is validated against the schema, for its
reasons.

The cache holds one row per folder (a loop's records, a loop's state): a warm run decodes a
thousand small JSON lists rather than twenty thousand, a cold one encodes as few, and every
file is still checked against its own stat. It is written once, at the end, in one transaction;
a cold read of many loops is split with a second process (prefetch.py).
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any, TypeVar

from ralph.analyze.facts import (
    IterationFacts,
    LoopFiles,
    StateFacts,
    record_facts,
    record_values,
    state_facts,
    state_values,
)
from ralph.analyze.prefetch import Prefetch
from ralph.errors import StoreError
from ralph.memory.sqlite_cache import open_cache
from ralph.memory.store import (
    MAX_RECORD_BYTES,
    MAX_STATE_BYTES,
    RECORD_NAME,
    MemoryStore,
    load_record_file,
    parse_state,
)
from ralph.reading import Unreadable, read_json_bounded

INDEX_NAME = "index.sqlite"
# Bump when the extracted fields change: an index of another version is rebuilt.
INDEX_VERSION = 13  # 3: capped failing rewards; 4: trace actions; 5: faster facts; 6: error_count
# 7: unknown tokens; 8: the checks' (a judge's) tokens; 9: one row per folder, normalised causes;
# 10: out-of-range values unknown, strict JSON; 11: regressions; 12: memory tool calls
# 13: the reflection's first line whole
# One row per folder, `reflections/<loop>` or `loops/<loop>`: its files' entries (see Entry).
SCHEMA = "CREATE TABLE files (path TEXT PRIMARY KEY, facts TEXT NOT NULL)"
T = TypeVar("T")


def _read_record(path: str, loop_id: str, iteration: int) -> tuple[IterationFacts | None, str]:
    """Facts, or None and the reason; the full schema validation runs only for the reason.
    Read through the one bounded reader (regular files, a size limit, strict JSON)."""
    try:
        return record_facts(read_json_bounded(path, MAX_RECORD_BYTES), loop_id, iteration), ""
    except Unreadable as exc:
        return None, str(exc)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        problems = load_record_file(Path(path), iteration).problems
        return None, problems[0] if problems else _reason(exc)


def _read_state(path: str) -> tuple[StateFacts | None, str]:
    try:
        return state_facts(read_json_bounded(path, MAX_STATE_BYTES, strict=False)), ""
    except Unreadable as exc:
        return None, str(exc)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        try:
            parse_state(Path(path))
        except StoreError as err:
            return None, err.message.removeprefix(f"{path}: ")
        return None, _reason(exc)


def _reason(exc: Exception) -> str:
    return f"missing field {exc}" if isinstance(exc, KeyError) else str(exc) or type(exc).__name__


def _unpack(cls: type[T], packed: Any) -> T | None:
    """A cached entry's facts back into facts; None (read the file again) if not usable."""
    if type(packed) is not list:
        return None
    try:
        return cls(*packed)
    except TypeError:
        return None


# A folder's row is a JSON list of entries, one per file: [name, mtime_ns, size, inode, facts
# (the fields in RECORD_FIELDS or STATE_FIELDS order) or null, the problem when null].
Entry = list[Any]
Entries = list[tuple[int, os.DirEntry[str]]]


def _list_records(folder: str) -> Entries:
    """A loop's record files, in iteration order; OSError when the folder cannot be listed."""
    with os.scandir(folder) as found:
        return sorted(
            ((int(m.group(1)), e) for e in found if (m := RECORD_NAME.match(e.name))),
            key=lambda item: item[0],
        )


def _from_cache(
    entry: Entry | None, st: os.stat_result | None, cls: type[T]
) -> tuple[T | None, str | None]:
    """A cached entry of a file with this stat (None: just read, no stat to check): (facts, ""),
    (None, problem), or (None, None) when it is stale or unusable and the file must be read."""
    if entry is None:
        return None, None
    if st is not None and (entry[1], entry[2], entry[3]) != (st.st_mtime_ns, st.st_size, st.st_ino):
        return None, None
    if entry[4] is None:
        problem = entry[5]
        return None, (problem if isinstance(problem, str) and problem else None)
    facts = _unpack(cls, entry[4])
    return facts, ("" if facts is not None else None)


def _files(entries: list[Entry], folder: str) -> LoopFiles | None:
    """A folder's entries as its records' facts, taken as they are; None if one is not usable."""
    out = LoopFiles()
    for entry in entries:
        facts, problem = _from_cache(entry, None, IterationFacts)
        if problem is None:
            return None
        if facts is None:
            out.invalid.append((os.path.join(folder, entry[0]), problem))
        else:
            out.records.append(facts)
    return out


class FactsReader:
    """Reads facts through the cache when it can, straight from the files when it cannot."""

    def __init__(self, store: MemoryStore, *, use_index: bool = True) -> None:
        self.store = store
        self._rows: dict[str, str] = {}
        self._seen: set[str] = set()
        self._updates: list[tuple[str, str]] = []
        self._db: sqlite3.Connection | None = self._open() if use_index else None
        self._keep = self._db is not None  # whether what is read becomes rows
        self._prefetch: Prefetch | None = None
        self._delivered: set[str] = set()  # folders the prefetching child has just read
        # plain strings: this runs for thousands of loops (ids are validated by the caller)
        self._reflections = os.path.join(store.base, "reflections")
        self._loops = os.path.join(store.base, "loops")

    # cache ------------------------------------------------------------------------------
    def _open(self) -> sqlite3.Connection | None:
        db = open_cache(
            self.store.base / INDEX_NAME,
            version=INDEX_VERSION,
            schema=SCHEMA,
            timeout=2.0,
            pragmas=("synchronous = OFF",),
        )
        if db is None:
            return None
        try:
            self._rows = dict(db.execute("SELECT path, facts FROM files"))
        except sqlite3.DatabaseError:
            self._rows.clear()
            db.close()
            return None
        return db

    def prefetch(self, loop_ids: list[str]) -> None:
        """Have a second process read the later half of these loops, when they are not cached
        (prefetch.py); their rows arrive when the first of them is asked for."""
        todo = [i for i in loop_ids if f"reflections/{i}" not in self._rows]
        self._prefetch = Prefetch.start(todo, self._read_rows)

    def _read_rows(self, loop_ids: list[str]) -> list[tuple[str, str]]:
        """(In the prefetching child) the rows of these loops' folders."""
        self._keep = True
        for loop_id in loop_ids:
            self.state(loop_id)
            self.records(loop_id)
        return self._updates

    def _taken(self, folder: str) -> list[Entry] | None:
        """The entries of a folder the prefetching child read moments ago, to be taken as they
        are (listing and stat-ing it again would only repeat its work); None for the others."""
        if self._prefetch is not None and folder in self._prefetch.folders:
            rows = self._prefetch.collect()
            self._prefetch = None
            self._rows.update(rows)
            self._delivered.update(name for name, _ in rows)
            if self._keep:
                self._updates += rows
        if folder not in self._delivered:
            return None
        self._seen.add(folder)
        try:
            taken = json.loads(self._rows[folder])
        except ValueError:
            return None
        well_formed = type(taken) is list and all(type(e) is list and len(e) == 6 for e in taken)
        return taken if well_formed else None

    def _cached(self, folder: str) -> dict[str, Entry]:
        """The folder's cached entries by file name; none when its row is not usable."""
        self._seen.add(folder)
        packed = self._rows.get(folder)
        if packed is None:
            return {}
        try:
            return {entry[0]: entry for entry in json.loads(packed) if len(entry) == 6}
        except (ValueError, TypeError, KeyError):
            return {}

    def _remember(self, folder: str, entries: list[Entry]) -> None:
        if self._keep:
            self._updates.append((folder, json.dumps(entries)))  # ASCII: a lone surrogate too

    # facts ------------------------------------------------------------------------------
    def state(self, loop_id: str) -> tuple[StateFacts | None, str | None]:
        """The state facts, or None and a problem (None when there simply is no state file)."""
        folder = f"loops/{loop_id}"
        taken = self._taken(folder)
        if taken:
            facts, problem = _from_cache(taken[0], None, StateFacts)
            if problem is not None:
                return facts, (problem or None)
        path = os.path.join(self._loops, loop_id, "state.json")
        try:
            st = os.stat(path)
        except OSError:
            return None, None
        facts, problem = _from_cache(self._cached(folder).get("state.json"), st, StateFacts)
        if problem is None:
            facts, problem = _read_state(path)
            values = None if facts is None else state_values(facts)
            self._remember(folder, [["state.json", *_key(st), values, problem]])
        return facts, (problem if facts is None else None)

    def records(self, loop_id: str) -> LoopFiles:
        folder, path = f"reflections/{loop_id}", os.path.join(self._reflections, loop_id)
        taken = self._taken(folder)
        if taken is not None and (files := _files(taken, path)) is not None:
            return files
        out = LoopFiles()
        try:
            listed = _list_records(path)
        except OSError:
            return out
        cached = self._cached(folder)
        entries: list[Entry] = []
        changed = len(cached) != len(listed)
        for iteration, file in listed:
            try:
                st = file.stat()
            except OSError:
                changed = True
                continue  # removed while we listed it
            entry = cached.get(file.name)
            facts, problem = _from_cache(entry, st, IterationFacts)
            if problem is None or entry is None:
                changed = True
                facts, problem = _read_record(file.path, loop_id, iteration)
                values = None if facts is None else record_values(facts)
                entry = [file.name, *_key(st), values, problem]
            entries.append(entry)
            if facts is None:
                out.invalid.append((file.path, problem))
            else:
                out.records.append(facts)
        if changed:
            self._remember(folder, entries)
        return out

    def close(self, *, forget_unseen: bool) -> None:
        """Write what was read; with `forget_unseen` (a full scan) drop rows of vanished files."""
        if self._prefetch is not None:
            self._prefetch.cancel()
            self._prefetch = None
        if self._db is None:
            return
        try:
            with self._db:
                self._db.executemany("INSERT OR REPLACE INTO files VALUES (?, ?)", self._updates)
                if forget_unseen:
                    gone = [(name,) for name in self._rows if name not in self._seen]
                    self._db.executemany("DELETE FROM files WHERE path = ?", gone)
        except sqlite3.Error:
            pass  # a busy or read-only cache only costs speed next time
        finally:
            self._db.close()
            self._db = None


def _key(st: os.stat_result) -> tuple[int, int, int]:
    return st.st_mtime_ns, st.st_size, st.st_ino
