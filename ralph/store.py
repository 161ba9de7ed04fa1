"""MemoryStore: the layout of `.aiwg/ralph/`, atomic writes, records, loop state, the loop lock.

Every write goes to a temporary file in the same directory, is fsynced and renamed over the
target, so a reader (or a kill -9) never sees half a file. Listings read `state.json` files,
never every record, and a corrupt file is reported with its reason instead of crashing.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import socket
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ralph import schemas
from ralph.errors import PreflightError, StoreError
from ralph.records import IterationRecord, from_json, to_json, utc_now
from ralph.redact import redact, redact_data

AIWG_DIR = Path(".aiwg") / "ralph"
LOOP_ID_PATTERN = re.compile(r"^ralph-[a-z0-9-]+$")
RECORD_NAME = re.compile(r"^(\d+)\.json$")
GITIGNORE = (
    "# ralph: logs, locks and the index stay local; reflections/ are meant to be committed\n"
    "loops/\nlocks/\nindex.sqlite*\nsearch.sqlite*\n"
)
STATUSES = ("running", "paused", "completed", "failed", "aborted", "crashed")


def validate_loop_id(loop_id: str) -> str:
    """A user-given id must match the pattern before it touches a path."""
    if not LOOP_ID_PATTERN.fullmatch(loop_id or ""):
        raise StoreError(
            f"invalid loop id {loop_id!r}",
            hint="loop ids look like ralph-fix-date-parser-3f9a1c2e (lowercase, digits, dashes)",
        )
    return loop_id


def new_loop_id(task: str) -> str:
    """`ralph-<slug>-<8 hex>`: readable in listings, unique across runs of the same task."""
    slug = re.sub(r"[^a-z0-9]+", "-", task.lower()).strip("-")[:40].strip("-") or "loop"
    return f"ralph-{slug}-{os.urandom(4).hex()}"


def _read_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# Files get the mode a plain `open()` would give them (mkstemp's 0600 would hide shared memory
# and reports from the rest of a team); read once, as the umask is process-wide.
FILE_MODE = 0o666 & ~_read_umask()


def atomic_write_text(path: Path, text: str, *, durable: bool = True) -> None:
    """Write `text` to `path` atomically; any failure is one StoreError and leaves no temp file.

    Every file ralph writes goes through here (or `atomic_write_json`), so this is where its
    one redaction rule (ralph.redact) is applied to what reaches disk. `durable` fsyncs before
    the rename, so even a power cut leaves old or new: records and state need that; logs and
    prompts (rewritten by a rerun anyway) skip the cost.
    """
    _write(path, redact(text), durable=durable)


def _write(path: Path, text: str, *, durable: bool = True) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise StoreError(
            f"cannot write {path}: {exc.strerror or exc}", hint=_writable_hint(path)
        ) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            os.fchmod(handle.fileno(), FILE_MODE)
            handle.write(text)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise StoreError(
                f"cannot write {path}: {exc.strerror or exc}", hint=_writable_hint(path)
            ) from None
        raise


def private_tmp(root: Path) -> Path:
    """`.aiwg/ralph/tmp/` under the working tree `root`: scratch files of the checks (pytest's
    JUnit reports, which hold assertion text) that only the user may read, ignored by git, and
    emptied by `ralph resume` when a kill -9 left some behind."""
    folder = root / AIWG_DIR / "tmp"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(folder, 0o700)
        ignore = folder / ".gitignore"
        if not ignore.exists():
            ignore.write_text("*\n", encoding="utf-8")
    except OSError as exc:
        raise StoreError(f"cannot create {folder}: {exc.strerror or exc}") from None
    return folder


def clear_private_tmp(root: Path) -> list[Path]:
    """Remove what interrupted checks left in `private_tmp(root)`; call with the loop lock held."""
    folder = root / AIWG_DIR / "tmp"
    removed = []
    if folder.is_dir():
        for entry in os.scandir(folder):
            if entry.name.startswith("ralph-") and entry.is_file():
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
                    removed.append(Path(entry.path))
    return removed


def _writable_hint(path: Path) -> str:
    return f"free disk space and make {path.parent} writable; the file was left as it was"


def atomic_write_json(path: Path, data: Any) -> None:
    """JSON as every reader understands it (NaN or Infinity is refused, never written), its
    strings redacted one by one (redacting the text could cut through JSON syntax)."""
    try:
        text = json.dumps(redact_data(data), indent=2, ensure_ascii=False, allow_nan=False)
    except ValueError as exc:
        raise StoreError(f"refusing to write {path}: {exc}") from None
    _write(path, text + "\n")


def read_json(path: Path) -> Any:
    """Parsed JSON, or StoreError naming the file and what is wrong with it."""
    try:
        return json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise StoreError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise StoreError(f"{path}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise StoreError(f"{path}: not JSON: {exc.msg} at line {exc.lineno}") from None


@dataclass
class LoopState:
    """`loops/<id>/state.json` (DESIGN.md section 5)."""

    loop_id: str
    task: str
    status: str = "running"
    created_at: str = field(default_factory=utc_now)
    updated_at: str = field(default_factory=utc_now)
    iteration: int = 0
    best_iteration: int | None = None
    best_reward: float | None = None
    reward_history: list[float] = field(default_factory=list)
    baseline: dict[str, Any] | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    git: dict[str, Any] | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    stop_reason: str | None = None
    pid: int | None = None
    host: str | None = None
    schema_version: str = "1.0"

    def effective_status(self) -> str:
        """`running` whose process is gone (on this host) is really `crashed`."""
        mine = self.pid and self.host == socket.gethostname()
        if self.status == "running" and mine and not pid_alive(self.pid or 0):
            return "crashed"
        return self.status


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
        """The nearest directory upwards holding `.aiwg/ralph`, else the git root, else `start`."""
        here = (start or Path.cwd()).resolve()
        for candidate in (here, *here.parents):
            if (candidate / AIWG_DIR).is_dir():
                return cls(candidate)
        for candidate in (here, *here.parents):
            if (candidate / ".git").exists():
                return cls(candidate)
        return cls(here)

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
                    hint=_writable_hint(self.base / sub),
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
        atomic_write_json(path, data)
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

    def clear_partial_writes(self, loop_id: str, workdir: Path | None = None) -> list[Path]:
        """Remove the temporary files of writes a kill -9 interrupted (the targets are whole),
        and the checks' scratch files in the loop's working tree (`private_tmp`).

        Call with the loop's lock held: nothing else writes this loop's files meanwhile."""
        removed = clear_private_tmp(workdir) if workdir is not None else []
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
        state.updated_at = utc_now()
        data = redact_data(to_json(state))
        problems = schemas.errors(schemas.LOOP_STATE, data)
        if problems:
            raise StoreError(f"refusing to write an invalid loop state: {problems[0]}")
        path = self.state_path(state.loop_id)
        atomic_write_json(path, data)
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
        listings.sort(key=lambda it: (it.state.updated_at if it.state else "", it.loop_id))
        return listings

    def latest_loop(self) -> str:
        listings = [it for it in self.list_loops() if it.state is not None]
        if not listings:
            raise StoreError("no loops yet", hint='start one with `ralph run "TASK"`')
        return listings[-1].loop_id

    # lock -------------------------------------------------------------------------------
    @contextlib.contextmanager
    def lock(self, loop_id: str, workdir: Path) -> Iterator[None]:
        """One loop per working tree: an flock'ed file naming the loop that holds it.

        The kernel drops an flock when its holder dies (even by kill -9), so a lock is never
        stale and two loops racing for one tree cannot both win. The file is unlinked while
        still locked; an acquirer that locked a file already unlinked tries again.
        """
        path = lock_path(self, workdir)
        payload = json.dumps({"loop_id": loop_id, "pid": os.getpid(), "host": socket.gethostname()})
        fd = _acquire(path, workdir)
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, payload.encode(), 0)
            yield
        finally:
            with contextlib.suppress(OSError):
                path.unlink()
            os.close(fd)


def lock_path(store: MemoryStore, workdir: Path) -> Path:
    digest = hashlib.sha256(str(workdir.resolve()).encode()).hexdigest()[:12]
    return store.base / "locks" / f"{digest}.lock"


def _acquire(path: Path, workdir: Path) -> int:
    """A descriptor holding the exclusive flock on `path`, or PreflightError naming the holder."""
    while True:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StoreError(
                f"cannot create the loop lock {path}: {exc.strerror or exc}",
                hint=f"ralph needs to write to {path.parent.parent}",
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _lock_holder(fd)
            os.close(fd)
            raise PreflightError(
                f"loop {holder} is already running in this working tree ({workdir})",
                hint="wait for it, `ralph abort` it, or start another loop with --worktree",
            ) from None
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # the holder unlinked it between our open and our flock: try again


def _lock_holder(fd: int) -> str:
    """The loop named in a held lock (it may be mid-write: then just "another loop")."""
    try:
        data = json.loads(os.pread(fd, 4096, 0).decode("utf-8"))
        return str(data["loop_id"])
    except (OSError, ValueError, KeyError, TypeError):
        return "another loop"


def load_record_file(path: Path, iteration: int) -> RecordFile:
    try:
        data = read_json(path)
    except StoreError as exc:
        return RecordFile(path, iteration, problems=[exc.message.removeprefix(f"{path}: ")])
    problems = schemas.errors(schemas.RECORD, data)
    if problems:
        return RecordFile(path, iteration, problems=problems)
    try:
        return RecordFile(path, iteration, IterationRecord.from_json(data))
    except (TypeError, ValueError) as exc:
        return RecordFile(path, iteration, problems=[str(exc)])


def parse_state(path: Path) -> LoopState:
    data = read_json(path)
    problems = schemas.errors(schemas.LOOP_STATE, data)
    if problems:
        raise StoreError(f"{path}: invalid loop state: {problems[0]}")
    return from_json(LoopState, data)
