"""Small text graphics every screen shares, so `status`, the live view and `analyze` agree."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

SPARKS = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float]) -> str:
    """Rewards in [0, 1] as block characters, one per iteration (the one sparkline of ralph:
    status, the live view and analyze agree). The full block is kept for 1.0, success: a
    failing 0.99 never looks done."""
    top = len(SPARKS) - 1
    return "".join(
        SPARKS[top if v >= 1.0 else min(int(max(0.0, v) * top + 0.5), top - 1)] for v in values
    )


def clip(text: str, width: int) -> str:
    """At most `width` characters, cut at a word where one is near, with an ellipsis."""
    if len(text) <= width:
        return text
    cut = text[: width - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > width // 2 else cut).rstrip() + "…"


def first_line(text: str, width: int | None = None) -> str:
    """The first line with text in it, stripped; cut at a word to `width` when given."""
    line = next((ln.strip() for ln in (text or "").splitlines() if ln.strip()), "")
    return line if width is None else clip(line, width)


def plural(n: int, word: str) -> str:
    """`1 error`, `2 errors`: a count with its noun, the one rule for every sentence ralph says."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def spans(numbers: Sequence[int]) -> str:
    """`1-3, 7`: numbers as compacted ranges, for an error that names what exists."""
    parts: list[str] = []
    ordered = sorted(set(numbers))
    start = 0
    for i, n in enumerate(ordered):
        if i + 1 == len(ordered) or ordered[i + 1] != n + 1:
            first = ordered[start]
            parts.append(str(n) if first == n else f"{first}-{n}")
            start = i + 1
    return ", ".join(parts)


def changed_text(files: Sequence[Mapping[str, Any]] | None, limit: int = 8) -> str:
    """The files a loop changed in one line: `2 files: README.md +3 -1, logo.png (binary)`
    (the `changed_files` of `--json`)."""
    if files is None:
        return "unknown (its best commit is gone)"
    if not files:
        return "nothing"

    def one(f: Mapping[str, Any]) -> str:
        if f["added"] is None or f["removed"] is None:
            return f"{f['path']} (binary)"
        return f"{f['path']} +{f['added']} -{f['removed']}"

    shown = ", ".join(one(f) for f in files[:limit])
    more = f", … {len(files) - limit} more" if len(files) > limit else ""
    return f"{plural(len(files), 'file')}: {shown}{more}"
