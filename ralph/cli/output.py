"""Where the CLI's output goes: a rich console (plain without a terminal or in CI) and JSON."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console


def console(stderr: bool = False) -> Console:
    """Rich on a terminal; plain lines without a TTY or with CI=true."""
    from rich.console import Console

    plain = os.environ.get("CI", "").lower() == "true" or os.environ.get("NO_COLOR") is not None
    return Console(stderr=stderr, no_color=plain, highlight=False, soft_wrap=plain)


def print_json(data: Any) -> None:
    """One JSON document on stdout: what `--json` prints, for scripts and CI."""
    import json

    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n")
