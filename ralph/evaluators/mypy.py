"""The mypy check: JSON output where the installed mypy has it (1.11+), else its text format.

Every line is read as JSON first and as text second, so output from a mypy that ignored the
flag (a known cache bug in 1.19) or from dmypy is still understood.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

from ralph import process
from ralph.evaluators.base import CheckOutcome, OutputCallback
from ralph.evaluators.shell import (
    CommandCheck,
    count_score,
    crashed,
    insert_after,
    make_result,
    output_tail,
    relative_path,
    timed_out,
    tool_pattern,
)
from ralph.records import CheckStatus, Diagnostic, Metrics

MYPY = tool_pattern("mypy")
JSON_SINCE = (1, 11)
JSON_FLAGS = "-O json"
TEXT_FLAGS = "--show-column-numbers --no-error-summary --no-color-output"
TEXT_LINE = re.compile(
    r"^(?P<file>[^:\n]+):(?P<line>\d+):(?:(?P<column>\d+):)? (?P<severity>error|warning|note): "
    r"(?P<message>.*?)(?:  \[(?P<code>[a-z0-9-]+)\])?$"
)
MAX_NOTES = 3

_versions: dict[tuple[str, str], tuple[int, ...] | None] = {}
_versions_lock = threading.Lock()


class MypyCheck(CommandCheck):
    """Score: 1 when clean, else relative to the baseline's error count (0 without one)."""

    def run(
        self,
        cwd: Path,
        *,
        baseline_errors: int | None = None,
        on_output: OutputCallback | None = None,
    ) -> CheckOutcome:
        command = self.spec.command
        match = MYPY.search(command)
        if match is not None:
            version = mypy_version(command[: match.end()], cwd)
            flags = JSON_FLAGS if version is not None and version >= JSON_SINCE else TEXT_FLAGS
            command = insert_after(command, MYPY, flags) or command
        res = self.execute(command, cwd, on_output=on_output)
        if res.timed_out:
            return timed_out(self.spec, res, self.timeout)
        code = res.exit_code
        errors = parse_output(res.stdout, cwd)
        # Exit 2 is mypy's "blocking error": a syntax error it reports, or a crash/bad usage.
        if code not in (0, 1, 2) or (code == 2 and not errors):
            return crashed(self.spec, res, "mypy could not check the project")
        if code == 1 and not errors:
            errors = [
                Diagnostic(
                    type="other",
                    message="mypy exited with code 1 but reported no error ralph could read",
                    stack_trace=output_tail(res) or None,
                    severity="error",
                )
            ]
        status: CheckStatus = "pass" if code == 0 and not errors else "fail"
        return CheckOutcome(
            self.spec,
            make_result(self.spec, status, res),
            errors,
            Metrics(type_errors=len(errors)),
            count_score(len(errors), baseline_errors) if status == "fail" else 1.0,
        )


def mypy_version(prefix: str, cwd: Path) -> tuple[int, ...] | None:
    """`<prefix> --version`, asked once per command prefix and remembered."""
    key = (prefix, str(cwd))
    with _versions_lock:
        if key in _versions:
            return _versions[key]
    res = process.run(f"{prefix} --version", cwd=cwd, wall_timeout=60, cap=10_000)
    found = re.search(r"mypy (\d+)\.(\d+)", res.stdout)
    version = (int(found[1]), int(found[2])) if found and res.exit_code == 0 else None
    with _versions_lock:
        _versions[key] = version
    return version


def parse_output(stdout: str, cwd: Path) -> list[Diagnostic]:
    """Errors from JSON lines or `file:line:col: severity: message  [code]` lines.

    Notes are not errors: those on an error's line are appended to its message, others dropped.
    """
    errors: list[Diagnostic] = []
    notes = 0
    for line in stdout.splitlines():
        item = _json_line(line) if line.startswith("{") else None
        if item is None:
            match = TEXT_LINE.match(line)
            if match is None:
                continue
            item = match.groupdict()
            item["column"] = int(item["column"]) if item["column"] else None
        else:
            item["column"] = item["column"] + 1 if isinstance(item.get("column"), int) else None
        file = relative_path(str(item.get("file") or ""), cwd) or None
        number = int(item["line"]) if str(item.get("line", "")).isdigit() else None
        message = str(item.get("message") or "")
        if item.get("severity") == "note":
            last = errors[-1] if errors else None
            if last and last.file == file and last.line == number and notes < MAX_NOTES:
                last.message += f"\nnote: {message}"
                notes += 1
            continue
        if item.get("hint"):
            message += "\n" + "\n".join(f"note: {h}" for h in str(item["hint"]).splitlines())
        code = item.get("code") or None
        syntax = code == "syntax" or (code is None and "syntax" in message.lower())
        errors.append(
            Diagnostic(
                type="syntax_error" if syntax else "type_error",
                message=message,
                file=file,
                line=number,
                column=item["column"],
                severity="warning" if item.get("severity") == "warning" else "error",
                rule=str(code) if code else None,
            )
        )
        notes = 0
    return errors


def _json_line(line: str) -> dict[str, Any] | None:
    try:
        item = json.loads(line)
    except ValueError:
        return None
    return item if isinstance(item, dict) and "message" in item else None
