"""What `ralph doctor` found, as a result that draws itself: a table (failures red, findings
for information dim; tab-separated lines in pipes and CI), the hints of what is not fine, and
the verdict. Its JSON form is `{"ok": ..., "findings": [...]}`."""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from ralph.rendering import Rows, Wrapped, whole

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderableType, RenderResult


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
    command: bool = False  # the detail is a command to copy (an install), wrapped as one


OTHER_WAY = re.compile(r"(?P<command>.+?) \(or: (?P<other>.+)\)")


def commands(detail: str) -> list[str]:
    """An install detail as lines a shell could each run: `npm install -g X (or: curl ... |
    bash)` is `npm install -g X`, then `or: curl ... | bash` (a label, as `review: git ...`)."""
    found = OTHER_WAY.fullmatch(detail)
    return [found["command"], f"or: {found['other']}"] if found else [detail]


def command_lines(row: Row, indent: int = 0) -> RenderableType:
    """A detail that is a command, on a terminal: wrapped as one (` \\` ends each cut line,
    so it pastes whole), never as prose."""
    from rich.console import Group

    return Group(
        *(
            Wrapped(" " * indent + line, hang=indent + 4, shell=True)
            for line in commands(row.detail)
        )
    )


STYLES = {True: "green", False: "bold red", None: "dim"}
CHECK_STYLES = {"pass": "green", "fail": "red", "cannot run": "yellow"}  # a check's own status


def style_of(row: Row) -> str:
    """A finding's colour: a check's follows its status (`fail, target` is red, though a loop
    can start: it is what the loop fixes), every other finding's whether a loop can start."""
    if row.ok is False:
        return STYLES[False]
    return CHECK_STYLES.get(row.status.split(",")[0], STYLES[row.ok])


PADDING = 2  # a column's padding in the table, one space either side


def trimmed(console: Console, options: ConsoleOptions, table: RenderableType) -> RenderResult:
    """The table's lines without the spaces that pad its last column: a command's ` \\` must
    end its line, or a shell pasting it reads an escaped space and runs the half."""
    from rich.segment import Segment

    for line in console.render_lines(table, options, pad=False):
        while line and not line[-1].control and not line[-1].text.rstrip():
            line.pop()
        if line:
            last = line.pop()
            line.append(Segment(last.text.rstrip(), last.style, last.control))
        yield from line
        yield Segment.line()


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
            if row.command:
                yield command_lines(row, indent=4)
                continue
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
                    command_lines(row) if row.command else Text(row.detail),
                )
            yield from trimmed(console, options, table)
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
