"""The pytest check: runs the tests with a JUnit XML report and reads failures from it.

JUnit XML is pytest's stable machine-readable output, written where ralph asked (its scratch
folder, not the tree). Only what the report shows counts: a test passed when the report names it
passing. Without a report (a run cut short by `os._exit`, the junitxml plugin turned off) no test
passed and the run is called what it is, "the test run ended before reporting"; the text output
is then read only for the errors it names (a conftest that could not be imported). Every run
carries ralph's canaries (canary.py): a report in which they are wrong was tampered with.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ralph.escapes import strip_escapes
from ralph.evaluators.base import CheckOutcome, OutputCallback
from ralph.evaluators.canary import Canaries
from ralph.evaluators.command import (
    CommandCheck,
    crashed,
    first_lines,
    insert_after,
    make_result,
    output_tail,
    project_file,
    relative_path,
    timed_out,
    tool_pattern,
)
from ralph.files import private_tmp, scratch_prefix
from ralph.process import ProcessResult
from ralph.records import CheckStatus, Diagnostic, Metrics
from ralph.redact import redact
from ralph.workspace.locate import memory_root

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET

PYTEST = tool_pattern(r"py\.test|pytest")
TRACE_LINES = 15
# `path:LINE: ` ends each entry of pytest's long traceback; `path:LINE: in func` the short one.
FRAME = re.compile(r"^(?P<path>[^\s:<>\[][^:\n]*?):(?P<line>\d+):(?: |$)", re.MULTILINE)
FILE_LINE = re.compile(r'File "(?P<path>[^"]+)", line (?P<line>\d+)')
QUOTED_MODULE = re.compile(r"(?:importing test module|loading conftest) '(?P<path>[^']+)'")
SECTION = re.compile(r"^_{3,} ERROR collecting (?P<path>\S+) _{3,}$", re.MULTILINE)
FAILED_LINE = re.compile(r"^(?:FAILED|ERROR) (?P<id>\S+)(?: - (?P<msg>.*))?$", re.MULTILINE)
SUMMARY_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped)")
SYNTAX_ERRORS = ("SyntaxError", "IndentationError", "TabError")
UNKNOWN_CACHE_DIR = "Unknown config option: cache_dir"
ENDED_EARLY = "the test run ended before reporting"


@dataclass
class PytestReport:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    failures: list[Diagnostic] = field(default_factory=list)
    collection: list[Diagnostic] = field(default_factory=list)
    passed_ids: set[str] | None = None  # None: the text fallback cannot name passing tests
    canaries: dict[str, str] = field(default_factory=dict)  # name -> passed, failed, skipped


class PytestCheck(CommandCheck):
    """Score: passed / total; collection errors count as failures and are reported first."""

    def run_once(
        self,
        cwd: Path,
        *,
        baseline_errors: int | None = None,
        on_output: OutputCallback | None = None,
    ) -> CheckOutcome:
        # in the memory's private folder, not /tmp: the report holds assertion text (secrets,
        # maybe), and what a kill -9 of ralph leaves behind is cleared later (store.private_tmp)
        folder = private_tmp(memory_root(cwd))
        fd, name = tempfile.mkstemp(prefix=f"{scratch_prefix()}junit-", suffix=".xml", dir=folder)
        os.close(fd)
        junit = Path(name)
        canaries = Canaries.write(folder)
        try:
            said_off = (
                "no:cacheprovider" in f"{self.spec.command} {os.environ.get('PYTEST_ADDOPTS')}"
            )
            cache = None if said_off else folder / "pytest-cache"
            res, env = self._attempt(cwd, junit, cache, canaries, on_output)
            if res.exit_code not in (0, None) and UNKNOWN_CACHE_DIR in res.stdout + res.stderr:
                # the cache plugin is off (`-p no:cacheprovider` in an ini) under
                # `--strict-config`, or with warnings as errors (`-W error`, filterwarnings)
                res, env = self._attempt(cwd, junit, None, canaries, on_output)
            xml_text = junit.read_text("utf-8", errors="replace")
        finally:
            canaries.remove()
            with contextlib.suppress(OSError):
                junit.unlink()
        if res.timed_out:
            return timed_out(self.spec, res, self.timeout)
        return self.judge_report(res, xml_text, cwd, {**os.environ, **env}, canaries)

    def _attempt(
        self,
        cwd: Path,
        junit: Path,
        cache: Path | None,
        canaries: Canaries,
        on_output: OutputCallback | None,
    ) -> tuple[ProcessResult, dict[str, str]]:
        """One run with the JUnit report, `--color=no` after the ini's `addopts` and
        PYTEST_ADDOPTS (so it wins over theirs), the cache (`--lf`) in `cache`, ralph's
        scratch folder, not the user's tree, and the canaries' plugin."""
        option = f"--junitxml={shlex.quote(str(junit))} --color=no {canaries.option()}"
        if cache is not None:
            option += f" -o {shlex.quote(f'cache_dir={cache}')}"
        command = insert_after(self.spec.command, PYTEST, option)
        env = canaries.environment({**os.environ, **self.environment})
        if command is None:  # pytest behind a wrapper: hand it the option through the env
            command = self.spec.command
            env["PYTEST_ADDOPTS"] = f"{os.environ.get('PYTEST_ADDOPTS', '')} {option}".strip()
        return self.execute(command, cwd, env=env, on_output=on_output), env

    def judge_report(
        self,
        res: ProcessResult,
        xml_text: str,
        cwd: Path,
        environ: dict[str, str],
        canaries: Canaries | None = None,
    ) -> CheckOutcome:
        """Exit codes: 0 ok, 1 failures, 2 interrupted, 3 internal error, 4 usage, 5 no tests."""
        code = res.exit_code
        if code not in (0, 1, 2, 4, 5):
            return crashed(self.spec, res, "pytest crashed")
        report = parse_junit(xml_text, cwd, environ, canaries.owns if canaries else None)
        if report is None:
            return self._unreported(res, cwd)
        errors = report.collection + report.failures
        finding = canaries.finding(report.canaries) if canaries is not None else None
        if finding is not None and not report.collection and code in (0, 1, 5):
            # nothing the report says can be believed: no test counts as passed
            errors.insert(0, Diagnostic(type="other", message=finding, severity="error"))
            report.passed_ids, report.passed = set(), 0
        if not errors and code == 5:
            errors = [
                Diagnostic(
                    type="other",
                    message="no tests ran: pytest collected no tests (exit code 5); "
                    f"check the paths and -k/-m filters in `{self.spec.command}`",
                    severity="error",
                )
            ]
        elif not errors and code in (2, 4):
            reason = _error_line(res) or "pytest could not start the test session"
            return crashed(self.spec, res, reason)
        elif not errors and code == 1:
            errors = [
                Diagnostic(
                    type="other",
                    message="pytest exited with code 1 but reported no failing test",
                    stack_trace=output_tail(res) or None,
                    severity="error",
                )
            ]
        passed = code == 0 and not errors
        ran = report.passed + report.failed
        units = ran + len(report.collection)
        score = 1.0 if passed else (report.passed / units if units else 0.0)
        metrics = Metrics(tests_passed=report.passed, tests_failed=report.failed, tests_total=ran)
        status: CheckStatus = "pass" if passed else "fail"
        result = make_result(self.spec, status, res)
        return CheckOutcome(self.spec, result, errors, metrics, score, report.passed_ids)

    def _unreported(self, res: ProcessResult, cwd: Path) -> CheckOutcome:
        """No report: no test passed. A run that says it ran (exit 0, 1 or 5) ended before
        reporting; one that could not start (2, 4) fails with the errors its text names."""
        report = parse_text(res, cwd)
        errors = report.collection + report.failures
        if res.exit_code in (0, 1, 5):
            errors.append(
                Diagnostic(
                    type="other",
                    message=f"{ENDED_EARLY}: pytest exited with code {res.exit_code} and wrote "
                    "no report (the process was ended early, as by an os._exit in the code or a "
                    "conftest, or the junitxml plugin was turned off); no test counts as passed",
                    stack_trace=output_tail(res) or None,
                    severity="error",
                )
            )
        elif not errors:
            reason = _error_line(res) or "pytest could not start the test session"
            return crashed(self.spec, res, reason)
        metrics = Metrics(tests_passed=0, tests_failed=report.failed, tests_total=report.failed)
        result = make_result(self.spec, "fail", res)
        return CheckOutcome(self.spec, result, errors, metrics, 0.0, set())


def parse_junit(
    xml_text: str,
    cwd: Path,
    environ: dict[str, str],
    hidden: Callable[[str], bool] | None = None,
) -> PytestReport | None:
    """Counts and diagnostics from a JUnit XML report; None when there is no usable report.
    Test cases whose name is `hidden` (ralph's canaries) are not the project's: their outcomes
    go to `canaries` only."""
    if not xml_text.strip():
        return None
    import xml.etree.ElementTree as ET  # here: not on `ralph check`'s path to its first check

    try:
        root = ET.fromstring(xml_text)
    except ET.ParseError:
        return None
    passed_ids: set[str] = set()
    report = PytestReport(passed_ids=passed_ids)
    ids: dict[str, tuple[str | None, str]] = {}  # classname -> (file, id prefix), stat once
    for case in root.iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        failure, error = case.find("failure"), case.find("error")
        if hidden is not None and hidden(name):
            failed = failure is not None or error is not None
            skipped = case.find("skipped") is not None
            report.canaries[name] = "failed" if failed else "skipped" if skipped else "passed"
            continue
        if not classname and error is not None:  # a module that could not be collected
            text = _junit_text(error.text, environ)
            report.collection.append(error_block(text, cwd, _module_path(name, cwd)))
            continue
        node = failure if failure is not None else error
        if node is not None:
            report.failed += 1
            report.failures.append(_failure(classname, name, node, cwd, environ))
        elif case.find("skipped") is not None:
            report.skipped += 1
        else:
            report.passed += 1
            if classname not in ids:
                file, prefix = junit_test_id(classname, "", cwd)
                ids[classname] = (file, prefix.removesuffix("::"))
            prefix = ids[classname][1]
            passed_ids.add(f"{prefix}::{name}" if prefix else name)
    return report


def _failure(
    classname: str, name: str, node: ET.Element, cwd: Path, environ: dict[str, str]
) -> Diagnostic:
    text = _junit_text(node.text, environ)
    test_file, test_id = junit_test_id(classname, name, cwd)
    message = _junit_text(node.get("message"), environ) or _exception_line(text) or "failed"
    message = doctest_message(message) or message
    if node.tag == "error":
        message = f"error outside the test body: {message}"
    frame = deepest_frame(text, cwd)
    file, line = frame if frame else (test_file, None)
    return Diagnostic(
        type="test_failure",
        message=first_lines(message),
        file=file,
        line=line,
        rule=test_id,
        stack_trace="\n".join(text.rstrip().splitlines()[-TRACE_LINES:]) or None,
        severity="error",
    )


def _junit_text(value: str | None, environ: dict[str, str]) -> str:
    """A report's text as ralph keeps it: redacted, and without the colour codes a test's own
    output carried (pytest writes an ESC as the text `#x1B` in XML, which cannot hold one)."""
    text = (value or "").replace("#x1B", "\x1b")
    return redact(strip_escapes(text), environ)


def junit_test_id(classname: str, name: str, cwd: Path) -> tuple[str | None, str]:
    """`tests.test_x.TestC` + `test_m[1]` -> (`tests/test_x.py`, `tests/test_x.py::TestC::...`)."""
    parts = classname.split(".") if classname else []
    for i in range(len(parts), 0, -1):
        candidate = "/".join(parts[:i]) + ".py"
        if (cwd / candidate).is_file():
            return candidate, "::".join([candidate, *parts[i:], name])
    return None, "::".join([*([classname] if classname else []), name])


def _module_path(dotted: str, cwd: Path) -> str | None:
    candidate = dotted.replace(".", "/") + ".py"
    return candidate if (cwd / candidate).is_file() else None


def deepest_frame(text: str, cwd: Path) -> tuple[str, int] | None:
    """The innermost traceback entry that is a file of the project (not the stdlib or a venv)."""
    found = None
    for match in FRAME.finditer(text):
        path = project_file(match["path"], cwd)
        if path is not None:
            found = (path, int(match["line"]))
    return found


def error_block(text: str, cwd: Path, default_file: str | None = None) -> Diagnostic:
    """One collection or conftest error: a SyntaxError points at its line, others at a frame."""
    exception = _exception_line(text) or first_lines(text, 1) or "collection failed"
    trace = "\n".join(text.rstrip().splitlines()[-TRACE_LINES:]) or None
    if exception.startswith(SYNTAX_ERRORS):
        located = list(FILE_LINE.finditer(text))
        if located:
            where = located[-1]
            return Diagnostic(
                type="syntax_error",
                message=exception,
                file=relative_path(where["path"], cwd),
                line=int(where["line"]),
                stack_trace=trace,
                severity="error",
            )
    frame = deepest_frame(text, cwd)
    file: str | None = frame[0] if frame else default_file
    if file is None and (quoted := QUOTED_MODULE.search(text)):
        file = relative_path(quoted["path"], cwd)
    return Diagnostic(
        type="syntax_error" if exception.startswith(SYNTAX_ERRORS) else "runtime_error",
        message=exception,
        file=file,
        line=frame[1] if frame else None,
        stack_trace=trace,
        severity="error",
    )


DOCTEST = re.compile(
    r"^\d+\s+>>> (?P<example>.*)\n(?:Expected:\n(?P<expected>(?: {4}.*\n?)+)Got:\n"
    r"(?P<got>(?: {4}.*\n?)+)|(?P<raised>UNEXPECTED EXCEPTION: .*))",
    re.MULTILINE,
)


def doctest_message(report: str) -> str | None:
    """A failed doctest in one line: the example, what it should print and what it printed.

    pytest's own message lists the docstring up to the example (`145 Converts an integer...`),
    whose first line says nothing about the failure."""
    match = DOCTEST.search(report)
    if match is None:
        return None
    example = match["example"].strip()
    if match["raised"]:
        return f"doctest `>>> {example}` raised {match['raised'].split(': ', 1)[1].strip()}"
    expected = " ".join(match["expected"].split())
    got = " ".join(match["got"].split())
    return f"doctest `>>> {example}` expected {expected}, got {got}"


def _exception_line(text: str) -> str | None:
    """The exception pytest shows last in its `E   ` lines, e.g. `ModuleNotFoundError: ...`."""
    lines = [line[1:].strip() for line in text.splitlines() if line.startswith("E ")]
    for line in reversed(lines):
        if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Warning|Exit|Interrupt)\b", line):
            return line
    return lines[-1] if lines else None


def _error_line(res: ProcessResult) -> str | None:
    for line in (res.stderr + "\n" + res.stdout).splitlines():
        if line.startswith(("ERROR:", "error:")):
            return line.strip()
    return None


def parse_text(res: ProcessResult, cwd: Path) -> PytestReport:
    """Fallback without a JUnit report: collection sections, FAILED lines, the summary counts."""
    report = PytestReport()
    out = res.stdout
    headers = list(SECTION.finditer(out))
    for i, header in enumerate(headers):
        end = headers[i + 1].start() if i + 1 < len(headers) else len(out)
        body = out[header.end() : end].split("\n=====")[0]
        report.collection.append(error_block(body, cwd, project_file(header["path"], cwd)))
    if not headers and re.search(r"^E ", res.stderr, re.MULTILINE):  # a broken conftest.py
        report.collection.append(error_block(res.stderr, cwd))
    for match in FAILED_LINE.finditer(out):
        test_id = match["id"]
        if "::" not in test_id:
            continue  # `ERROR path` repeats a collection error already reported
        file = project_file(test_id.split("::")[0], cwd)
        report.failures.append(
            Diagnostic(
                type="test_failure",
                message=match["msg"] or "failed",
                file=file,
                rule=test_id,
                severity="error",
            )
        )
    counts = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
    summary = [line for line in out.splitlines() if line.startswith("=") and " in " in line]
    for number, word in SUMMARY_COUNT.findall(summary[-1] if summary else ""):
        counts[word.rstrip("s") if word.startswith("error") else word] += int(number)
    report.passed = counts["passed"]
    test_errors = max(0, counts["error"] - len(report.collection))
    report.failed = max(counts["failed"] + test_errors, len(report.failures))
    report.skipped = counts["skipped"]
    return report
