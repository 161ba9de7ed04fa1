"""The console script `ralph`: nothing heavy is loaded before the command is known.

`ralph check` starts its checks here, before the CLI is imported (cli/early.py).
"""

from __future__ import annotations

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
    finally:
        early.cancel()  # an early check nobody claimed never outlives ralph
