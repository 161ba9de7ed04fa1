"""Looking at processes the way the tests need: is a pid still running?"""

from __future__ import annotations

from pathlib import Path


def alive(pid: int) -> bool:
    """Running; a zombie (left for a PID 1 that does not reap, as in containers) does not count."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"
