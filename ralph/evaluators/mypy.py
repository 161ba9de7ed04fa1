"""The mypy check: JSON output where the installed mypy has it (1.11+), else its text format.

Every line is read as JSON first and as text second, so output from a mypy that ignored the
flag (a known cache bug in 1.19) or from dmypy is still understood.

Which mypy is installed is asked once (`mypy --version`: a Python start-up and mypy's import,
CPU that every `ralph check` paid beside its checks; measured with bench/ab.py on
bench/evaluator.py's project: `ralph check` 2.34 -> 2.24 s, 16 rounds, busy 2-core machine)
and remembered across runs in the user's cache directory, keyed by the program's path, size
and mtime and those of the `mypy/version.py` installed beside it, so a reinstall or upgrade
asks again. A missing or corrupt cache file only means asking; a stale answer that makes mypy
refuse its flags is forgotten and mypy run again.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import threading
from pathlib import Path
from typing import Any

from ralph import process
from ralph.errors import StoreError
from ralph.evaluators.base import CheckOutcome, OutputCallback
from ralph.evaluators.command import (
    DiagnosticsCheck,
    insert_after,
    make_result,
    output_tail,
    relative_path,
    scratch,
    tool_pattern,
    user_sets,
)
from ralph.files import atomic_write_text
from ralph.process import ProcessResult
from ralph.records import Diagnostic, Metrics

MYPY = tool_pattern("mypy")
JSON_SINCE = (1, 11)
JSON_FLAGS = "-O json"
TEXT_FLAGS = "--show-column-numbers --no-error-summary --no-color-output"
TEXT_LINE = re.compile(
    r"^(?P<file>[^:\n]+):(?P<line>\d+):(?:(?P<column>\d+):)? (?P<severity>error|warning|note): "
    r"(?P<message>.*?)(?:  \[(?P<code>[a-z0-9-]+)\])?$"
)
MAX_NOTES = 3
# `file: error: message` without a line: what mypy says when it stops before checking any code
FILE_LINE = re.compile(r"^(?P<file>[^:\n]+): (?P<severity>error|warning|note): (?P<message>.*)$")
SUMMARY_LINE = re.compile(r"^Found \d+ errors? in \d+ files? \(")
# the fix, on the same line: the loop's warning quotes a check's first 200 characters
FATAL_FIX = "point it at the code: `mypy src`, `mypy PKG`; `ralph init --force` finds one"
CRASH_FIX = "a bug of mypy, not of the code: another mypy version may not crash"
CACHE_FILE = "mypy-versions.json"
CACHE_ENTRIES = 32

# (prefix, cwd) -> (version, whether it was read from the cache file rather than asked)
_versions: dict[tuple[str, str], tuple[tuple[int, ...] | None, bool]] = {}
_versions_lock = threading.Lock()


class MypyCheck(DiagnosticsCheck):
    """Score: 1 when clean, else relative to the baseline's error count (0 without one)."""

    label = "mypy"

    def attempt(self, cwd: Path, on_output: OutputCallback | None) -> ProcessResult:
        res = self.execute(self.command_for(cwd), cwd, on_output=on_output)
        if res.exit_code == 2 and not self.findings(res, cwd) and self._forget_remembered(cwd):
            # mypy refused the flags of a remembered version it does not have: ask, run again
            res = self.execute(self.command_for(cwd), cwd, on_output=on_output)
        return res

    def findings(self, res: ProcessResult, cwd: Path) -> list[Diagnostic]:
        return parse_output(res.stdout, cwd)

    def judge(self, res: ProcessResult, cwd: Path, baseline_errors: int | None) -> CheckOutcome:
        """A run that stopped before checking any code is an error (could not run), never a
        failure with one finding: such a guard could never get worse, so it guards nothing."""
        crash = internal_error(res)
        if crash is not None:  # the errors it printed before crashing are not a whole count
            return self._cannot_run(res, f"mypy crashed: {crash[:160]}; {CRASH_FIX}")
        said = fatal_line(res, cwd)
        if said is None:
            return super().judge(res, cwd, baseline_errors)
        return self._cannot_run(res, f"mypy cannot run: {said[:100]}; {FATAL_FIX}")

    def _cannot_run(self, res: ProcessResult, message: str) -> CheckOutcome:
        diagnostic = Diagnostic(
            type="runtime_error",
            message=message,
            stack_trace=output_tail(res) or None,
            severity="error",
        )
        return CheckOutcome(self.spec, make_result(self.spec, "error", res), [diagnostic])

    def usable(self, code: int | None, errors: list[Diagnostic]) -> bool:
        # Exit 2 is mypy's "blocking error": a syntax error it reports, or a crash/bad usage.
        return code in (0, 1) or (code == 2 and bool(errors))

    def unread(self, res: ProcessResult) -> Diagnostic:
        return Diagnostic(
            type="other",
            message="mypy exited with code 1 but reported no error ralph could read",
            stack_trace=output_tail(res) or None,
            severity="error",
        )

    def metrics(self, errors: list[Diagnostic]) -> Metrics:
        """No count of type errors past a syntax error: mypy stops at it, checking nothing."""
        if any(e.type == "syntax_error" for e in errors):
            return Metrics()
        return Metrics(type_errors=len(errors))

    def command_for(self, cwd: Path) -> str:
        """The configured command with the output flags this mypy understands."""
        command = self.spec.command
        match = MYPY.search(command)
        if match is None:
            return command
        version = mypy_version(command[: match.end()], cwd)
        flags = JSON_FLAGS if version is not None and version >= JSON_SINCE else TEXT_FLAGS
        return insert_after(command, MYPY, flags) or command

    def tool_env(self, cwd: Path) -> dict[str, str]:
        """mypy's cache in ralph's scratch folder, unless the user names one (`MYPY_CACHE_DIR`;
        a `--cache-dir` on the command line wins over both)."""
        if user_sets("MYPY_CACHE_DIR", self):
            return {}
        return {"MYPY_CACHE_DIR": str(scratch(cwd, "mypy-cache"))}

    def _forget_remembered(self, cwd: Path) -> bool:
        """Forget a version read from the cache file; True when there was one to forget."""
        match = MYPY.search(self.spec.command)
        if match is None:
            return False
        prefix = self.spec.command[: match.end()]
        with _versions_lock:
            _, from_file = _versions.get((prefix, str(cwd)), (None, False))
            if not from_file:
                return False
            del _versions[(prefix, str(cwd))]
        identity = installed_identity(prefix, cwd)
        entries = _read_cache()
        if identity is not None and entries.pop(identity, None) is not None:
            _write_cache(entries)
        return True


def mypy_version(prefix: str, cwd: Path) -> tuple[int, ...] | None:
    """`<prefix> --version`, asked once per installed mypy and remembered (module docstring)."""
    key = (prefix, str(cwd))
    with _versions_lock:
        if key in _versions:
            return _versions[key][0]
    identity = installed_identity(prefix, cwd)
    version = _cached_version(identity) if identity is not None else None
    from_file = version is not None
    if version is None:
        res = process.run(f"{prefix} --version", cwd=cwd, wall_timeout=60, cap=10_000)
        found = re.search(r"mypy (\d+)\.(\d+)", res.stdout)
        version = (int(found[1]), int(found[2])) if found and res.exit_code == 0 else None
        if version is not None and identity is not None:
            _remember_version(identity, version)
    with _versions_lock:
        _versions[key] = (version, from_file)
    return version


def cache_path() -> Path:
    """`$XDG_CACHE_HOME/ralph/` (default `~/.cache/ralph/`): per user, not per project."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ralph" / CACHE_FILE


def installed_identity(prefix: str, cwd: Path) -> str | None:
    """What changes when the mypy that `prefix` runs is reinstalled, without running it.

    The program's absolute path, size and mtime (pip rewrites a console script on every
    install), and those of `mypy/version.py` in the site-packages beside its bin/ when there is
    one (an upgrade under an unchanged `python -m mypy`). None when the program is not found.
    """
    try:
        words = shlex.split(prefix)
    except ValueError:
        return None
    if not words:
        return None
    program = words[0] if "/" not in words[0] else os.path.join(cwd, words[0])
    found = process.which(program) if "/" not in program else program
    if found is None:
        return None
    path = os.path.abspath(found)
    parts: list[object] = [prefix, path]
    bin_dir = Path(path).parent
    candidates = sorted(bin_dir.parent.glob("lib/python3*/site-packages/mypy/version.py"))
    for file in [Path(path), *candidates[:1]]:
        try:
            info = file.stat()
        except OSError:
            return None
        parts += [str(file), info.st_size, info.st_mtime_ns]
    return json.dumps(parts)


def _read_cache() -> dict[str, list[int]]:
    try:
        data = json.loads(cache_path().read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {
        k: v
        for k, v in data.items()
        if isinstance(v, list) and v and all(isinstance(n, int) for n in v)
    }


def _cached_version(identity: str) -> tuple[int, ...] | None:
    found = _read_cache().get(identity)
    return tuple(found) if found else None


def _remember_version(identity: str, version: tuple[int, ...]) -> None:
    entries = _read_cache()
    entries.pop(identity, None)
    entries[identity] = list(version)
    _write_cache(dict(list(entries.items())[-CACHE_ENTRIES:]))


def _write_cache(entries: dict[str, list[int]]) -> None:
    """Best effort: a cache that cannot be written only means asking mypy next time."""
    with contextlib.suppress(StoreError):
        atomic_write_text(cache_path(), json.dumps(entries, indent=1) + "\n", durable=False)


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


def fatal_line(res: ProcessResult, cwd: Path) -> str | None:
    """mypy's own line when it stopped before checking (exit 2 without one located finding:
    `Duplicate module named`, `is not a valid Python package name`, `Cannot read file`, `Can't
    find package`, a plugin or configuration error); None for a run that checked code (a syntax
    error is located: it is a finding) or that said nothing ralph can quote."""
    if res.exit_code != 2 or any(e.line is not None for e in parse_output(res.stdout, cwd)):
        return None
    lines = [line for line in (res.stdout + "\n" + res.stderr).splitlines() if line.strip()]
    for at, line in enumerate(lines):
        item = _json_line(line) if line.startswith("{") else None
        match = FILE_LINE.match(line) if item is None else None
        found = item if item is not None else match.groupdict() if match else None
        if found is None or found.get("severity") == "note":
            continue
        file = relative_path(str(found.get("file") or ""), cwd)
        said = [str(found.get("message") or "").strip()]
        for more in lines[at + 1 :] if item is None else []:
            if FILE_LINE.match(more) or SUMMARY_LINE.match(more) or more.startswith(("\t", " ")):
                break
            said.append(more.strip())  # a message wrapped by `pretty = true`
        text = " ".join(said)
        return f"{file}: {text}" if file and file != "mypy" else text
    plain = [line.strip() for line in lines if not SUMMARY_LINE.match(line)]
    return plain[0] if plain else None


def internal_error(res: ProcessResult) -> str | None:
    """mypy's own `FILE:LINE: error: INTERNAL ERROR` line (on stderr, exit 2) and its version
    when it crashed; None otherwise. What it printed before the crash is only what it had found
    so far: no count of findings."""
    if res.exit_code != 2:
        return None
    lines = (res.stderr + "\n" + res.stdout).splitlines()
    crash = next((line for line in lines if "error: INTERNAL ERROR" in line), None)
    if crash is None:
        return None
    version = next((line for line in lines if line.startswith("version: ")), None)
    said = crash.partition(" --")[0].strip()
    return f"{said} ({version})" if version else said


def _json_line(line: str) -> dict[str, Any] | None:
    try:
        item = json.loads(line)
    except ValueError:
        return None
    return item if isinstance(item, dict) and "message" in item else None
