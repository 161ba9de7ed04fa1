"""`ralph check`'s summary on a terminal: one table row per check, then the first diagnostics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ralph.evaluators.base import CheckOutcome, Evaluation
from ralph.evaluators.describe import findings_text
from ralph.glyphs import first_line
from ralph.rendering import Rows, Wrapped

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult

SHOWN_DIAGNOSTICS = 10  # diagnostics listed under the table


@dataclass
class CheckReport:
    """`ralph check`'s summary: one table row per check, then the first diagnostics and the
    verdict (its JSON form is the record's `evaluator_output`, printed by the command)."""

    evaluation: Evaluation

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if not console.is_terminal:  # a pipe: tab-separated lines, as every listing
            yield Rows("checks", ["check", "status", "result", "time"], self._cells())
        else:
            yield self._table()
        yield from self._details()

    def _cells(self) -> list[list[str]]:
        return [
            [
                o.spec.name,
                o.result.status,
                _counts(o),
                f"{(o.result.duration_ms or 0) / 1000:.1f} s",
            ]
            for o in self.evaluation.outcomes
        ]

    def _table(self) -> Any:
        """The table on a terminal, each status in its colour."""
        from rich.markup import escape
        from rich.table import Table

        styles = {"pass": "green", "fail": "red", "error": "yellow", "skip": "dim"}
        table = Table(show_edge=False, header_style="bold")
        for column in ("check", "status", "result", "time"):
            table.add_column(column, justify="right" if column == "time" else "left")
        for name, status, result, seconds in self._cells():
            table.add_row(
                escape(name),
                f"[{styles.get(status, 'default')}]{status}[/]",
                escape(result),
                seconds,
            )
        return table

    def _details(self) -> RenderResult:
        """The first diagnostics, a check that wrote to the tree, and the verdict."""
        from rich.markup import escape
        from rich.text import Text

        evaluation = self.evaluation
        errors = evaluation.output.errors or []
        for e in errors[:SHOWN_DIAGNOSTICS]:
            where = e.location() or e.rule or e.type
            rule = f"  [dim]\\[{escape(e.rule)}][/]" if e.rule and e.type != "test_failure" else ""
            line = f"  [bold]{escape(where)}[/]  {escape(first_line(e.message))}{rule}"
            yield Wrapped(Text.from_markup(line), hang=4)  # under its indent, on a terminal
        if len(errors) > SHOWN_DIAGNOSTICS:
            yield Text.from_markup(f"  [dim]... and {len(errors) - SHOWN_DIAGNOSTICS} more[/]")
        wrote = next((o for o in evaluation.outcomes if o.changed_files), None)
        if wrote is not None:  # the diagnostic says which check and which files
            yield Text.from_markup(f"[yellow]{escape(first_line(wrote.errors[0].message))}[/]")
        verdict = "[green]all checks pass[/]" if evaluation.passed else "[red]checks failing[/]"
        yield Text.from_markup(f"reward {evaluation.reward:.2f}  {verdict}")


def _counts(outcome: CheckOutcome) -> str:
    """A check's result in its own terms: tests passed/failed, errors, or an exit code."""
    m, parser = outcome.metrics, outcome.spec.parser
    if any(e.type == "timeout" for e in outcome.errors):
        return "timed out"
    if outcome.result.status == "error":
        return "could not run" if not outcome.errors else first_line(outcome.errors[0].message)
    if parser == "pytest" and m.tests_total is not None:
        text = f"{m.tests_passed} passed, {m.tests_failed} failed"
        collection = sum(1 for e in outcome.errors if e.type != "test_failure")
        return text + (f", {collection} collection errors" if collection else "")
    if parser in ("mypy", "ruff"):
        return findings_text(outcome) if outcome.error_count else "clean"
    return f"exit code {outcome.result.exit_code}"
