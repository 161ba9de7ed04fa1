"""What `ralph doctor` found, as a result that draws itself: a table (failures red, findings
for information dim; tab-separated lines in pipes and CI), the hints of what is not fine, and
the verdict. Its JSON form is `{"ok": ..., "findings": [...]}`."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from ralph.rendering import Rows, Wrapped, whole

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult


@dataclass
class Row:
    """One finding. `ok`: True fine, False a loop cannot start, None worth knowing only."""

    json_fields: ClassVar[tuple[str, ...]] = ("area", "name", "status", "ok", "detail", "hint")

    area: str
    name: str
    status: str
    detail: str
    ok: bool | None = True
    hint: str | None = None


STYLES = {True: "green", False: "bold red", None: "dim"}
CHECK_STYLES = {"pass": "green", "fail": "red", "cannot run": "yellow"}  # a check's own status


def style_of(row: Row) -> str:
    """A finding's colour: a check's follows its status (`fail, target` is red, though a loop
    can start: it is what the loop fixes), every other finding's whether a loop can start."""
    if row.ok is False:
        return STYLES[False]
    return CHECK_STYLES.get(row.status.split(",")[0], STYLES[row.ok])


PADDING = 2  # a column's padding in the table, one space either side


@dataclass
class Diagnosis:
    """Every finding, and whether a loop can start (no finding says it cannot)."""

    ok: bool
    findings: list[Row]

    @classmethod
    def of(cls, rows: list[Row]) -> Diagnosis:
        return cls(all(row.ok is not False for row in rows), rows)

    def _detail_fits(self, width: int) -> bool:
        """Whether the table leaves the detail column room for its longest word (a path, an
        environment variable): else rich would cut that word across lines."""
        rows = self.findings
        fixed = sum(
            max(len(header), *(len(cell) for cell in cells)) + PADDING
            for header, cells in (
                ("area", [r.area for r in rows]),
                ("what", [r.name for r in rows]),
                ("status", [r.status for r in rows]),
            )
        )
        longest = max((len(word) for r in rows for word in r.detail.split()), default=0)
        return fixed + max(longest, len("detail")) + PADDING <= width

    def _stacked(self, width: int) -> RenderResult:
        """A finding a line, its detail indented under it, wrapped between words only: for a
        terminal too narrow for the table (a word longer than the line stays whole)."""
        from rich.text import Text

        for row in self.findings:
            yield Text.assemble(f"{row.area}  {row.name}  ", (row.status, style_of(row)))
            wrapped = textwrap.wrap(
                row.detail, max(width - 4, 20), break_long_words=False, break_on_hyphens=False
            )
            for line in wrapped:
                yield whole(f"    {line}")

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from rich.text import Text

        rows = self.findings
        if not console.is_terminal:
            cells = [[row.area, row.name, row.status, row.detail] for row in rows]
            yield Rows("ralph doctor", ["area", "what", "status", "detail"], cells)
        elif self._detail_fits(options.max_width):
            from rich import box
            from rich.table import Table

            table = Table(box=box.SIMPLE_HEAD, show_edge=False, header_style="bold")
            for column in ("area", "what", "status"):
                table.add_column(column, no_wrap=True)
            table.add_column("detail", overflow="fold")  # never needed: every word fits
            for row in rows:
                table.add_row(
                    Text(row.area),
                    Text(row.name),
                    Text(row.status, style=style_of(row)),
                    Text(row.detail),
                )
            yield table
        else:
            yield from self._stacked(options.max_width)
        for row in rows:
            if row.hint and row.ok is not True:
                yield Wrapped(f"{row.area} {row.name}: {row.hint}")
        if self.ok:
            yield Text("a loop can start here")
        else:
            failing = ", ".join(f"{r.area} {r.name}" for r in rows if r.ok is False)
            yield Wrapped(f"a loop cannot start here: {failing}")
