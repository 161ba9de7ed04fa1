"""MemoryStore: the layout of `.aiwg/ralph/`, atomic writes, records, loop state, the loop lock.

Every write goes to a temporary file in the same directory, is fsynced and renamed over the
target, so a reader (or a kill -9) never sees half a file. Listings read `state.json` files,
never every record, and a corrupt file is reported with its reason instead of crashing.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ralph import schemas
from ralph.errors import LoopAborted, RalphError, StoreError
from ralph.files import (
    AIWG_DIR,
    atomic_write_json,
    atomic_write_text,
    clear_private_tmp,
    read_json,
    writable_hint,
)
from ralph.ids import LOOP_ID_PATTERN, short_id, validate_loop_id
from ralph.memory.locks import acquire, lock_path, process_identity, read_holder
from ralph.memory.state import LoopState as LoopState  # the state file's model, used from here
from ralph.reading import MB, Unreadable, read_json_bounded
from ralph.records import SCHEMA_VERSION, IterationRecord, utc_now
from ralph.redact import redact_data

__all__ = [
    "STATUSES",
    "LoopListing",
    "MemoryStore",
    "RecordFile",
    "load_record_file",
    "parse_state",
    "record_problems",
]  # the seam: what other packages use

RECORD_NAME = re.compile(r"^(\d+)\.json$")
GITIGNORE = (
    "# ralph: logs, locks and the index stay local; reflections/ are meant to be committed\n"
    "loops/\nlocks/\nindex.sqlite*\nsearch.sqlite*\nconfig.yaml.bak\n"
)
MAX_RECORD_BYTES = 5 * MB  # a record is kilobytes; anything bigger is not one of ours
MAX_STATE_BYTES = 64 * MB  # a state lists its iterations: megabytes after thousands of them
MAX_CANDIDATES = 8  # an ambiguous loop id prefix names at most this many loops
STATUSES = ("running", "paused", "completed", "failed", "aborted", "crashed", "needs_human")


@dataclass
class RecordFile:
    """A record file as found on disk: parsed, or invalid with the reasons."""

    path: Path
    iteration: int
    record: IterationRecord | None = None
    problems: list[str] = field(default_factory=list)


@dataclass
class LoopListing:
    loop_id: str
    state: LoopState | None
    record_count: int
    problem: str | None = None


class MemoryStore:
    """`.aiwg/ralph/` under a project root."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.base = self.root / AIWG_DIR
        self._written: dict[Path, tuple[int, int, int]] = {}

    @classmethod
    def discover(cls, start: Path | None = None) -> MemoryStore:
        """The project's memory (`workspace.locate.memory_root`: the main working tree's top in
        git, so a `--worktree` loop and every command read the same memory)."""
        from ralph.workspace.locate import memory_root

        return cls(memory_root(start or Path.cwd()))

    # layout -----------------------------------------------------------------------------
    def reflections_dir(self, loop_id: str) -> Path:
        return self.base / "reflections" / validate_loop_id(loop_id)

    def loop_dir(self, loop_id: str) -> Path:
        return self.base / "loops" / validate_loop_id(loop_id)

    def artifacts_dir(self, loop_id: str, iteration: int) -> Path:
        return self.loop_dir(loop_id) / f"{iteration:03d}"

    def record_path(self, loop_id: str, iteration: int) -> Path:
        return self.reflections_dir(loop_id) / f"{iteration:03d}.json"

    def ensure(self) -> None:
        """Create the layout and its `.gitignore` (logs stay local, memory is committed)."""
        for sub in ("reflections", "loops"):
            try:
                (self.base / sub).mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(
                    f"cannot create {self.base / sub}: {exc.strerror or exc}",
                    hint=writable_hint(self.base / sub),
                ) from None
        gitignore = self.base / ".gitignore"
        if not gitignore.exists():
            atomic_write_text(gitignore, GITIGNORE)

    def require(self) -> None:
        if not self.base.is_dir():
            raise StoreError(
                f"no ralph memory here: {self.base} does not exist",
                hint="run inside a project where `ralph run` or `ralph init` has been used",
            )

    # records ----------------------------------------------------------------------------
    def write_record(self, record: IterationRecord) -> Path:
        """Validate, then write atomically; an invalid record never reaches disk."""
        data = redact_data(record.to_json())  # what is checked is what is written
        problems = schemas.errors(schemas.RECORD, data)
        if problems:
            raise StoreError(f"refusing to write an invalid record: {problems[0]}")
        path = self.record_path(record.loop_id, record.iteration)
        atomic_write_json(path, data, redacted=True)
        self._remember(path)
        return path

    def _remember(self, path: Path) -> None:
        with contextlib.suppress(OSError):
            st = path.stat()
            self._written[path] = (st.st_mtime_ns, st.st_size, st.st_ino)

    def untouched(self, path: Path) -> bool:
        """Whether `path` is still as this store last wrote it: one stat, no read.

        Every write replaces the file (a new inode), so another writer shows even at equal
        size and time; the loop uses this to find what an actor did to the memory.
        """
        try:
            st = path.stat()
        except OSError:
            return False
        return self._written.get(path) == (st.st_mtime_ns, st.st_size, st.st_ino)

    def record_paths(self, loop_id: str) -> list[tuple[int, Path]]:
        """`NNN.json` files of a loop, sorted numerically (1000 after 999, not after 100)."""
        folder = self.reflections_dir(loop_id)
        if not folder.is_dir():
            return []
        found = []
        for entry in os.scandir(folder):
            match = RECORD_NAME.match(entry.name)
            if match:
                found.append((int(match.group(1)), Path(entry.path)))
        return sorted(found)

    def read_record(self, loop_id: str, iteration: int) -> IterationRecord:
        path = self.record_path(loop_id, iteration)
        if not path.exists():
            raise StoreError(f"loop {loop_id} has no iteration {iteration}")
        loaded = load_record_file(path, iteration)
        if loaded.record is None:
            raise StoreError(f"{path}: invalid record: {loaded.problems[0]}")
        return loaded.record

    def read_records(self, loop_id: str) -> list[RecordFile]:
        return [load_record_file(path, n) for n, path in self.record_paths(loop_id)]

    def valid_records(self, loop_id: str) -> list[IterationRecord]:
        return [f.record for f in self.read_records(loop_id) if f.record is not None]

    def mark_obsolete(self, loop_id: str, iteration: int, *, obsolete: bool) -> bool:
        """Set (or clear) the record's `ralph.obsolete`; True when the file changed.

        The file is edited as JSON, not re-serialised from dataclasses, so every other byte of
        meaning stays; it is validated before the atomic write like any record.
        """
        path = self.record_path(validate_loop_id(loop_id), iteration)
        if not path.exists():
            if not self.reflections_dir(loop_id).is_dir() and not self.state_path(loop_id).exists():
                raise StoreError(
                    f"unknown loop {loop_id!r}", hint="`ralph reflections list` shows the loops"
                )
            raise StoreError(f"loop {loop_id} has no iteration {iteration}")
        data = read_json(path)
        if not isinstance(data, dict):
            raise StoreError(f"{path}: not a record")
        ext = data.get("ralph")
        if bool(isinstance(ext, dict) and ext.get("obsolete")) == obsolete:
            return False
        if not isinstance(ext, dict):
            ext = data["ralph"] = {"schema_version": SCHEMA_VERSION}
        if obsolete:
            ext["obsolete"] = True
        else:
            ext.pop("obsolete", None)
        problems = schemas.errors(schemas.RECORD, data)
        if problems:
            raise StoreError(f"{path}: invalid record, not changed: {problems[0]}")
        atomic_write_json(path, data)
        return True

    def clear_partial_writes(self, loop_id: str, workdir: Path | None = None) -> list[Path]:
        """Remove the temporary files of writes a kill -9 interrupted (the targets are whole),
        and the scratch files of checks whose process is gone (`private_tmp`).

        Call with the loop's lock held: nothing else writes this loop's files meanwhile."""
        roots = {self.root, MemoryStore.discover(workdir).root if workdir else self.root}
        removed = [path for root in sorted(roots) for path in clear_private_tmp(root)]
        for folder in (self.reflections_dir(loop_id), self.loop_dir(loop_id)):
            if not folder.is_dir():
                continue
            for entry in os.scandir(folder):
                if entry.name.startswith(".") and entry.name.endswith(".tmp") and entry.is_file():
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)
                        removed.append(Path(entry.path))
        return removed

    # loop state -------------------------------------------------------------------------
    def state_path(self, loop_id: str) -> Path:
        return self.loop_dir(loop_id) / "state.json"

    def write_state(self, state: LoopState) -> None:
        """Not checked against the schema here (a cost per write that grows with the loop;
        `bench/loop.py` measures the time per iteration it keeps flat): the
        typed state writes only what it accepts, which the tests check on every state they
        write (tests/conftest.py); `parse_state` checks each file it reads."""
        if state.status not in STATUSES:  # the one field its type does not pin down
            raise StoreError(f"refusing to write an invalid loop state: status {state.status!r}")
        state.updated_at = utc_now()
        path = self.state_path(state.loop_id)
        atomic_write_json(path, state.to_json())
        self._remember(path)

    def read_state(self, loop_id: str) -> LoopState:
        path = self.state_path(loop_id)
        if not path.exists():
            if self.reflections_dir(loop_id).is_dir():
                raise StoreError(f"loop {loop_id} has records but no state file ({path})")
            raise StoreError(
                f"unknown loop {loop_id!r}", hint="`ralph reflections list` shows the loops"
            )
        return parse_state(path)

    def baseline_path(self, loop_id: str) -> Path:
        return self.loop_dir(loop_id) / "baseline.json"

    def write_baseline(self, loop_id: str, baseline: dict[str, Any]) -> None:
        """The whole baseline (failing and passing tests by id), written once per loop; the
        state keeps only its summary, so the state stays small on a suite of thousands."""
        atomic_write_json(self.baseline_path(loop_id), baseline)

    def read_baseline(self, loop_id: str) -> dict[str, Any] | None:
        """The loop's whole baseline as written, or None (a loop from before it was kept)."""
        path = self.baseline_path(loop_id)
        data = read_json(path) if path.is_file() else None
        return data if isinstance(data, dict) else None

    def loop_ids(self) -> list[str]:
        ids: set[str] = set()
        for sub in ("loops", "reflections"):
            folder = self.base / sub
            if folder.is_dir():
                ids.update(
                    e.name
                    for e in os.scandir(folder)
                    if e.is_dir() and LOOP_ID_PATTERN.match(e.name)
                )
        return sorted(ids)

    def list_loops(self) -> list[LoopListing]:
        """Every loop, from its state file; a loop without a readable state is still listed."""
        listings = []
        for loop_id in self.loop_ids():
            count = len(self.record_paths(loop_id))
            path = self.state_path(loop_id)
            try:
                listings.append(LoopListing(loop_id, parse_state(path), count))
            except StoreError as exc:
                reason = "no state file" if not path.exists() else exc.message
                listings.append(LoopListing(loop_id, None, count, reason))
        # updated_at has whole seconds: two loops ending in one second are told apart by which
        # state file was written last (`latest`, `prune --keep` depend on the order)
        written = {it.loop_id: _written_ns(self.state_path(it.loop_id)) for it in listings}
        listings.sort(
            key=lambda it: (
                it.state.updated_at if it.state else "",
                written[it.loop_id],
                it.loop_id,
            )
        )
        return listings

    def latest_loop(self) -> str:
        listings = [it for it in self.list_loops() if it.state is not None]
        if not listings:
            raise StoreError("no loops yet", hint='start one with `ralph run "TASK"`')
        return listings[-1].loop_id

    def resolve_loop_id(self, text: str) -> str:
        """The loop a user means: its id, `latest`, a unique prefix (with or without `ralph-`)
        as git takes a commit, or the short id every screen shows (`ids.short_id`); an
        ambiguous prefix names the candidates."""
        text = (text or "").strip()
        if text == "latest":
            return self.latest_loop()
        ids = self.loop_ids()
        if text in ids:
            return text
        candidates = [i for i in ids if text and (_prefixed(i, text) or short_id(i) == text)]
        if len(candidates) == 1:
            return candidates[0]
        if not candidates:
            if not re.fullmatch(r"[a-z0-9-]+", text):
                validate_loop_id(text)  # not even a prefix of an id: say what ids look like
            raise StoreError(
                f"unknown loop {text!r}",
                hint="`ralph reflections list` shows the loops; `latest` is the newest",
            )
        shown, extra = ", ".join(candidates[:MAX_CANDIDATES]), len(candidates) - MAX_CANDIDATES
        more = f" and {extra} more" if extra > 0 else ""
        raise StoreError(
            f"loop {text!r} is ambiguous: {shown}{more}", hint="type more of the loop id"
        )

    # liveness ---------------------------------------------------------------------------
    def running_loops(self) -> dict[str, dict[str, Any]]:
        """Loop id -> lock payload of every loop running right now, wherever it works.

        The loop lock is the truth: a loop runs exactly while its lock is held. A pid says
        nothing once its process is gone (reused, a zombie, PID 1 of a container), and the
        kernel drops the lock of a dead holder however it died.
        """
        folder = self.base / "locks"
        found: dict[str, dict[str, Any]] = {}
        if folder.is_dir():
            for entry in os.scandir(folder):
                if entry.name.endswith(".lock"):
                    holder = read_holder(Path(entry.path))
                    if holder is not None and isinstance(holder.get("loop_id"), str):
                        found[holder["loop_id"]] = holder
        return found

    def effective_status(self, state: LoopState, running: Mapping[str, Any] | None = None) -> str:
        """The state's status, except that `running` without its lock held is `crashed`.

        `running`: `running_loops()` when asking about many loops at once."""
        if state.status != "running":
            return state.status
        alive = self.running_loops() if running is None else running
        return "running" if state.loop_id in alive else "crashed"

    def abort_path(self, loop_id: str) -> Path:
        return self.loop_dir(loop_id) / "abort-requested"

    def abort_requested(self, loop_id: str) -> bool:
        """Whether `ralph abort` asked this loop to end (see runner.abort_loop)."""
        return self.abort_path(loop_id).exists()

    def check_abort(self, loop_id: str) -> None:
        """Raise LoopAborted when `ralph abort` asked for it: the loop's check between attempts
        (an abort from another host or pid namespace cannot signal the loop)."""
        if self.abort_requested(loop_id):
            raise LoopAborted

    # lock -------------------------------------------------------------------------------
    @contextlib.contextmanager
    def lock(self, loop_id: str, workdir: Path) -> Iterator[None]:
        """One loop per working tree: an flock'ed file naming the loop that holds it.

        The kernel drops an flock when its holder dies (even by kill -9), so a lock is never
        stale and two loops racing for one tree cannot both win. The file is unlinked while
        still locked; an acquirer that locked a file already unlinked tries again. The payload
        says who holds it: loop, pid, host, pid namespace and the process's start time, so
        `ralph abort` signals that process and never one that merely got its pid later.
        """
        path = lock_path(self.base, workdir)
        payload = json.dumps({"loop_id": loop_id, **process_identity(os.getpid())})
        fd = acquire(path, workdir)
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, payload.encode(), 0)
            yield
        finally:
            with contextlib.suppress(OSError):
                path.unlink()
            os.close(fd)


def _written_ns(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


def record_problems(data: Any) -> list[str]:
    """The schema's verdict on a parsed record, and what its pattern lets by: Python's `$`
    matches before a final newline, so `ralph-x\n` passes it but names no loop folder."""
    problems = schemas.errors(schemas.RECORD, data)
    if not problems and not LOOP_ID_PATTERN.fullmatch(data["loop_id"]):
        problems = [f"$.loop_id: {data['loop_id']!r} is not a loop id (a trailing newline)"]
    return problems


def load_record_file(path: Path, iteration: int) -> RecordFile:
    """A record file through the bounded reader (`ralph.reading`): every way it can be wrong
    becomes its problems, never an exception or a read that waits or fills memory."""
    try:
        data = read_json_bounded(path, MAX_RECORD_BYTES)
    except Unreadable as exc:
        return RecordFile(path, iteration, problems=[str(exc)])
    problems = record_problems(data)
    if problems:
        return RecordFile(path, iteration, problems=problems)
    try:
        return RecordFile(path, iteration, IterationRecord.from_json(data))
    except (TypeError, ValueError) as exc:
        return RecordFile(path, iteration, problems=[str(exc)])


def parse_state(path: Path) -> LoopState:
    try:
        data = read_json_bounded(path, MAX_STATE_BYTES, strict=False)
    except Unreadable as exc:
        raise StoreError(f"{path}: {exc}") from None
    problems = schemas.errors(schemas.LOOP_STATE, data)
    if problems:
        raise StoreError(f"{path}: invalid loop state: {problems[0]}")
    try:
        return LoopState.from_json(data)
    except (RalphError, TypeError, ValueError, KeyError) as exc:  # say, settings it cannot read
        why = exc.message if isinstance(exc, RalphError) else str(exc)
        raise StoreError(f"{path}: invalid loop state: {why}") from None


def _prefixed(loop_id: str, text: str) -> bool:
    return loop_id.removeprefix("ralph-").startswith(text) or loop_id.startswith(text)
