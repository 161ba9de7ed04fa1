"""The loop lock: one running process per loop, known to every reader by flock, not by a pid that
may have been reused. The lock file names its holder (pid, host, pid namespace, start time), so
`ralph abort` signals only a process it can prove is still that loop."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import socket
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ralph.errors import PreflightError, StoreError


def lock_path(base: Path, workdir: Path) -> Path:
    digest = hashlib.sha256(str(workdir.resolve()).encode()).hexdigest()[:12]
    return base / "locks" / f"{digest}.lock"


def process_identity(pid: int) -> dict[str, Any]:
    """What tells process `pid` from a later one given the same pid: host, pid namespace and
    start time (Linux /proc; None where unknown)."""
    from ralph.process import start_time

    try:
        namespace: str | None = os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        namespace = None
    return {
        "pid": pid,
        "host": socket.gethostname(),
        "pidns": namespace,
        "started": start_time(pid),
    }


def same_process(identity: Mapping[str, Any]) -> bool:
    """Whether the process a lock payload names is still that process, here: same host, same
    pid namespace, same start time. False when any of it cannot be checked."""
    pid = identity.get("pid")
    if not isinstance(pid, int) or pid <= 0 or identity.get("started") is None:
        return False
    now = process_identity(pid)
    return all(now[key] == identity.get(key) for key in ("host", "pidns", "started"))


def read_holder(path: Path) -> dict[str, Any] | None:
    """The payload of the lock file at `path` while it is held; None when nobody holds it.

    Probes with a shared lock, held for an instant (`acquire` retries past a probe)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _payload(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _payload(fd: int) -> dict[str, Any]:
    """A held lock's payload; the holder writes it right after locking, so wait for it a bit."""
    deadline = time.monotonic() + PAYLOAD_WAIT
    while True:
        try:
            data = json.loads(os.pread(fd, 4096, 0).decode("utf-8"))
            if isinstance(data, dict):
                return data
        except (OSError, ValueError):
            pass
        if time.monotonic() > deadline:
            return {"loop_id": None}
        time.sleep(0.01)


PAYLOAD_WAIT = 2.0
PROBE_WAIT = 2.0  # how long an acquirer waits out a probe's instant (shared) lock


def acquire(path: Path, workdir: Path) -> int:
    """A descriptor holding the exclusive flock on `path`, or PreflightError naming the holder."""
    probed_until = time.monotonic() + PROBE_WAIT
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
            if time.monotonic() < probed_until:
                time.sleep(0.02)  # maybe a probe (`status`, `abort`): it holds for an instant
                continue
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
