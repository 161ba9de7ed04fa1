"""A shell check: any command; exit 0 passes. A failing command whose output is pytest's, mypy's
or ruff's (`make test`, `tox`, `sh -c "python -m pytest …"`, `uv run`, a script) is read by that
tool's parser: the output decides, not the command. Anything else fails with the output's tail.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from ralph.evaluators import mypy, pytest, ruff
from ralph.evaluators.base import CheckOutcome
from ralph.evaluators.command import CommandCheck, count_score, make_result
from ralph.process import ProcessResult
from ralph.records import Diagnostic, Metrics

# what each tool's own output looks like, whatever started it
PYTEST_OUTPUT = re.compile(
    r"^=+ (test session starts|short test summary info|FAILURES|ERRORS) =+$", re.MULTILINE
)
# pytest's last line, with or without its `=` rule (`-q`): `1 failed, 2 passed in 0.12s`
PYTEST_SUMMARY = re.compile(r"^=*\s*(\d+ (?:passed|failed|errors?)\b.*) in [\d.]+s\b", re.M)
MYPY_OUTPUT = re.compile(r"^Found \d+ errors? in \d+ files? \(checked \d+ source files?\)", re.M)
RUFF_OUTPUT = re.compile(r"^Found \d+ errors?\.$", re.MULTILINE)


class ShellCheck(CommandCheck):
    """`CommandCheck`'s judgement, unless the output is a known tool's (`read_as_tool`)."""

    def judge(self, res: ProcessResult, cwd: Path, baseline_errors: int | None) -> CheckOutcome:
        code = res.exit_code
        if code is not None and code > 0 and code not in (126, 127):
            read = read_as_tool(res, cwd)
            if read is not None:
                errors, metrics, score = read
                result = make_result(self.spec, "fail", res)
                if score is None:
                    score = count_score(len(errors), baseline_errors)
                return CheckOutcome(self.spec, result, errors, metrics, score)
        return super().judge(res, cwd, baseline_errors)


def read_as_tool(
    res: ProcessResult, cwd: Path
) -> tuple[list[Diagnostic], Metrics, float | None] | None:
    """The failures of a wrapped pytest, mypy or ruff, read from its output; None when the
    output is none of theirs or names no failure (then the tail says what happened)."""
    out = res.stdout + "\n" + res.stderr
    if PYTEST_OUTPUT.search(out) or PYTEST_SUMMARY.search(out):
        report = pytest.parse_text(both_streams(res, out), cwd)
        errors = report.collection + report.failures
        if errors:
            if not report.passed:  # `-q` prints its counts without the `=` rule
                for last in PYTEST_SUMMARY.findall(out)[-1:]:
                    counts = dict((w, int(n)) for n, w in pytest.SUMMARY_COUNT.findall(last))
                    report.passed = counts.get("passed", 0)
            units = report.passed + report.failed + len(report.collection)
            metrics = Metrics(
                tests_passed=report.passed,
                tests_failed=report.failed,
                tests_total=report.passed + report.failed,
            )
            return errors, metrics, report.passed / units if units else 0.0
    if MYPY_OUTPUT.search(out):
        errors = mypy.parse_output(out, cwd)
        if errors:
            return errors, Metrics(type_errors=len(errors)), None
    if RUFF_OUTPUT.search(out):
        errors = ruff.parse_output(out, cwd)
        if errors:
            return errors, Metrics(lint_errors=len(errors)), None
    return None


def both_streams(res: ProcessResult, out: str) -> ProcessResult:
    """`res` with both streams as its stdout: a wrapper may send pytest's output to either."""
    return replace(res, stdout=out, stderr="")
