"""The few facts `ralph analyze` needs from each file, and an optional SQLite cache of them.

Reading 20,000 records means 20,000 `json.loads` of a few kilobytes each; analysing them needs a
dozen fields of each. `FactsReader` extracts those fields straight from the parsed JSON (no
schema validation on the fast path: a file is validated, for its reasons, only when extraction
fails) and keeps them in `.aiwg/ralph/index.sqlite`, each file's facts under its (mtime_ns, size,
inode). The JSON files stay the source of truth: a changed file is read again, a vanished one
forgotten, and a cache that cannot be opened, read or written is simply not used (it is deleted
and rebuilt when corrupt). The cache is local, ignored by git (see the store's `.gitignore`).

The cache holds one row per folder (a loop's records, a loop's state): a warm run decodes a
thousand small JSON lists rather than twenty thousand, a cold one encodes as few, and every
file is still checked against its own stat. It is written once, at the end, in one transaction.
"""

from __future__ import annotations

import json
import operator
import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ralph.analyze.prefetch import Prefetch
from ralph.analyze.trace_stats import trace_facts
from ralph.glyphs import clip
from ralph.memory.sqlite_cache import open_cache
from ralph.memory.store import RECORD_NAME, STATUSES, MemoryStore, load_record_file, parse_state
from ralph.records import BEST_FAILING_REWARD

INDEX_NAME = "index.sqlite"
# Bump when the extracted fields change: an index of another version is rebuilt.
INDEX_VERSION = 9  # 3: capped failing rewards; 4: trace actions; 5: faster facts; 6: error_count
# 7: unknown tokens; 8: the checks' (a judge's) tokens; 9: one row per folder
# One row per folder, `reflections/<loop>` or `loops/<loop>`: its files' entries (see Entry).
SCHEMA = "CREATE TABLE files (path TEXT PRIMARY KEY, facts TEXT NOT NULL)"
T = TypeVar("T")


@dataclass(slots=True)
class IterationFacts:
    """What analyze uses of one record."""

    iteration: int
    timestamp: str
    passed: bool
    reward: float
    error_count: int
    category: str | None
    root_cause: str | None
    reflection: str
    source: str | None
    quality_flags: list[str]
    in_context: list[int]
    tokens: int | None  # None: no count known (a `cmd:` actor's)
    cost_usd: float | None
    duration_ms: int
    task: str | None
    lessons_used: int
    improved: bool | None
    actions: dict[str, int] | None = None  # the agent's actions by kind (ralph.trace_stats)
    ran_checks: bool | None = None  # whether the agent ran the checks itself


@dataclass(slots=True)
class StateFacts:
    """What analyze uses of a loop's state file: status, stop reason, baseline, task."""

    task: str
    status: str
    stop_reason: str | None
    created_at: str
    baseline_reward: float | None
    baseline_passed: bool | None
    baseline_error_count: int | None
    pid: int | None
    host: str | None


TOKEN_FIELDS = (
    "actor_tokens_in",
    "actor_tokens_out",
    "reflector_tokens_in",
    "reflector_tokens_out",
    "evaluator_tokens_in",
    "evaluator_tokens_out",
)
NO_TOKENS = [None] * len(TOKEN_FIELDS)
RECORD_FIELDS = tuple(IterationFacts.__slots__)
STATE_FIELDS = tuple(StateFacts.__slots__)
# A cache row is the facts' fields as a JSON list, in this order.
_record_values = operator.attrgetter(*RECORD_FIELDS)
_state_values = operator.attrgetter(*STATE_FIELDS)


@dataclass
class LoopFiles:
    """One loop's extracted records, in iteration order, and its invalid record files."""

    records: list[IterationFacts] = field(default_factory=list)
    invalid: list[tuple[str, str]] = field(default_factory=list)


# `type(x) is` rather than isinstance: json.loads makes exactly these types, and a bool (an int
# subclass) is refused without a second test; these run for every field of every record.
def _number(value: Any, what: str) -> float:
    kind = type(value)
    if kind is not float and kind is not int:
        raise ValueError(f"{what} is not a number")
    return float(value)


def _count(total: Any, stored: int) -> int:
    """`ralph.error_count` (every diagnostic, when the record keeps fewer), else those stored."""
    return total if type(total) is int else stored


def _ints(value: Any, what: str) -> list[int]:
    if value is None:
        return []
    if type(value) is not list:
        raise ValueError(f"{what} is not a list of integers")
    for item in value:
        if type(item) is not int:
            raise ValueError(f"{what} is not a list of integers")
    return value


def record_facts(data: Any, loop_id: str, iteration: int) -> IterationFacts:
    """The analysed fields of a parsed record; ValueError/KeyError/TypeError when malformed."""
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    if data["loop_id"] != loop_id:
        raise ValueError(f"loop_id {data['loop_id']!r} does not match its folder {loop_id}")
    if data["iteration"] != iteration:
        raise ValueError(f"iteration {data['iteration']!r} does not match its file name")
    if not isinstance(data["actor_output"], dict):
        raise ValueError("actor_output is not an object")
    ev, sr, mm = data["evaluator_output"], data["self_reflection"], data["memory_metadata"]
    if not isinstance(ev["passed"], bool):
        raise ValueError("evaluator_output.passed is not a boolean")
    raw_reward = ev.get("reward_signal")
    reward = 0.0 if raw_reward is None else _number(raw_reward, "reward_signal")
    if not 0.0 <= reward <= 1.0:
        raise ValueError("reward_signal is outside [0, 1]")
    if not ev["passed"]:
        reward = min(reward, BEST_FAILING_REWARD)  # never 1.00 for what did not pass
    errors = ev.get("errors") or []
    text, credit = sr["reflection_text"], sr.get("credit_assignment") or {}
    if not isinstance(text, str) or not isinstance(credit, dict):
        raise ValueError("self_reflection is malformed")
    in_context = mm.get("reflections_in_context")
    if in_context is None:
        in_context = data.get("previous_reflections_used")
    ext = data.get("ralph") or {}
    usage, flags = ext.get("usage") or {}, ext.get("quality_flags") or []
    if not isinstance(flags, list):
        raise ValueError("ralph.quality_flags is not a list")
    counts = [usage.get(key) for key in TOKEN_FIELDS]
    # TypeError on a non-number: the file is then validated
    tokens = sum(n for n in counts if n is not None) if counts != NO_TOKENS else None
    cost = usage.get("cost_usd")
    duration = sum((ext.get("duration_ms") or {}).values())
    task = data.get("task_description")
    lessons = ext.get("lessons_used") or []
    improved = (data.get("performance_delta") or {}).get("is_improvement")
    return IterationFacts(  # positional, in RECORD_FIELDS order: this runs for every record
        iteration,
        str(data["timestamp"]),
        ev["passed"],
        reward,
        _count(ext.get("error_count"), len(errors)),
        credit.get("failure_category"),
        credit.get("root_cause") or None,
        clip((text.strip().splitlines() or [""])[0], 200),  # at a word: CSV shows it
        ext.get("reflection_source"),
        [str(f) for f in flags] if flags else [],
        _ints(in_context, "reflections_in_context"),
        None if tokens is None else int(tokens),
        None if cost is None else _number(cost, "cost_usd"),
        int(duration),
        task if isinstance(task, str) else None,
        len(lessons) if isinstance(lessons, list) else 0,
        improved if isinstance(improved, bool) else None,
        **trace_facts(ext.get("trace")),
    )


def state_facts(data: Any) -> StateFacts:
    """The analysed fields of a parsed state file; ValueError/KeyError/TypeError when malformed."""
    if not isinstance(data, dict) or data["status"] not in STATUSES:
        raise ValueError("not a loop state")
    baseline = data.get("baseline") or {}
    reward = baseline.get("reward")
    errors = baseline.get("error_count")
    passed = baseline.get("passed")
    pid, host = data.get("pid"), data.get("host")
    return StateFacts(
        task=str(data["task"]),
        status=data["status"],
        stop_reason=data.get("stop_reason"),
        created_at=str(data["created_at"]),
        baseline_reward=None if reward is None else _number(reward, "baseline.reward"),
        baseline_passed=passed if isinstance(passed, bool) else None,
        baseline_error_count=errors if isinstance(errors, int) else None,
        pid=pid if isinstance(pid, int) else None,
        host=host if isinstance(host, str) else None,
    )


def _read_record(path: str, loop_id: str, iteration: int) -> tuple[IterationFacts | None, str]:
    """Facts, or None and the reason; the full schema validation runs only for the reason."""
    try:
        with open(path, "rb", buffering=0) as handle:  # one read(2) of the whole file
            data = json.loads(handle.read().decode("utf-8"))
        return record_facts(data, loop_id, iteration), ""
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        problems = load_record_file(Path(path), iteration).problems
        return None, problems[0] if problems else _reason(exc)


def _read_state(path: str) -> tuple[StateFacts | None, str]:
    try:
        with open(path, "rb", buffering=0) as handle:
            return state_facts(json.loads(handle.read().decode("utf-8"))), ""
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        from ralph.errors import StoreError

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
        taken: list[Entry] = json.loads(self._rows[folder])
        return taken

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
            self._updates.append((folder, json.dumps(entries, ensure_ascii=False)))

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
            values = None if facts is None else _state_values(facts)
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
                values = None if facts is None else _record_values(facts)
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
