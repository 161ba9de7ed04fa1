"""A cold read on two cores: a forked child reads the later half of the loops while the parent
reads the first half, and hands back the cache rows it built.

Reading 20,000 records is mostly `json.loads`, which holds the GIL, so a thread would not help;
a second process does. The child is forked (nothing to import or pickle: it already has the
reader) and writes its rows, `folder TAB json NEWLINE` (a row's JSON has neither raw), to an
unnamed temporary file. A row is the cache's own format, so the parent takes it as if it had
been cached and still checks every file's stat against it. Off Linux (macOS's system libraries
are not fork-safe, Windows has no fork), on one core, while another thread runs (forking it is
unsafe), or when the child fails, the parent reads everything itself: the same answer, later.

Its gain needs the second core free. Measured with bench/analyze.py (1,000 loops of 20
records, cold, 2 cores): quiet (load ~1), 1.32 s without it -> 0.89 s with it (cold ratio to
plain reading 1.85 -> 1.28: the goal of 1.5 is met only with it); with no core free (load ~4,
bench/ab.py) 2.25 -> 2.56 s, a loss, so it is kept for the quiet machine it was made for.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable
from typing import IO

SPLIT_FROM = 200  # uncached loops from which a second process is worth its fork
Rows = Iterable[tuple[str, str]]


def _cores() -> int:
    return len(os.sched_getaffinity(0))  # the cores this process may use, not the machine's


class Prefetch:
    """A child reading some loops' folders; `collect` waits for its rows."""

    def __init__(self, pid: int, out: IO[bytes], folders: set[str]) -> None:
        self.pid = pid
        self.out = out
        self.folders = folders

    @classmethod
    def start(cls, loop_ids: list[str], read: Callable[[list[str]], Rows]) -> Prefetch | None:
        """A child running `read` on the later half of `loop_ids`; None when not worth it."""
        if len(loop_ids) < SPLIT_FROM or sys.platform != "linux" or _cores() < 2:
            return None
        if threading.active_count() > 1:
            return None
        theirs = loop_ids[len(loop_ids) // 2 :]
        try:
            out = tempfile.TemporaryFile()  # noqa: SIM115 (closed by collect or cancel)
        except OSError:
            return None
        try:
            pid = os.fork()
        except OSError:
            out.close()
            return None
        if pid == 0:  # the child: never returns, never runs the parent's cleanup
            code = 1
            try:
                for folder, packed in read(theirs):
                    out.write(f"{folder}\t{packed}\n".encode())
                out.flush()
                code = 0
            finally:
                os._exit(code)
        folders = {f"{kind}/{loop_id}" for loop_id in theirs for kind in ("reflections", "loops")}
        return cls(pid, out, folders)

    def collect(self) -> list[tuple[str, str]]:
        """The child's rows once it is done; none if it failed."""
        try:
            _, status = os.waitpid(self.pid, 0)
            if os.waitstatus_to_exitcode(status) != 0:
                return []
            self.out.seek(0)
            text = self.out.read().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            return []
        finally:
            self.out.close()
        rows = [line.split("\t", 1) for line in text.split("\n") if line]
        return [(row[0], row[1]) for row in rows if len(row) == 2]

    def cancel(self) -> None:
        """Stop a child whose rows are no longer wanted (the read ended early)."""
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        self.out.close()
