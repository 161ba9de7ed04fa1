"""What every command shares: where output goes (a rich console, plain without a terminal or in
CI; JSON), the project's memory, and the argument types used by several commands.

Everything a command shows leaves through here, so no command can forget the two rules of
output: no secret (ralph.redact) and no terminal control sequence from outside
(ralph.escapes). `console()` cleans what it renders (and, without a terminal, every byte it
writes), `print_json` redacts the data and escapes every control character, `text_out()` is
stdout for plain text (CSV, a stored prompt)."""

from __future__ import annotations

import functools
import json
import os
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any, BinaryIO, TextIO, cast

import typer

from ralph.escapes import strip_escapes
from ralph.redact import may_change_json, redact, redact_data
from ralph.rendering import to_data

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderableType
    from rich.segment import Segment
    from rich.text import Text

    from ralph.memory.store import MemoryStore


def complete_loop_id(incomplete: str) -> list[str]:
    """Shell completion of a loop id: the loops of this project's memory, and `latest`."""
    try:
        ids = memory().loop_ids()
    except Exception:  # completion must never print a traceback into the user's shell
        return []
    words = ["latest", *reversed(ids)]
    return [w for w in words if w.startswith(incomplete) or w.startswith("ralph-" + incomplete)]


LOOP_HELP = "Loop id, a unique prefix of it, its short id (8 hex characters), or `latest`."
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")]
LoopArg = Annotated[
    str, typer.Argument(metavar="LOOP", help=LOOP_HELP, autocompletion=complete_loop_id)
]
OptionalLoopArg = Annotated[
    str | None,
    typer.Argument(
        metavar="LOOP", help=LOOP_HELP + " Default: the latest.", autocompletion=complete_loop_id
    ),
]
IterationArg = Annotated[
    int | None,
    typer.Argument(metavar="ITERATION", help="Iteration number; default the last one.", min=0),
]
NotifyFlag = Annotated[
    bool,
    typer.Option(
        "--notify",
        envvar="RALPH_NOTIFY",
        help="Say when the loop ends: the terminal bell and a desktop notification "
        "(notify-send, osascript), or `notify_command` from the config.",
    ),
]
ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        metavar="FILE",
        envvar="RALPH_CONFIG",
        help="Settings for this run (YAML, or TOML with [tool.ralph]), over the project's "
        "pyproject.toml and .aiwg/ralph/config.yaml.",
    ),
]


def clean(text: str) -> str:
    """Text as ralph shows it: redacted, without terminal control sequences."""
    return strip_escapes(redact(text))


class CleanStream:
    """A text stream that cleans what is written to it (`clean`); a CRLF stays one (CSV)."""

    def __init__(self, inner: IO[str]) -> None:
        self.inner = inner

    def write(self, text: str) -> int:
        parts = redact(text).split("\r\n")
        self.inner.write("\r\n".join(strip_escapes(part) for part in parts))
        return len(text)

    def __getattr__(self, name: str) -> Any:  # flush, isatty, fileno, encoding, ...
        return getattr(self.inner, name)


def text_out() -> TextIO:
    """stdout for plain text a command prints (CSV, a stored prompt), cleaned."""
    return cast("TextIO", CleanStream(sys.stdout))


def console(stderr: bool = False) -> Console:
    """Rich on a terminal; plain lines without a TTY or with CI=true. Text is wrapped only on
    a terminal (or at an explicit COLUMNS): a pipe or a file gets whole lines, not lines cut
    at 80 columns. What it shows is cleaned (`clean`): without a terminal every write, on one
    the text it renders (its own colours are kept)."""
    plain = os.environ.get("CI", "").lower() == "true" or os.environ.get("NO_COLOR") is not None
    out = _clean_console()(stderr=stderr, no_color=plain, highlight=False, soft_wrap=plain)
    if not out.is_terminal:
        out.file = cast("IO[str]", CleanStream(out.file))
        if "COLUMNS" not in os.environ:
            out.soft_wrap = True
    return out


@functools.cache
def _clean_console() -> type[Console]:
    """A rich Console that cleans the strings it renders, then every segment of text (a Text
    built without a string, a secret cut by wrapping); rich is imported only when needed."""
    from rich.console import Console
    from rich.segment import Segment

    class CleanConsole(Console):
        def render_str(self, text: str, **options: Any) -> Text:
            return super().render_str(clean(text), **options)

        def render(
            self, renderable: RenderableType, options: ConsoleOptions | None = None
        ) -> Iterable[Segment]:
            for segment in super().render(renderable, options):
                text = segment.text
                if segment.control or not text:
                    yield segment
                else:
                    cleaned = clean(text)
                    yield segment if cleaned == text else Segment(cleaned, *segment[1:])

    return CleanConsole


_C1 = re.compile("[\x80-\x9f]")


def print_json(data: Any) -> None:
    """One JSON document on stdout: what `--json` prints, for scripts and CI. Its strings are
    redacted; control characters are escaped (JSON does C0, C1 here), so none reaches a
    terminal that shows the document."""
    text = json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False)
    if may_change_json(text):
        text = json.dumps(redact_data(data), indent=2, ensure_ascii=False, allow_nan=False)
    sys.stdout.write(_C1.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "\n")


def show(result: Any, *, as_json: bool = False) -> None:
    """A result in the format asked for: its JSON form (`rendering.to_data`) through
    `print_json`, or drawn by itself (`__rich_console__`) on `console()`. Lines are never
    cropped: a listing's plain rows stay whole at any width."""
    if as_json:
        print_json(to_data(result))
    else:
        console().print(result, crop=False)


def memory(start: Path | None = None) -> MemoryStore:
    """The project's memory (`MemoryStore.discover`), imported late so `--help` stays fast."""
    from ralph.memory.store import MemoryStore

    return MemoryStore.discover(start)


def loop_in(store: MemoryStore, text: str) -> str:
    """The loop id `text` means (a prefix, `latest`): `MemoryStore.resolve_loop_id`."""
    store.require()
    return store.resolve_loop_id(text)


def raw_stdio() -> tuple[BinaryIO, BinaryIO]:
    """stdin and stdout as bytes, for a protocol spoken on them to a program (`ralph mcp`'s
    JSON-RPC lines): what is written there is the protocol's, not a person's screen."""
    return sys.stdin.buffer, sys.stdout.buffer
