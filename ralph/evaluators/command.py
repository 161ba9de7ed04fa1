"""What every check shares: run the command once, judge its result, keep the record small.

`CommandCheck.run` is the one run template: the command line (`command_for`), one execution
(`attempt`), a timeout verdict, then `judge`. A shell check (shell.py) passes on exit 0; mypy and
ruff are `DiagnosticsCheck`s that only say how their tool is invoked and how its findings read;
pytest (pytest.py) adds its JUnit report.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from ralph import process
from ralph.config import CheckSpec
from ralph.evaluators.base import CheckOutcome, OutputCallback
from ralph.files import bytecode_env, private_tmp
from ralph.glyphs import plural
from ralph.process import DEFAULT_CAP, Child, ProcessResult, executable_of
from ralph.records import CheckResult, CheckStatus, Diagnostic, Metrics
from ralph.workspace.locate import memory_root

if TYPE_CHECKING:
    from ralph.sandbox import Sandbox

# Tools write colour codes when asked to (FORCE_COLOR, a `--color=yes` in a config); these ask
# them not to. Whatever still comes through is stripped where output enters (process.py).
NO_COLOUR = {"NO_COLOR": "1", "PY_COLORS": "0", "CLICOLOR": "0"}
FORCED_COLOUR = ("FORCE_COLOR", "CLICOLOR_FORCE", "MYPY_FORCE_COLOR", "PY_COLORS_FORCE")
STORED_CHARS = 4000  # stdout/stderr kept in the record; the full log goes to the loop's files
TAIL_LINES = 20

_LIVE: set[Child] = set()
_LIVE_LOCK = threading.Lock()


class CommandCheck:
    """Runs `spec.command` through `ralph.process`; subclasses read the tool's output."""

    def __init__(
        self, spec: CheckSpec, *, timeout: float | None = None, cap: int = DEFAULT_CAP
    ) -> None:
        self.spec = spec
        # a check's own `timeout: 0` means no limit (config.parse_duration); None: the default
        self.timeout = timeout if spec.timeout is None else (spec.timeout or None)
        self.cap = cap
        self.last_log = ""
        self.environment: dict[str, str] = {}  # over ralph's own: `CheckSuite.use_environment`
        self.sandbox: Sandbox | None = None  # `CheckSuite.use_sandbox` (a loop's checks)

    def tool(self) -> str:
        return executable_of(self.spec.command) or "sh"

    def preflight(self) -> None:
        """Nothing beyond its tool, which the suite finds on PATH (`tools.missing_tool`)."""
        return None

    def run(
        self,
        cwd: Path,
        *,
        baseline_errors: int | None = None,
        on_output: OutputCallback | None = None,
    ) -> CheckOutcome:
        """`run_once`, its outcome carrying the log of the command it ran last."""
        self.last_log = ""
        outcome = self.run_once(cwd, baseline_errors=baseline_errors, on_output=on_output)
        outcome.log = self.last_log
        return outcome

    def run_once(
        self,
        cwd: Path,
        *,
        baseline_errors: int | None = None,
        on_output: OutputCallback | None = None,
    ) -> CheckOutcome:
        """Run once on `cwd` and judge it; a timeout is judged here, the same for every check."""
        res = self.attempt(cwd, on_output)
        if res.timed_out:
            return timed_out(self.spec, res, self.timeout)
        return self.judge(res, cwd, baseline_errors)

    def command_for(self, cwd: Path) -> str:
        """The command line to run: the configured one, with the tool's output flags added."""
        return self.spec.command

    def attempt(self, cwd: Path, on_output: OutputCallback | None) -> ProcessResult:
        return self.execute(self.command_for(cwd), cwd, on_output=on_output)

    def tool_env(self, cwd: Path) -> dict[str, str]:
        """Variables that keep the tool from writing where it should not (its cache: ruff,
        mypy), under the check's own `environment` and the caller's."""
        return {}

    def judge(self, res: ProcessResult, cwd: Path, baseline_errors: int | None) -> CheckOutcome:
        """Shell semantics: exit 0 passes; otherwise the output's tail is the one diagnostic."""
        if res.exit_code == 0:
            return CheckOutcome(self.spec, make_result(self.spec, "pass", res), score=1.0)
        if res.exit_code is None or res.exit_code < 0 or res.exit_code in (126, 127):
            return crashed(self.spec, res, f"`{self.spec.command}` could not run")
        diagnostic = Diagnostic(
            type="other",
            message=output_tail(res) or f"`{self.spec.command}` exited with code {res.exit_code}",
            severity="error",
        )
        return CheckOutcome(self.spec, make_result(self.spec, "fail", res), [diagnostic])

    def execute(
        self,
        command: str,
        cwd: Path,
        *,
        env: dict[str, str] | None = None,
        on_output: OutputCallback | None = None,
    ) -> ProcessResult:
        """Run once, registered so `kill_running_checks` can stop it; keeps the full log.
        Python's bytecode goes to ralph's scratch folder, never beside the user's code
        (`files.bytecode_env`)."""
        name = self.spec.name
        started: list[Child] = []

        def register(proc: Child) -> None:
            with _LIVE_LOCK:
                _LIVE.add(proc)
            started.append(proc)

        def forward(_stream: str, chunk: str) -> None:
            if on_output is not None:
                on_output(name, chunk)

        own = {
            **NO_COLOUR,
            **bytecode_env(memory_of(cwd), {**os.environ, **self.environment}),
            **self.tool_env(cwd),
            **self.environment,
            **(env or {}),
        }
        # a sandboxed check still gets the variables ralph sets for it (its caches, imports)
        sandbox = self.sandbox.keeping(own) if self.sandbox is not None else None
        try:
            res = process.run(
                command,
                cwd=cwd,
                env=own,
                sandbox=sandbox,
                unset=FORCED_COLOUR,
                wall_timeout=self.timeout,
                cap=self.cap,
                on_output=forward if on_output is not None else None,
                on_start=register,
            )
        finally:
            with _LIVE_LOCK:
                _LIVE.difference_update(started)
        self.last_log = format_log(command, res)
        return res


class DiagnosticsCheck(CommandCheck):
    """A tool that lists located findings (mypy, ruff): exit 0 is clean, 1 has findings; any
    other exit, or an exit the subclass does not accept, is the tool failing (`crashed`)."""

    label = "the tool"  # named in "… could not check the project"

    def findings(self, res: ProcessResult, cwd: Path) -> list[Diagnostic]:
        raise NotImplementedError

    def usable(self, code: int | None, errors: list[Diagnostic]) -> bool:
        return code in (0, 1)

    def unread(self, res: ProcessResult) -> Diagnostic:
        """The one diagnostic of an exit 1 with no finding ralph could read."""
        raise NotImplementedError

    def metrics(self, errors: list[Diagnostic]) -> Metrics:
        raise NotImplementedError

    def judge(self, res: ProcessResult, cwd: Path, baseline_errors: int | None) -> CheckOutcome:
        code = res.exit_code
        errors = self.findings(res, cwd)
        if not self.usable(code, errors):
            return crashed(self.spec, res, f"{self.label} could not check the project")
        if code == 1 and not errors:
            errors = [self.unread(res)]
        status: CheckStatus = "pass" if code == 0 and not errors else "fail"
        return CheckOutcome(
            self.spec,
            make_result(self.spec, status, res),
            errors,
            self.metrics(errors),
            count_score(len(errors), baseline_errors) if status == "fail" else 1.0,
        )


_memory_roots: dict[Path, Path] = {}


def memory_of(cwd: Path) -> Path:
    """The memory's root for `cwd`, asked of git once per tree."""
    root = _memory_roots.get(cwd)
    if root is None:
        root = _memory_roots[cwd] = memory_root(cwd)
    return root


def scratch(cwd: Path, name: str) -> Path:
    """`.aiwg/ralph/tmp/NAME` of the memory of `cwd`: where a tool's cache goes instead of the
    user's tree."""
    return private_tmp(memory_of(cwd)) / name


def user_sets(variable: str, check: CommandCheck) -> bool:
    """Whether the user's environment (or the check's) names `variable` already: theirs wins."""
    return variable in os.environ or variable in check.environment


def kill_running_checks() -> None:
    """Stop every check still running (Ctrl-C reaches only the main thread, not the workers)."""
    with _LIVE_LOCK:
        procs = list(_LIVE)
    for proc in procs:  # TERM them all first, so their grace periods overlap
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in procs:
        process.kill_group(proc)


def insert_after(command: str, pattern: re.Pattern[str], flags: str) -> str | None:
    """`command` with `flags` right after the tool's name (None when the tool is not named).

    Inserting rather than appending keeps `tool args && other` and `tool args | tee` working.
    """
    match = pattern.search(command)
    if match is None:
        return None
    return f"{command[: match.end()]} {flags}{command[match.end() :]}"


def tool_pattern(names: str) -> re.Pattern[str]:
    """A tool's name as a whole word, bare, as a path's last part, or after `python -m`."""
    return re.compile(rf"(?:^|(?<=[\s/]))(?:{names})(?=\s|$)")


def make_result(spec: CheckSpec, status: CheckStatus, res: ProcessResult) -> CheckResult:
    return CheckResult(
        tool=spec.name,
        status=status,
        exit_code=res.exit_code,
        stdout=stored_text(res.stdout),
        stderr=stored_text(res.stderr),
        duration_ms=res.duration_ms,
    )


def stored_text(text: str, limit: int = STORED_CHARS) -> str | None:
    """Head and tail of `text` (the tail matters most: summaries come last); None when empty."""
    if not text:
        return None
    if len(text) <= limit:
        return text
    head, tail = limit // 4, limit - limit // 4
    elided = len(text) - head - tail
    return f"{text[:head]}\n[... {plural(elided, 'character')} elided by ralph ...]\n{text[-tail:]}"


def output_tail(res: ProcessResult, lines: int = TAIL_LINES) -> str:
    """The last non-blank lines of stdout then stderr: where tools put the reason they failed."""
    text = "\n".join(part for part in (res.stdout.rstrip(), res.stderr.rstrip()) if part)
    kept = [line for line in text.splitlines() if line.strip()]
    return "\n".join(kept[-lines:])


def format_log(command: str, res: ProcessResult) -> str:
    """The full (capped, redacted) log of one run, as the loop writes it beside the record."""
    parts = [f"$ {command}"]
    if res.stdout:
        parts += ["--- stdout ---", res.stdout.rstrip("\n")]
    if res.stderr:
        parts += ["--- stderr ---", res.stderr.rstrip("\n")]
    ending = f"timed out ({res.timed_out})" if res.timed_out else f"exit code {res.exit_code}"
    parts.append(f"--- {ending}, {res.duration_ms} ms ---")
    return "\n".join(parts) + "\n"


def timed_out(spec: CheckSpec, res: ProcessResult, timeout: float | None) -> CheckOutcome:
    limit = f"{timeout:g} s" if timeout is not None else "its time limit"
    diagnostic = Diagnostic(
        type="timeout",
        message=(
            f"check {spec.name!r} did not finish within {limit} and was killed "
            "with its child processes"
        ),
        stack_trace=output_tail(res) or None,
        severity="error",
    )
    return CheckOutcome(spec, make_result(spec, "error", res), [diagnostic])


def crashed(spec: CheckSpec, res: ProcessResult, what: str) -> CheckOutcome:
    """The tool itself failed (internal error, bad usage, killed): status error, not a verdict."""
    if res.exit_code is not None and res.exit_code < 0:
        ending = f"killed by signal {-res.exit_code}"
    else:
        ending = f"exit code {res.exit_code}"
    diagnostic = Diagnostic(
        type="runtime_error",
        message=f"{what} ({ending})",
        stack_trace=output_tail(res) or None,
        severity="error",
    )
    return CheckOutcome(spec, make_result(spec, "error", res), [diagnostic])


def relative_path(path: str, cwd: Path) -> str:
    """`path` relative to `cwd` with forward slashes when it lies inside, else as given."""
    candidate = Path(path)
    if candidate.is_absolute():
        for root in (cwd.absolute(), cwd.resolve()):
            with contextlib.suppress(ValueError):
                return Path(os.path.normpath(candidate)).relative_to(root).as_posix()
        return candidate.as_posix()
    normal = os.path.normpath(path).replace(os.sep, "/")
    return normal.removeprefix("./")


def project_file(path: str, cwd: Path) -> str | None:
    """`path` relative to `cwd` if it is a file of the project (not a venv or site-packages)."""
    rel = relative_path(path, cwd)
    parts = rel.split("/")
    if Path(rel).is_absolute() or parts[0] == "..":
        return None
    if any(p.startswith(".") or p in ("site-packages", "dist-packages") for p in parts[:-1]):
        return None
    return rel if (cwd / rel).is_file() else None


def count_score(errors: int, baseline_errors: int | None) -> float:
    """mypy and ruff: 1 when clean, else the fraction of the baseline's errors that are gone."""
    if errors == 0:
        return 1.0
    if not baseline_errors:
        return 0.0
    return max(0.0, 1.0 - errors / baseline_errors)


def first_lines(text: str, count: int = 3, limit: int = 500) -> str:
    lines = [line.rstrip() for line in text.strip().splitlines() if line.strip()]
    kept = "\n".join(lines[:count])
    return kept if len(kept) <= limit else kept[: limit - 3] + "..."
