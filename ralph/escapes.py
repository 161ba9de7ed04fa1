"""Terminal control sequences out of text from outside (tools, agents, imported records).

Output parsed, stored, put in a prompt or shown must not carry colour codes (`--color=yes` in a
project's pytest `addopts`) or sequences that move the cursor, clear the screen or retitle the
terminal. This is the one owner of that rule.
"""

from __future__ import annotations

import re

# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ST), other two-byte escapes, the 8-bit CSI and
# OSC introducers, and C0 controls other than tab and newline (a lone CR is kept as a newline).
_SEQUENCE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
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
