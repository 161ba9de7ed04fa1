"""How a result leaves ralph: one JSON form for every result (`to_data`), and `Rows`, the
table every listing shows. A result draws itself on a terminal with `__rich_console__` (rich's
renderable protocol); the CLI only chooses between the two (`cli/common.show`).

rich is imported inside the rendering methods only: a command that prints JSON, or nothing,
does not load it."""

from __future__ import annotations

import dataclasses
import re
import textwrap
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult
    from rich.segment import Segment
    from rich.text import Text


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
    titled: bool = False  # its title first in a pipe too: one of several listings on a screen

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if not console.is_terminal:
            from rich.segment import Segment

            if self.titled:
                yield Segment(self.title + "\n")
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

    def fits(self, width: int) -> bool:
        """Whether a table `width` columns wide holds every column's longest word whole (else
        a terminal gets a block per row)."""
        return self._widths(width) is not None

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


def room(console: Console, options: ConsoleOptions) -> int | None:
    """The width text is wrapped at: the line's on a terminal; None (whole lines) in a pipe,
    a file or CI, where a line is never cut at a width."""
    return options.max_width if console.is_terminal else None


@dataclass
class Wrapped:
    """A line wrapped between words on a terminal, its continuation lines indented by `hang`
    columns (default: its own indent and two more), so wrapped text keeps its indent and no
    identifier, path or command word is ever split by ralph (a word longer than any line stays
    after the words before it: only the terminal can wrap that one). With `shell`, a command
    to copy, each continued line ends with ` \\`, so the pasted command stays one, and a quoted
    argument is one word (a break inside quotes would put the indent into it); its `comment`
    follows as `  # ...` when the line fits, else on lines of its own that each start with
    `#`, so no shell ever runs a word of it. Off a terminal (`room`): one whole line. The one
    wrapper of every line a person reads."""

    text: str | Text
    hang: int | None = None
    style: str | None = None
    shell: bool = False
    comment: str | None = None  # said after the command (`shell`), never run by a shell

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from rich.segment import Segment
        from rich.text import Text

        text = self.text if isinstance(self.text, Text) else Text(self.text, self.style or "")
        width = room(console, options)
        remark = f"  # {self.comment}" if self.comment else ""
        if remark and (width is None or len(text.plain) + len(remark) <= width):
            text, remark = text + remark, ""  # the command and its comment on one line
        for line in text.split("\n", allow_blank=True):  # each line of a text wraps alone
            plain = line.plain
            hang = len(plain) - len(plain.lstrip(" ")) + 2 if self.hang is None else self.hang
            breaks = (
                [] if width is None else _breaks(plain, width - 2 * self.shell, hang, self.shell)
            )
            pieces = list(line.divide(breaks)) if breaks else [line]
            for n, piece in enumerate(pieces):
                piece.rstrip()
                if n:
                    yield Segment(" " * hang)
                yield from piece.render(console)
                yield Segment(" \\\n" if self.shell and n + 1 < len(pieces) else "\n")
        if remark and width is not None and self.comment:  # lines of its own, each a comment
            hang = len(text.plain) - len(text.plain.lstrip(" ")) if self.hang is None else self.hang
            for said in textwrap.wrap(
                self.comment, max(width - hang - 2, 20), break_long_words=False,
                break_on_hyphens=False,
            ):  # fmt: skip
                yield Segment(f"{' ' * hang}# {said}\n")


_WORD = re.compile(r"\S+")
_SHELL_WORD = re.compile(r"""(?:[^\s"']+|"[^"]*"|'[^']*'|["'])+""")  # quotes hold words together


def _breaks(plain: str, width: int, hang: int, shell: bool = False) -> list[int]:
    """Where `plain` is cut into lines of at most `width` columns (continuations indented by
    `hang`): before a word that would pass the width, never inside one (for a command, never
    inside a quoted argument)."""

    breaks: list[int] = []
    start, indent = 0, 0
    for word in (_SHELL_WORD if shell else _WORD).finditer(plain):
        passes = indent + word.end() - start > width
        fits_alone = hang + len(word.group()) <= width  # else the terminal wraps it anyway
        if passes and fits_alone and plain[start : word.start()].strip():
            breaks.append(word.start())
            start, indent = word.start(), hang
    return breaks


def whole(text: str, style: str | None = None) -> Segment:
    """A line rich never wraps nor cuts (printed through `cli/common.show`): the terminal
    wraps it, so a command in it copies whole."""
    from rich.segment import Segment
    from rich.style import Style

    if style is None:
        return Segment(text + "\n")
    return Segment(text + "\n", Style.parse(style))
