"""Terminal control sequences out of text from outside (tools, agents, imported records).

Output parsed, stored, put in a prompt or shown must not carry colour codes (`--color=yes` in a
project's pytest `addopts`) or sequences that move the cursor, clear the screen or retitle the
terminal. This is the one owner of that rule.
"""

from __future__ import annotations

import re

# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ST), other two-byte escapes, the 8-bit CSI and
# OSC introducers, and C0 controls other than tab and newline (a lone CR is kept as a newline).
# A CSI cut off by the end of the text (a capped or stopped stream) goes whole too.
_SEQUENCE = re.compile(
    r"\x1b\[[0-?]*[ -/]*(?:[@-~]|\Z)"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"
    r"|\x1b[@-Z\\-_]"
    r"|\x9b[0-?]*[ -/]*[@-~]"
    r"|\x9d[^\x07\x9c]*[\x07\x9c]?"
    r"|\x1b"
)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def strip_escapes(text: str) -> str:
    """`text` without terminal escape sequences and control characters (tab, newline and CR
    kept as line structure: CRLF and a lone CR become a newline)."""
    if (
        "\x1b" not in text
        and "\x9b" not in text
        and "\x9d" not in text
        and not _CONTROL.search(text)
    ):
        return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text
    text = _SEQUENCE.sub("", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL.sub("", text)


# A sequence a read boundary may have cut: an introducer with its parameters but no final byte
# yet (an OSC or string sequence without its terminator).
_PARTIAL = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*|\][^\x07\x1b]*\x1b?|[PX^_][^\x1b]*\x1b?)?"
    r"|\x9b[0-?]*[ -/]*"
    r"|\x9d[^\x07\x9c]*"
)
HELD_LIMIT = 4096  # longer than any sequence worth waiting for: an unfinished one is cut


class StreamCleaner:
    """`strip_escapes` over a stream read in chunks (a process's live output).

    A sequence or a CRLF cut in two by a read boundary would otherwise leave `[91m` or an
    empty line behind: the unfinished end of a chunk is held until the next one (`flush` at
    the end of the stream gives what is left)."""

    def __init__(self) -> None:
        self._held = ""

    def feed(self, text: str) -> str:
        text = self._held + text
        self._held = ""
        cut = _unfinished_tail(text)
        if cut is not None:
            text, self._held = text[:cut], text[cut:]
        return strip_escapes(text)

    def flush(self) -> str:
        text, self._held = self._held, ""
        return strip_escapes(text)


def _unfinished_tail(text: str) -> int | None:
    """Where an unfinished sequence (or a CR that may be a CRLF's first half) starts, if the
    text ends with one."""
    if text.endswith("\r"):
        return len(text) - 1
    start = max(text.rfind("\x1b"), text.rfind("\x9b"), text.rfind("\x9d"))
    if start < 0 or len(text) - start > HELD_LIMIT:
        return None
    if _PARTIAL.fullmatch(text, start) is None:
        return None
    return start
