"""The actor's last output lines: what `ralph trace` shows of an attempt that no agent stream
gave steps of (a `cmd:` agent, aider, an LLM actor), kept in its trace at iteration time or
read from the end of its actor.log. Bounded, free of terminal escapes, redacted."""

from __future__ import annotations

from pathlib import Path

from ralph.escapes import strip_escapes
from ralph.glyphs import plural
from ralph.reading import Unreadable, open_regular
from ralph.redact import redact

OUTPUT_LINES = 20  # lines kept
OUTPUT_LINE_CHARS = 300  # a longer line is cut
LOG_TAIL_BYTES = 64 << 10  # of an actor.log read for them, from its end


def last_lines(text: str, count: int = OUTPUT_LINES, *, cut: bool = False) -> list[str]:
    """The last `count` lines of an actor's output with text in them, as a person reads them:
    terminal escapes taken out, redacted, each cut to `OUTPUT_LINE_CHARS`. Only the end of
    `text` is looked at, so a huge output costs no time; a first line cut at its start (or
    `cut`: `text` is itself an end) begins with `…`."""
    tail = text[-count * (OUTPUT_LINE_CHARS + 1) - 400 :]  # the margin: a secret kept whole
    found = [line.rstrip() for line in redact(strip_escapes(tail)).splitlines()]
    if found and (cut or len(tail) < len(text)):
        found[0] = "…" + found[0].lstrip()
    kept = [line for line in found if line.strip() not in ("", "…")][-count:]
    return [_clip(line) for line in kept]


def _clip(line: str) -> str:
    if len(line) <= OUTPUT_LINE_CHARS:
        return line
    return line[:OUTPUT_LINE_CHARS] + f"… [{plural(len(line) - OUTPUT_LINE_CHARS, 'more char')}]"


def log_tail(path: Path, count: int = OUTPUT_LINES) -> list[str]:
    """The last lines of a stored actor.log (`last_lines`), from at most its last
    `LOG_TAIL_BYTES`; none when it is missing or not a regular file."""
    try:
        with open_regular(path) as handle:
            size = handle.seek(0, 2)
            handle.seek(max(0, size - LOG_TAIL_BYTES))
            raw = handle.read(LOG_TAIL_BYTES)
    except (Unreadable, OSError):
        return []
    return last_lines(raw.decode("utf-8", errors="replace"), count, cut=size > LOG_TAIL_BYTES)
