"""`--notify`: say when a loop ends, for whoever started it and went to do something else.

With `notify_command` (config or RALPH_NOTIFY_COMMAND) that command runs, with the message in
RALPH_NOTIFY_MESSAGE and the loop's status in RALPH_NOTIFY_STATUS; otherwise the terminal bell
rings (on a terminal) and `notify-send` (Linux) or `osascript` (macOS) shows a desktop
notification where one is installed. A notification that cannot be shown costs nothing.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ralph import process

NOTIFY_TIMEOUT = 10.0


def message(result: Any) -> str:
    """One line: the loop, how it ended and its best reward."""
    best = result.best_reward
    reward = "no attempt" if best is None else f"best reward {best:.2f}"
    return f"{result.loop_id} {result.status} ({result.stop_reason}), {reward}"


def notify(result: Any, command: str | None) -> None:
    say(message(result), str(result.status), command)


def say(text: str, status: str, command: str | None) -> None:
    """`text` as a notification: `command` with it in RALPH_NOTIFY_MESSAGE and `status` in
    RALPH_NOTIFY_STATUS, else the bell and a desktop notification."""
    env = {"RALPH_NOTIFY_MESSAGE": text, "RALPH_NOTIFY_STATUS": status}
    if command:
        process.run(command, cwd=Path.cwd(), env=env, wall_timeout=NOTIFY_TIMEOUT)
        return
    if sys.stderr.isatty():
        sys.stderr.write("\a")
        sys.stderr.flush()
    if process.which("notify-send"):
        shown = ["notify-send", "ralph", text]
    elif process.which("osascript"):
        script = f'display notification {_applescript(text)} with title "ralph"'
        shown = ["osascript", "-e", script]
    else:
        return
    process.run(shown, cwd=Path.cwd(), env=env, wall_timeout=NOTIFY_TIMEOUT)


def _applescript(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
