"""The `ralph` console script and `python -m ralph`.

`ralph check` runs after every edit, by people and by agents, and `ralph analyze` reads every
record there is, so their own start-up and exit count. `check` starts its checks before the CLI
is imported (`ralph.evaluators.early`). Both keep Python's cycle collector off (it would run
dozens of full collections over the ~400 modules imported and the facts of every record, and
they make no cyclic garbage worth collecting in their short lives), and end with `os._exit`
once their output is flushed and their files closed, skipping an interpreter teardown of
0.1 s or more that nobody waits for. Every other command is the plain CLI.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys

SHORT_LIVED = ("check", "analyze")


def main() -> None:
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command not in SHORT_LIVED:
        from ralph.cli import main as cli_main

        cli_main()
        return
    gc.disable()
    code = run_check() if command == "check" else run_cli()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


def run_cli() -> int:
    """The CLI on `sys.argv`; its exit code instead of SystemExit."""
    from ralph.cli import main as cli_main

    try:
        cli_main()
    except SystemExit as done:
        code = done.code
        return code if isinstance(code, int) else 0 if code is None else 1
    return 0


def run_check() -> int:
    """`ralph check ...` as in `sys.argv`, its checks started early; returns the exit code."""
    from ralph.evaluators import early

    try:
        early.start(sys.argv[2:])
        return run_cli()
    except KeyboardInterrupt:  # before the CLI, which says the same, was loaded
        print("ralph: interrupted", file=sys.stderr)
        return 130
    finally:
        early.discard()
