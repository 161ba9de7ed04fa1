"""LLM actors (`openai:MODEL`, `anthropic:MODEL`, `ollama:MODEL`): ralph applies the model's edits.

The model sees no tools, so it gets what it needs up front: the prompt, plus the files the
prompt points at (failing diagnostics' `path:line` first, then any other path that exists in the
repository), packed into a token budget (~4 characters a token). It answers with search/replace
blocks that `edits.py` applies inside the repository; blocks that did not match go back to the
loop in `unmatched_edits` so the next attempt can be told exactly what failed.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from ralph.actors.base import ActorContext, ActorResult, ToolCall
from ralph.actors.command import REQUEST_FILE, write_log, write_prompt
from ralph.actors.edits import (
    REPLACE_MARK,
    SEARCH_MARK,
    ApplyReport,
    UnsafePath,
    apply_edits,
    check_path,
)
from ralph.files import atomic_write_text
from ralph.providers.base import ChatClient, Message

DEFAULT_CONTEXT_TOKENS = 24_000
CHARS_PER_TOKEN = 4
MAX_FILE_BYTES = 1_000_000
WINDOW_LINES = 40
TREE_CHARS = 4_000
SKIP_DIRS = frozenset(
    {".git", ".aiwg", "node_modules", "__pycache__", ".venv", "venv", ".tox", "dist", "build"}
)
PATH_REF = re.compile(r"(?P<path>[\w./-]*\w\.[A-Za-z0-9_]+)(?::(?P<line>\d+))?")

SYSTEM_PROMPT = """\
You are a careful software engineer changing files in a repository so that its checks pass.
You cannot run commands; you change files by answering with SEARCH/REPLACE blocks, exactly:

path/to/file.py
```python
<<<<<<< SEARCH
the exact lines to change, copied from the current file
=======
the lines that replace them
>>>>>>> REPLACE
```

Rules:
- The path is relative to the repository root, alone on the line before the block.
- SEARCH must match the current file exactly, indentation and comments included; copy it from
  the files shown. Include just enough lines to make it unique.
- Keep blocks small; use several blocks for several changes, in file order.
- To create a file, leave SEARCH empty. To delete lines, leave REPLACE empty.
- Never edit files under .git/ or .aiwg/.
- Start with one or two sentences saying what you change and why. Do not claim the task is
  done: the project's own checks decide that.
"""


@dataclass
class FileRef:
    path: str  # relative to the repository, POSIX separators
    lines: list[int] = field(default_factory=list)


class LLMActor:
    """A chat model that answers with edit blocks."""

    def __init__(
        self,
        name: str,
        client: ChatClient,
        *,
        context_tokens: int = DEFAULT_CONTEXT_TOKENS,
        max_tokens: int | None = None,
    ) -> None:
        self.name = name
        self.client = client
        self.context_tokens = context_tokens
        self.max_tokens = max_tokens

    def preflight(self) -> None:
        """The provider client checked its key and endpoint when it was made."""

    def act(self, prompt: str, ctx: ActorContext) -> ActorResult:
        started = time.monotonic()
        message = build_user_message(prompt, ctx.workdir, self.context_tokens * CHARS_PER_TOKEN)
        write_prompt(ctx, prompt)
        request = f"<!-- system -->\n{SYSTEM_PROMPT}\n<!-- user -->\n{message}"
        atomic_write_text(ctx.artifacts_dir / REQUEST_FILE, request, durable=False)
        response = self.client.chat(
            [Message("system", SYSTEM_PROMPT), Message("user", message)],
            max_tokens=self.max_tokens,
        )
        if ctx.on_output is not None:
            ctx.on_output("stdout", response.text)
        report = apply_edits(response.text, ctx.workdir)
        unmatched = report.unmatched()
        if report.blocks == 0:
            unmatched.append("the answer contained no SEARCH/REPLACE blocks; nothing was changed")
        log = f"{response.text.rstrip()}\n\n--- edits ---\n{describe_report(report)}\n"
        write_log(ctx, log)
        return ActorResult(
            output=log,
            exit_code=0 if not unmatched else 1,
            duration_ms=int((time.monotonic() - started) * 1000),
            tokens_in=response.tokens_in,
            tokens_out=response.tokens_out,
            cost_usd=response.cost_usd,
            tool_calls=[ToolCall("edit", p) for p in report.applied]
            + [ToolCall("create", p) for p in report.created],
            summary=prose(response.text) or None,
            unmatched_edits=unmatched,
        )

    def chat_client(self) -> ChatClient:
        return self.client


def describe_report(report: ApplyReport) -> str:
    lines = [f"applied: {p}" for p in report.applied] + [f"created: {p}" for p in report.created]
    lines += [f"failed: {text}" for text in report.unmatched()]
    return "\n".join(lines) or "no edit blocks"


def prose(answer: str, limit: int = 2_000) -> str:
    """The model's explanation: its answer without the edit blocks."""
    kept: list[str] = []
    lines = answer.split("\n")
    i = 0
    while i < len(lines):
        if SEARCH_MARK.match(lines[i]):
            while kept and (not kept[-1].strip() or kept[-1].lstrip().startswith("```")):
                kept.pop()
            if kept:
                kept.pop()  # the path line
            while i < len(lines) and not REPLACE_MARK.match(lines[i]):
                i += 1
            if i + 1 < len(lines) and lines[i + 1].lstrip().startswith("```"):
                i += 1
        else:
            kept.append(lines[i])
        i += 1
    return "\n".join(kept).strip()[:limit]


# --------------------------------------------------------------------------- context


def build_user_message(prompt: str, workdir: Path, budget_chars: int) -> str:
    """The prompt, then the referenced files and a file list, within `budget_chars`."""
    files, used = [], 0
    for ref in referenced_files(prompt, workdir):
        block = file_block(workdir, ref, budget_chars - used)
        if block:
            files.append(block)
            used += len(block)
    parts = [prompt.rstrip()]
    if files:
        parts.append("## Files\n\n" + "\n".join(files))
    tree = repository_tree(workdir, min(TREE_CHARS, max(budget_chars - used, 0)))
    if tree:
        parts.append("## Repository files\n\n" + tree)
    return "\n\n".join(parts) + "\n"


def referenced_files(prompt: str, workdir: Path) -> list[FileRef]:
    """Existing repository files the prompt names: those with a line number first."""
    refs: dict[str, FileRef] = {}
    for match in PATH_REF.finditer(prompt):
        rel = repository_path(match["path"], workdir)
        if rel is None:
            continue
        ref = refs.setdefault(rel, FileRef(rel))
        if match["line"]:
            ref.lines.append(int(match["line"]))
    ordered = list(refs.values())
    return [r for r in ordered if r.lines] + [r for r in ordered if not r.lines]


def repository_path(raw: str, workdir: Path) -> str | None:
    """`raw` as a path relative to the repository when it names a readable file there."""
    raw = raw.rstrip(".")
    root = workdir.resolve()
    if raw.startswith("/"):
        try:
            raw = Path(raw).resolve().relative_to(root).as_posix()
        except (ValueError, OSError):
            return None
    raw = raw.removeprefix("./")
    try:
        target = check_path(root, raw)
        if not target.is_file() or target.stat().st_size > MAX_FILE_BYTES:
            return None
    except (UnsafePath, OSError):
        return None
    return target.relative_to(root).as_posix()


def file_block(workdir: Path, ref: FileRef, room: int) -> str:
    """The file fenced under its path; a window around the cited lines when it is too big."""
    try:
        text = (workdir / ref.path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""
    whole = _fenced(ref.path, text)
    if len(whole) <= room:
        return whole
    if not ref.lines:
        return ""
    lines = text.split("\n")
    first = max(min(ref.lines) - WINDOW_LINES, 1)
    last = min(max(ref.lines) + WINDOW_LINES, len(lines))
    window = "\n".join(lines[first - 1 : last])
    block = _fenced(ref.path, window, f" (lines {first}-{last} of {len(lines)})")
    return block if len(block) <= room else ""


def _fenced(path: str, text: str, note: str = "") -> str:
    fence = "````" if "```" in text else "```"
    return f"{path}{note}\n{fence}\n{text.rstrip()}\n{fence}\n"


def repository_tree(workdir: Path, room: int) -> str:
    """Relative paths of the repository's files, sorted, cut to `room` characters."""
    if room <= 0:
        return ""
    paths: list[str] = []
    for dirpath, dirnames, filenames in os.walk(workdir):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
        rel_dir = Path(dirpath).relative_to(workdir)
        paths.extend((rel_dir / name).as_posix() for name in sorted(filenames))
        if sum(len(p) + 1 for p in paths) > room:
            break
    out, used = [], 0
    for path in paths:
        if used + len(path) + 1 > room:
            out.append("…")
            break
        out.append(path)
        used += len(path) + 1
    return "\n".join(out)
