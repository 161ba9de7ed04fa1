"""The one bounded reader of ralph's JSON files: records, states and traces, which may come from
another machine (an artifact, an archive, another clone) or have been touched by an agent.

Regular files only (a FIFO named `002.json` is refused at once, never waited on), at most
`limit` bytes (a huge file is refused before it fills memory), and every way the bytes can be
wrong (not UTF-8, not JSON, a non-finite number; for what is to be written again, a lone
surrogate that no UTF-8 file can hold) is an `Unreadable` with the reason, never an exception
that stops a command half way.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from typing import Any, BinaryIO

from ralph.glyphs import plural

MB = 1_000_000
# A lone surrogate escape (`\ud800` not followed by its pair) decodes into a str that cannot be
# encoded again; a cheap search on the text finds where to look closer.
SURROGATE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


class Unreadable(ValueError):
    """Why a file cannot be read as what it should be: the message is the reason, no path."""


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """`path` opened for reading if it is a regular file (a FIFO is refused, never waited on);
    `Unreadable` otherwise. For a file read line by line, as far as the reader needs."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise Unreadable(f"cannot read: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Unreadable("not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def read_bounded(path: str | os.PathLike[str], limit: int) -> bytes:
    """The whole regular file at `path`, at most `limit` bytes; `Unreadable` otherwise.

    Opened non-blocking, so a FIFO or a device is seen by its type before any read waits; the
    size is checked on the open file and again while reading (a file that grows meanwhile)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise Unreadable(f"cannot read: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Unreadable("not a regular file")
        if st.st_size > limit:
            raise Unreadable(f"larger than {plural(limit, 'byte')}")
        chunks = []
        total = 0
        while chunk := os.read(fd, max(st.st_size + 1 - total, 1 << 16)):
            total += len(chunk)
            if total > limit:
                raise Unreadable(f"larger than {plural(limit, 'byte')}")
            chunks.append(chunk)
    except OSError as exc:
        raise Unreadable(f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise Unreadable(f"{text} is out of range for a JSON number")
    return value


def _constant(name: str) -> Any:
    raise Unreadable(f"{name} is not valid JSON (a non-finite number)")


# One decoder each, made once: json.loads with a hook builds a new decoder on every call.
_STRICT = json.JSONDecoder(parse_float=_finite, parse_constant=_constant)
_LENIENT = json.JSONDecoder()


def parse_json(raw: bytes, *, strict: bool = True, writable: bool = False) -> Any:
    """Bytes as JSON. `strict` (what a record must be): finite numbers; without it, what
    `json.dumps` writes by default reads back. `writable`: every string can be written back as
    UTF-8 (what ralph is about to write; a reader shows a lone surrogate as it is)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Unreadable(f"not UTF-8: {exc.reason} at byte {exc.start}") from None
    try:
        data = (_STRICT if strict else _LENIENT).decode(text)
    except json.JSONDecodeError as exc:
        raise Unreadable(f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise Unreadable("not JSON: nested too deeply") from None
    except Unreadable:
        raise
    except ValueError as exc:  # an integer of more digits than Python converts
        raise Unreadable(f"not JSON: {exc}") from None
    if writable and SURROGATE.search(text):
        try:
            json.dumps(data, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as exc:
            bad = exc.object[exc.start : exc.end].encode("utf-8", "backslashreplace").decode()
            raise Unreadable(f"a lone surrogate ({bad}) that UTF-8 cannot hold") from None
    return data


def read_json_bounded(
    path: str | os.PathLike[str], limit: int, *, strict: bool = True, writable: bool = False
) -> Any:
    """`read_bounded` then `parse_json`: a file ralph reads as one JSON value."""
    return parse_json(read_bounded(path, limit), strict=strict, writable=writable)
