"""The `ralph` console script and `python -m ralph`.

`ralph check` runs after every edit, by people and by agents, so its own start-up and exit
count: its checks start before the CLI is imported (`ralph.evaluators.early`), Python's cycle
collector stays off in this short-lived process (it otherwise runs dozens of full collections
during ~400 imports), and the process ends with `os._exit` once its output is flushed, skipping
a ~0.1 s interpreter teardown nobody waits for. Every other command is the plain CLI.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys


def main() -> None:
    if sys.argv[1:2] != ["check"]:
        from ralph.cli import main as cli_main

        cli_main()
        return
    gc.disable()
    code = run_check()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


def run_check() -> int:
    """`ralph check ...` as in `sys.argv`, its checks started early; returns the exit code."""
    from ralph.evaluators import early

    try:
        early.start(sys.argv[2:])
        from ralph.cli import main as cli_main

        cli_main()
    except SystemExit as done:
        code = done.code
        return code if isinstance(code, int) else 0 if code is None else 1
    except KeyboardInterrupt:  # before the CLI, which says the same, was loaded
        print("ralph: interrupted", file=sys.stderr)
        return 130
    finally:
        early.discard()
    return 0
