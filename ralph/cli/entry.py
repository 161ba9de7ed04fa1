"""The console script `ralph`: nothing heavy is loaded before the command is known.

`ralph check` starts its checks here, before the CLI is imported (cli/early.py), and leaves
without tearing the interpreter down (`exit_now`): it wrote nothing but its report, and the
teardown of the CLI's modules (pydantic's above all) costs ~35 ms after the last check.
"""

from __future__ import annotations

import contextlib
import os
import sys

from ralph.cli import early


def main() -> None:
    checking = early.wanted(sys.argv[1:])
    try:
        try:
            if checking:
                early.start()
                early.make_room()
            from ralph.cli.app import main as run_app

            run_app()
        except KeyboardInterrupt:  # before the CLI's own handler is in place; it says the same
            sys.stderr.write("ralph: interrupted\n")
            raise SystemExit(130) from None
    except SystemExit as done:
        if checking:
            early.cancel()
            exit_now(done.code)
        raise
    finally:
        early.cancel()  # an early check nobody claimed never outlives ralph


def exit_now(code: object) -> None:
    """Flush what was printed and end the process with `code` (SystemExit's meaning of it)."""
    if isinstance(code, str):
        sys.stderr.write(f"{code}\n")
    status = code if isinstance(code, int) else (0 if code is None else 1)
    for stream in (sys.stdout, sys.stderr):
        # a closed pipe (`ralph check | head`) loses nothing the verdict needs
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(status)
