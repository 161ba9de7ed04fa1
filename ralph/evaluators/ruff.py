"""The ruff check: `ruff check --no-fix --output-format json`, read into lint (and syntax) errors.

`ruff format --check` is understood too (one error per file it would reformat; a configured
`ruff format` is run with `--check`, never formatting), and any other ruff command is read in
the concise text format. ruff's cache goes to ralph's scratch folder (`RUFF_CACHE_DIR`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ralph.evaluators.command import (
    DiagnosticsCheck,
    insert_after,
    output_tail,
    relative_path,
    scratch,
    user_sets,
)
from ralph.process import ProcessResult
from ralph.records import Diagnostic, Metrics, Severity

RUFF_CHECK = re.compile(r"(?:^|(?<=[\s/]))ruff\s+check(?=\s|$)")
RUFF_FORMAT = re.compile(r"(?:^|(?<=[\s/]))ruff\s+format(?=\s|$)")
USER_FIX = re.compile(r"\s--fix(?:-only)?(?=\s|$)")  # `--no-fix` goes first: a later --fix wins
SEGMENT_END = re.compile(r"&&|\|\||[;|&\n]")
FORMAT_READ_ONLY = re.compile(r"\s--(?:check|diff)(?=\s|$)")
USER_FORMAT = re.compile(r"\s--output-format(?:=|\s+)\S+")  # ruff rejects the option twice
# `ruff format --check`: "Would reformat: PATH" in older ruff, a diagnostic per file in newer.
REFORMAT = re.compile(
    r"^(?:Would reformat: (?P<old>.+)|unformatted: .*\n\s*--> (?P<new>.+?)(?::\d+:\d+)?)$",
    re.MULTILINE,
)
CONCISE = re.compile(
    r"^(?P<file>[^:\n]+):(?P<line>\d+):(?P<column>\d+): (?:(?P<code>[A-Z]+[0-9]+) )?"
    r"(?:\[\*\] )?(?P<message>.+)$",
    re.MULTILINE,
)


class RuffCheck(DiagnosticsCheck):
    """Score: 1 when clean, else relative to the baseline's error count (0 without one)."""

    label = "ruff"

    def command_for(self, cwd: Path) -> str:
        """ruff as a reader only: `check` with `--no-fix` (a project's `fix = true` would
        rewrite the user's files), `format` with `--check` (never formatting the tree)."""
        command = self.spec.command
        match = RUFF_CHECK.search(command)
        if match is not None:
            # ruff's own arguments only: a `--fix` of the next command in `a && b` is not ruff's
            end = SEGMENT_END.search(command, match.end())
            cut = end.start() if end is not None else len(command)
            own = USER_FIX.sub("", USER_FORMAT.sub("", command[match.end() : cut]))
            stripped = command[: match.end()] + own + command[cut:]
            flags = "--no-fix --output-format json"
            command = insert_after(stripped, RUFF_CHECK, flags) or command
        elif RUFF_FORMAT.search(command) and not FORMAT_READ_ONLY.search(command):
            command = insert_after(command, RUFF_FORMAT, "--check") or command
        return command

    def tool_env(self, cwd: Path) -> dict[str, str]:
        if user_sets("RUFF_CACHE_DIR", self):
            return {}
        return {"RUFF_CACHE_DIR": str(scratch(cwd, "ruff-cache"))}

    def findings(self, res: ProcessResult, cwd: Path) -> list[Diagnostic]:
        return parse_output(res.stdout, cwd)

    def unread(self, res: ProcessResult) -> Diagnostic:
        message = output_tail(res) or "ruff exited with code 1"
        return Diagnostic(type="lint_error", message=message, severity="error")

    def metrics(self, errors: list[Diagnostic]) -> Metrics:
        warnings = sum(1 for e in errors if e.severity == "warning")
        return Metrics(lint_errors=len(errors) - warnings, lint_warnings=warnings)


def parse_output(stdout: str, cwd: Path) -> list[Diagnostic]:
    """ruff's JSON array, else `Would reformat:` lines, else the concise text format."""
    start = stdout.find("[")
    if start != -1:
        try:
            items = json.loads(stdout[start:])
        except ValueError:
            items = None
        if isinstance(items, list):
            return [_from_json(item, cwd) for item in items if isinstance(item, dict)]
    reformat = [
        Diagnostic(
            type="lint_error",
            message="file is not formatted; run `ruff format` on it",
            file=relative_path((m["old"] or m["new"]).strip(), cwd),
            severity="error",
            rule="format",
        )
        for m in REFORMAT.finditer(stdout)
    ]
    if reformat:
        return reformat
    return [
        _diagnostic(m["code"], m["message"], m["file"], int(m["line"]), int(m["column"]), cwd)
        for m in CONCISE.finditer(stdout)
    ]


def _from_json(item: dict[str, Any], cwd: Path) -> Diagnostic:
    location = item.get("location") or {}
    message = str(item.get("message") or "")
    fix = item.get("fix")
    if isinstance(fix, dict):
        unsafe = fix.get("applicability") not in (None, "safe")
        message += " (fixable: ruff check --fix" + (" --unsafe-fixes)" if unsafe else ")")
    severity = item.get("severity")
    return _diagnostic(
        item.get("code"),
        message,
        str(item.get("filename") or ""),
        location.get("row"),
        location.get("column"),
        cwd,
        severity if severity in ("warning", "info") else "error",
    )


def _diagnostic(
    code: str | None,
    message: str,
    file: str,
    line: int | None,
    column: int | None,
    cwd: Path,
    severity: Severity = "error",
) -> Diagnostic:
    # Older ruff reports syntax errors with no code and "SyntaxError: ..."; newer ones as
    # the pseudo-rule `invalid-syntax`.
    syntax = code in (None, "invalid-syntax", "E999") and (
        code is not None or message.startswith(("SyntaxError", "invalid-syntax"))
    )
    return Diagnostic(
        type="syntax_error" if syntax else "lint_error",
        message=message,
        file=relative_path(file, cwd) if file else None,
        line=line if isinstance(line, int) else None,
        column=column if isinstance(column, int) else None,
        severity=severity,
        rule=code or ("invalid-syntax" if syntax else None),
    )
