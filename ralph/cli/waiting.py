"""What a person sees of a usage limit the loop waits out (loop/limits.py): the line with the
time it goes on, the notification (`--notify`), and the run's `--on-limit`/`--max-wait` options."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from ralph.memory.state import LoopState

OnLimitOpt = Annotated[
    str | None,
    typer.Option(
        "--on-limit",
        metavar="wait|stop",
        envvar="RALPH_ON_LIMIT",
        show_default="wait",
        help="A usage limit of the agent or provider: wait until it resets and run the same "
        "iteration again, or stop (exit 5, `ralph resume` continues).",
    ),
]
MaxWaitOpt = Annotated[
    str | None,
    typer.Option(
        "--max-wait",
        metavar="DURATION",
        envvar="RALPH_MAX_WAIT",
        show_default="6h",
        help="The longest wait for a usage limit to reset; a later reset stops the loop "
        "(exit 5). Seconds, or 45s, 10m, 2h; 0: no limit.",
    ),
]


def limit_flags(on_limit: str | None, max_wait: str | None) -> dict[str, Any]:
    """The options as config keys; None: not given."""
    return {"on_limit": on_limit, "max_wait": max_wait}


def waiting_line(state: LoopState, until: float, limit: str) -> str:
    """`iteration 3: usage limit (claude: ...): waiting until 13:05 UTC (4h 59m); Ctrl-C
    pauses it: ralph resume ID`."""
    from ralph.usage_limits import clock_text, span

    left = span(until - time.time())
    return (
        f"iteration {state.iteration + 1}: usage limit ({limit}): waiting until "
        f"{clock_text(until)} ({left}); Ctrl-C pauses it: ralph resume {state.loop_id}"
    )


def announce(state: LoopState, until: float, limit: str) -> str:
    """The waiting line, said as a notification too when the loop has `--notify`."""
    text = waiting_line(state, until, limit)
    if state.settings.notify:
        from ralph.cli.notify import say

        say(f"{state.loop_id} {text}", "waiting", state.settings.notify_command)
    return text
