"""A derived SQLite file beside the memory (the search index, analyze's facts cache): never the
truth, so it is rebuilt rather than repaired.

A file of another version is replaced; a corrupt one is deleted and built again once; a busy,
locked or read-only one is not used at all (the caller goes without, or builds one in memory).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Sequence
from pathlib import Path

SIDE_FILES = ("", "-journal", "-wal", "-shm")


def open_cache(
    path: Path, *, version: int, schema: str, timeout: float, pragmas: Sequence[str] = ()
) -> sqlite3.Connection | None:
    """The cache at `path` with `schema` at `version`, or None when it cannot be used now."""
    for attempt in range(2):
        db = None
        try:
            db = sqlite3.connect(path, timeout=timeout)
            for pragma in pragmas:
                db.execute(f"PRAGMA {pragma}")
            found = db.execute("PRAGMA user_version").fetchone()[0]
            if found == version:
                return db
            if found == 0 and not db.execute("SELECT 1 FROM sqlite_master").fetchone():
                return create(db, version=version, schema=schema)
            raise sqlite3.DatabaseError(f"cache version {found}")  # replaced below
        except sqlite3.DatabaseError as exc:
            if db is not None:
                db.close()
            corrupt = not isinstance(exc, sqlite3.OperationalError)
            if corrupt and attempt == 0:
                for suffix in SIDE_FILES:  # rebuilt, never trusted
                    with contextlib.suppress(OSError):
                        path.with_name(path.name + suffix).unlink()
                continue
            return None
    return None


def create(db: sqlite3.Connection, *, version: int, schema: str) -> sqlite3.Connection:
    with db:
        db.executescript(schema)
        db.execute(f"PRAGMA user_version = {version}")
    return db
