"""Search/replace edit blocks: parse them from a model's answer and apply them safely.

The format is the common one (aider's "diff" format): the file's path alone on a line, an
optional fence line, `<<<<<<< SEARCH`, the old lines, `=======`, the new lines,
`>>>>>>> REPLACE`, an optional closing fence. A model's answer is untrusted input, so every path
is checked before anything is read or written: nothing outside the repository (absolute paths,
`..`, symlinks resolving elsewhere) and nothing inside `.git/` or `.aiwg/`. A file gets all of
its blocks or none: the new content is computed in memory and written atomically only when every
block matched, so a half-applied file never reaches the evaluator.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ralph.files import write_atomically
from ralph.glyphs import first_line

SEARCH_MARK = re.compile(r"^\s*<{5,9} ?SEARCH\b.*$")
DIVIDER_MARK = re.compile(r"^\s*={5,9}\s*$")
REPLACE_MARK = re.compile(r"^\s*>{5,9} ?REPLACE\b.*$")
FENCE = re.compile(r"^\s*(`{3,}|~{3,})[\w+#.-]*\s*$")
PROTECTED_DIRS = frozenset({".git", ".aiwg"})
Reindenter = Callable[[str], str]


class UnsafePath(ValueError):
    """A path an edit must not touch; the message says why."""


@dataclass
class EditBlock:
    path: str
    search: str
    replace: str


@dataclass
class EditFailure:
    path: str
    reason: str
    search_first_line: str = ""

    def describe(self) -> str:
        """One line for the next prompt: which block did not apply and why."""
        where = f" (SEARCH starting {self.search_first_line.strip()!r})"
        return f"{self.path}: {self.reason}{where if self.search_first_line.strip() else ''}"


@dataclass
class ApplyReport:
    applied: list[str] = field(default_factory=list)  # existing files changed
    created: list[str] = field(default_factory=list)  # files that did not exist before
    failures: list[EditFailure] = field(default_factory=list)
    blocks: int = 0

    @property
    def ok(self) -> bool:
        return not self.failures

    def unmatched(self) -> list[str]:
        return [failure.describe() for failure in self.failures]


# --------------------------------------------------------------------------- parsing


def parse_edit_blocks(text: str) -> tuple[list[EditBlock], list[EditFailure]]:
    """Every well-formed block in `text`, plus a failure for each malformed one."""
    lines = text.split("\n")
    blocks: list[EditBlock] = []
    errors: list[EditFailure] = []
    last_path = ""
    i = 0
    while i < len(lines):
        if not SEARCH_MARK.match(lines[i]):
            i += 1
            continue
        path = _path_before(lines, i) or last_path
        search, i = _collect(lines, i + 1, DIVIDER_MARK)
        if i >= len(lines):
            errors.append(EditFailure(path or "?", "block has no =======", _first(search)))
            break
        replace, i = _collect(lines, i + 1, REPLACE_MARK)
        if i >= len(lines):
            errors.append(EditFailure(path or "?", "block has no >>>>>>> REPLACE", _first(search)))
            break
        if not path:
            errors.append(EditFailure("?", "no file path before the block", _first(search)))
        else:
            blocks.append(EditBlock(path, _join(search), _join(replace)))
            last_path = path
        i += 1
    return blocks, errors


def _collect(lines: list[str], start: int, end: re.Pattern[str]) -> tuple[list[str], int]:
    i = start
    while i < len(lines) and not end.match(lines[i]):
        i += 1
    return lines[start:i], i


def _join(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


def _first(lines: list[str]) -> str:
    return next((line for line in lines if line.strip()), "")


def _path_before(lines: list[str], marker: int) -> str:
    """The path line just above a SEARCH marker, skipping one fence line and blank lines."""
    fences = 0
    for j in range(marker - 1, max(marker - 4, -1), -1):
        line = lines[j].strip()
        if not line:
            continue
        if FENCE.match(line):
            fences += 1
            if fences > 1:
                return ""
            continue
        if REPLACE_MARK.match(line) or DIVIDER_MARK.match(line):
            return ""
        return _clean_path(line)
    return ""


def _clean_path(line: str) -> str:
    """A path from a line like `src/app.py`, `**src/app.py**:` or `Change src/app.py:`."""
    words = line.strip().split()
    if not words:
        return ""
    path = words[-1].strip("`*'\"").removesuffix(":").strip("`*'\"")
    if len(words) > 1 and not (PurePosixPath(path).suffix or "/" in path):
        return ""
    return path


# --------------------------------------------------------------------------- safety


def check_path(root: Path, rel: str) -> Path:
    """The real path `rel` names inside `root`; raises UnsafePath when it must not be touched."""
    if not rel or rel.strip() != rel or "\x00" in rel:
        raise UnsafePath("invalid path")
    pure = PurePosixPath(rel.replace("\\", "/"))
    if pure.is_absolute() or rel.startswith("~") or re.match(r"^[A-Za-z]:", rel):
        raise UnsafePath("absolute paths are not allowed")
    if ".." in pure.parts:
        raise UnsafePath("'..' is not allowed in paths")
    _refuse_protected(pure.parts)
    real_root = root.resolve()
    target = (real_root / pure).resolve()
    if target != real_root and real_root not in target.parents:
        raise UnsafePath("path resolves outside the repository (symlink)")
    if target == real_root:
        raise UnsafePath("path names the repository itself")
    _refuse_protected(target.relative_to(real_root).parts)
    return target


def _refuse_protected(parts: Iterable[str]) -> None:
    for part in parts:
        if part in PROTECTED_DIRS:
            raise UnsafePath(f"writing inside {part}/ is not allowed")


# --------------------------------------------------------------------------- applying


def apply_edits(text: str, root: Path) -> ApplyReport:
    """Parse `text` and apply its blocks under `root`."""
    blocks, errors = parse_edit_blocks(text)
    report = apply_edit_blocks(blocks, root)
    report.failures[:0] = errors
    report.blocks += len(errors)
    return report


def apply_edit_blocks(blocks: list[EditBlock], root: Path) -> ApplyReport:
    """Apply blocks file by file; a file with any failing block is left untouched."""
    report = ApplyReport(blocks=len(blocks))
    by_path: dict[str, list[EditBlock]] = {}
    for block in blocks:
        by_path.setdefault(block.path, []).append(block)
    for rel, file_blocks in by_path.items():
        _apply_file(root, rel, file_blocks, report)
    return report


def _apply_file(root: Path, rel: str, blocks: list[EditBlock], report: ApplyReport) -> None:
    def fail_all(reason: str) -> None:
        report.failures.extend(EditFailure(rel, reason, first_line(b.search)) for b in blocks)

    try:
        target = check_path(root, rel)
    except UnsafePath as exc:
        return fail_all(str(exc))
    exists = target.exists()
    if exists and not target.is_file():
        return fail_all("not a regular file")
    try:
        content: str | None = read_text(target) if exists else None
    except (UnicodeDecodeError, OSError) as exc:
        return fail_all(f"cannot read as text ({exc.__class__.__name__})")
    failed: list[tuple[EditBlock, str]] = []
    for block in blocks:
        new_content, problem = _apply_block(content, block)
        if problem:
            failed.append((block, problem))
        else:
            content = new_content
    if failed:
        for block in blocks:
            reason = next((p for b, p in failed if b is block), None)
            reason = reason or "not applied: another block for this file did not match"
            report.failures.append(EditFailure(rel, reason, first_line(block.search)))
        return
    if content is None:
        return
    try:
        if not exists or read_text(target) != content:
            write_atomic(target, content)
    except OSError as exc:
        return fail_all(f"cannot write ({exc.strerror or exc.__class__.__name__})")
    (report.applied if exists else report.created).append(rel)


def read_text(path: Path) -> str:
    """The file's text with its line endings as they are (no newline translation)."""
    return path.read_bytes().decode("utf-8")


def _apply_block(content: str | None, block: EditBlock) -> tuple[str | None, str]:
    """(new content, "") on success, (None, reason) when the block does not apply."""
    if not block.search.strip():
        if content is None or not content:
            return block.replace, ""
        if not content.strip():  # a blank file counts as empty
            return (content if block.replace == block.search else block.replace), ""
        return None, "SEARCH is empty but the file already exists and is not empty"
    if content is None:
        return None, "file does not exist (use an empty SEARCH to create it)"
    result = replace_once(content, block.search, block.replace)
    if result is None:
        return None, "SEARCH text not found in the file"
    return result, ""


def replace_once(content: str, search: str, replace: str) -> str | None:
    """Replace the first occurrence of `search` that starts a line, tolerating whitespace-only
    differences. SEARCH names whole lines: `1` must not match the end of a line `01`."""
    index = _find_at_line_start(content, search)
    if index >= 0:
        return content[:index] + replace + content[index + len(search) :]
    if "\r\n" in content and "\r\n" not in search:
        old = search.replace("\n", "\r\n")
        crlf = _find_at_line_start(content, old)
        if crlf >= 0:
            return content[:crlf] + replace.replace("\n", "\r\n") + content[crlf + len(old) :]
    return _replace_lines(content, search, replace)


def _find_at_line_start(content: str, search: str) -> int:
    """The first index of `search` in `content` at the start of a line, or -1."""
    index = content.find(search)
    while index > 0 and content[index - 1] != "\n":
        index = content.find(search, index + 1)
    return index


def _replace_lines(content: str, search: str, replace: str) -> str | None:
    lines = content.split("\n")
    wanted = _trim_blank_edges(search.split("\n"))
    if not wanted:
        return None
    new_lines = replace.split("\n")
    if replace.endswith("\n") or not replace:
        new_lines.pop()
    first = wanted[0].strip()  # both matchers need the first line equal up to whitespace
    starts = [i for i in range(len(lines) - len(wanted) + 1) if lines[i].strip() == first]
    for matcher in (_match_trailing, _match_indent):
        for start in starts:
            reindent = matcher(lines[start : start + len(wanted)], wanted)
            if reindent is None:
                continue
            end = start + len(wanted)
            eol = "\r" if lines[end - 1].endswith("\r") else ""
            body = [reindent(line) + eol for line in new_lines]
            return "\n".join(lines[:start] + body + lines[end:])
    return None


def _trim_blank_edges(lines: list[str]) -> list[str]:
    start, end = 0, len(lines)
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return lines[start:end]


def _same(line: str) -> str:
    return line


def _match_trailing(have: list[str], want: list[str]) -> Reindenter | None:
    if all(h.rstrip() == w.rstrip() for h, w in zip(have, want, strict=True)):
        return _same
    return None


def _match_indent(have: list[str], want: list[str]) -> Reindenter | None:
    """Match lines equal up to one consistent indentation shift; re-indent REPLACE the same."""
    shift: tuple[str, str] | None = None  # (prefix to add, prefix to remove)
    for h, w in zip(have, want, strict=True):
        if h.strip() != w.strip():
            return None
        if not h.strip():
            continue
        h_ws, w_ws = _indent(h), _indent(w)
        if h_ws.endswith(w_ws) and len(h_ws) >= len(w_ws):
            this = (h_ws[: len(h_ws) - len(w_ws)], "")
        elif w_ws.endswith(h_ws):
            this = ("", w_ws[: len(w_ws) - len(h_ws)])
        else:
            return None
        if shift is None:
            shift = this
        elif shift != this:
            return None
    if shift is None:
        return _same
    add, remove = shift
    return lambda line: add + line.removeprefix(remove) if line.strip() else line


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def write_atomic(path: Path, content: str) -> None:
    """A project file rewritten in place keeps its permissions (an executable stays one)."""
    mode = path.stat().st_mode & 0o7777 if path.exists() else None
    write_atomically(path, content, mode=mode)
