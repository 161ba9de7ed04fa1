"""How a result leaves ralph: one JSON form for every result (`to_data`), and `Rows`, the
table every listing shows. A result draws itself on a terminal with `__rich_console__` (rich's
renderable protocol); the CLI only chooses between the two (`cli/common.show`).

rich is imported inside the rendering methods only: a command that prints JSON, or nothing,
does not load it."""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult
    from rich.segment import Segment


def to_data(obj: Any) -> Any:
    """The JSON form of a result: a dataclass as an object of its fields, in their order, or of
    the fields its `json_fields` names, in that order (what scripts rely on); nested results,
    lists, tuples and mappings alike; a path as a string."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        names = getattr(obj, "json_fields", None)
        if names is None:
            names = [f.name for f in dataclasses.fields(obj)]
        return {name: to_data(getattr(obj, name)) for name in names}
    if isinstance(obj, list | tuple):
        return [to_data(item) for item in obj]
    if isinstance(obj, Mapping):
        return {str(key): to_data(value) for key, value in obj.items()}
    if isinstance(obj, PurePath):
        return str(obj)
    return obj


def reward_text(value: float | None) -> str:
    """A reward as every listing shows it: two decimals, `-` when there is none."""
    return "-" if value is None else f"{value:.2f}"


@dataclass
class Rows:
    """A listing: a rich table on a terminal; tab-separated lines (header first) for pipes and
    CI, whole, whatever the width."""

    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if not console.is_terminal:
            from rich.segment import Segment

            for row in [self.columns, *self.rows]:
                yield Segment("\t".join(cell.replace("\t", " ") for cell in row) + "\n")
            return
        widths = self._widths(options.max_width)
        if widths is None:
            yield from self._stacked(options.max_width)
            return
        from rich import box
        from rich.table import Table
        from rich.text import Text

        table = Table(title=self.title, box=box.SIMPLE_HEAD, title_justify="left")
        for column, width in zip(self.columns, widths, strict=True):
            table.add_column(column, width=width, overflow="fold")  # every word fits
        for row in self.rows:
            table.add_row(*(Text(cell) for cell in row))
        yield table

    def _widths(self, width: int) -> list[int] | None:
        """Each column's width: room for its longest word (a loop id, a path, a date: rich
        would cut it across lines otherwise), then the rest of the line shared out towards
        each column's longest cell. None when the longest words alone do not fit."""
        least: list[int] = []
        most: list[int] = []
        for index, column in enumerate(self.columns):
            cells = [column, *(row[index] for row in self.rows if index < len(row))]
            longest = max(len(cell) for cell in cells)
            words = max(len(word) for cell in cells for word in [*cell.split(), ""])
            # a short column (a date with its time, a status) stays on one line
            least.append(longest if longest <= SHORT_CELL else words)
            most.append(longest)
        room = width - 1 - 3 * len(self.columns)  # two edges, each column's padding, rules
        spare = room - sum(least)
        if spare < 0:
            return None
        wanted = sum(most) - sum(least)
        if wanted <= spare:
            return most
        return [lo + (hi - lo) * spare // wanted for lo, hi in zip(least, most, strict=True)]

    def _stacked(self, width: int) -> RenderResult:
        """A row a block, for a terminal too narrow for the table: its first cell, then each
        other column as `name: value`, wrapped between words only."""
        yield whole(self.title, "bold")
        for row in self.rows:
            yield whole(row[0] if row else "", "bold")  # each block's head, as a table's title
            for column, cell in zip(self.columns[1:], row[1:], strict=False):
                text = f"{column}: {cell}"
                for line in textwrap.wrap(
                    text, max(width - 4, 20), break_long_words=False, break_on_hyphens=False
                ):
                    yield whole(f"    {line}")


def lines(*texts: str) -> Iterator[Any]:
    """Plain lines as rich text (no markup is read in them): what a result yields for the
    lines it shows."""
    from rich.text import Text

    for text in texts:
        yield Text(text)


SHORT_CELL = 20  # characters: a column whose cells are all this short is never wrapped


def whole(text: str, style: str | None = None) -> Segment:
    """A line rich never wraps nor cuts (printed through `cli/common.show`): the terminal
    wraps it, so a command in it copies whole."""
    from rich.segment import Segment
    from rich.style import Style

    if style is None:
        return Segment(text + "\n")
    return Segment(text + "\n", Style.parse(style))
