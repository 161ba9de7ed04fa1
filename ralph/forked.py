"""A share of a CPU-bound job in a forked child, on the second core a 2-core machine has.

The first `ralph analyze` over a large memory is bound by `json.loads` of every record, one
core's work; a forked child reading about half of the files while the parent reads the rest
halves that. Forking is used only where it is cheap and safe: Linux, more than one CPU, and a
single-threaded parent (a thread holding a lock at the fork would leave it held in the child).
The child touches nothing shared: it computes, sends its result through a pipe (pickled: a
private channel between a process and its own child) and leaves with `os._exit`. Whatever goes
wrong in it, the parent gets None and does that share of the work itself.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

CHUNK = 1 << 20


def can_fork() -> bool:
    if sys.platform != "linux" or threading.active_count() != 1:
        return False
    try:
        return len(os.sched_getaffinity(0)) > 1
    except OSError:
        return False


class ForkedCall:
    """`fn(*args)` computed in a forked child; `result()` waits for it."""

    def __init__(self, pid: int, pipe: int) -> None:
        self.pid = pid
        self.pipe = pipe

    @classmethod
    def start(cls, fn: Callable[..., Any], *args: Any) -> ForkedCall | None:
        """The running child, or None when forking is not possible or not safe here."""
        if not can_fork():
            return None
        read_end, write_end = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            os.close(read_end)
            os.close(write_end)
            return None
        if pid == 0:  # pragma: no cover - the child; its work is checked through the parent
            code = 1
            try:
                os.close(read_end)
                data = memoryview(pickle.dumps(fn(*args), protocol=pickle.HIGHEST_PROTOCOL))
                while data:
                    data = data[os.write(write_end, data) :]
                code = 0
            finally:
                os._exit(code)  # no cleanup: the parent owns every file and lock
        os.close(write_end)
        return cls(pid, read_end)

    def result(self) -> Any | None:
        """What `fn` returned, or None if the child failed in any way."""
        chunks = []
        try:
            while chunk := os.read(self.pipe, CHUNK):
                chunks.append(chunk)
        except OSError:
            chunks = []
        finally:
            os.close(self.pipe)
        _, status = os.waitpid(self.pid, 0)
        if status != 0 or not chunks:
            return None
        try:
            return pickle.loads(b"".join(chunks))
        except Exception:
            return None

    def cancel(self) -> None:
        """Stop the child and reap it (the parent gave up before asking for the result)."""
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.close(self.pipe)
        with contextlib.suppress(OSError):
            os.waitpid(self.pid, 0)
