"""Nothing an attempt started outlives it, without a sandbox.

`process.run` kills a command's process group when it ends, but a daemon (`setsid nohup ...`)
leaves the group and its session: it could go on editing the tree while the checks run. Under
bwrap the PID namespace ends it (ralph/sandbox.py); without one, a contained run (an actor's)
is marked with a variable of its own (`RALPH_RUN`), and ralph is a child subreaper (Linux
`prctl`) while it runs, so an orphan is adopted by ralph instead of PID 1 and stays findable
even when it scrubbed its environment. When the run ends, `sweep` kills every process carrying
its mark and every orphan ralph adopted during it (in a session that is no live run's), with
what it started.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

RUN_VARIABLE = "RALPH_RUN"
PR_SET_CHILD_SUBREAPER = 36
MAX_PASSES = 5  # a process may fork while being swept: look again, a few times
# Held while a command starts and its session is registered, and while a sweep looks: a sweep
# never takes a run's new session, between its start and its registration, for an orphan's.
SPAWNING = threading.Lock()
LIVE_SESSIONS: set[int] = set()  # the sessions (leader pids) of the runs under way
_runs = itertools.count(1)
_ADOPTING = threading.Lock()
_contained = 0  # contained runs under way: ralph is a subreaper while there is one


@dataclass
class Run:
    """A contained run: its mark (RUN_VARIABLE's value) and when its command started."""

    mark: str
    since: int = 0  # clock ticks after boot, as /proc/<pid>/stat counts

    @classmethod
    def start(cls, environ: dict[str, str]) -> Run:
        """Mark the environment of a run about to start; ralph adopts orphans until it ends."""
        global _contained
        with _ADOPTING:
            _contained += 1
            if _contained == 1:
                _subreaper(True)
        run = cls(f"{os.getpid()}.{next(_runs)}")
        environ[RUN_VARIABLE] = run.mark
        return run


def started(pid: int, run: Run | None) -> None:
    """A command has started (under SPAWNING): its session is a live run's."""
    LIVE_SESSIONS.add(pid)
    if run is not None:
        seen = _see("")(pid)
        run.since = seen.started if seen is not None else 0


def ended(pid: int, run: Run | None) -> list[int]:
    """A command's group is gone: for a contained run, what it left (`sweep`). Once no
    contained run is left, orphans go to PID 1 again (what ralph adopted and nobody swept
    would stay its zombies)."""
    global _contained
    LIVE_SESSIONS.discard(pid)
    if run is None:
        return []
    try:
        return sweep(run.mark, run.since)
    finally:
        with _ADOPTING:
            _contained -= 1
            if _contained == 0:
                _subreaper(False)


def _subreaper(on: bool) -> bool:
    """Make ralph a child subreaper, or no longer: whether it worked (Linux only)."""
    prctl = _prctl()
    return prctl is not None and prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0


@cache
def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes  # only a contained run (an actor without a sandbox) needs it

        prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
        return prctl
    except (OSError, AttributeError):
        return None


@dataclass(frozen=True)
class Seen:
    pid: int
    parent: int
    session: int
    zombie: bool
    started: int
    marked: bool


def sweep(run: str, since: int) -> list[int]:
    """SIGKILL what the run marked `run` left running: its marked processes, and the orphans
    ralph adopted since `since` (clock ticks after boot) in no live run's session, with all
    they started. The pids killed; each child of ralph among them is reaped."""
    killed: list[int] = []
    for _ in range(MAX_PASSES):
        with SPAWNING:
            found = _leftovers(run, since)
        alive = [seen for seen in found if not seen.zombie]
        for seen in found:
            if not seen.zombie:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(seen.pid, signal.SIGKILL)
        for seen in found:
            if seen.parent == os.getpid():
                _reap(seen.pid)
        killed += [seen.pid for seen in alive if seen.pid not in killed]
        if not alive:
            break
    return killed


def _reap(pid: int) -> None:
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return
        if done:
            return
        time.sleep(0.01)


def _leftovers(run: str, since: int) -> list[Seen]:
    """What the run left: only a process started since the run began can be one, so the
    environment (the slow read) is read only for those."""
    table = [seen for seen in map(_see(run, since), _pids()) if seen is not None]
    me, my_session = os.getpid(), os.getsid(0)
    children: dict[int, list[Seen]] = {}
    for seen in table:
        children.setdefault(seen.parent, []).append(seen)
    found = {seen.pid: seen for seen in table if seen.marked}
    roots = [
        seen for seen in children.get(me, []) if seen.session not in (my_session, *LIVE_SESSIONS)
    ]
    visited: set[int] = set()
    while roots:
        seen = roots.pop()
        if seen.pid not in visited:
            visited.add(seen.pid)
            found[seen.pid] = seen
            roots += children.get(seen.pid, [])
    return list(found.values())


def _pids() -> list[int]:
    with contextlib.suppress(OSError):
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    return []


def _read(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _see(run: str, since: int = 0) -> Callable[[int], Seen | None]:
    marker = f"{RUN_VARIABLE}={run}".encode()

    def see(pid: int) -> Seen | None:
        if pid == os.getpid():
            return None
        try:
            stat = _read(f"/proc/{pid}/stat")
            fields = stat[stat.rfind(b")") + 2 :].split()
            started = int(fields[19])
            if started < since:
                return None  # older than the run: not its own
            try:
                marked = marker in _read(f"/proc/{pid}/environ").split(b"\0")
            except OSError:  # not ours to read, or a zombie's
                marked = False
            zombie = fields[0] == b"Z"
            return Seen(pid, int(fields[1]), int(fields[3]), zombie, started, marked)
        except (OSError, ValueError, IndexError):
            return None

    return see
