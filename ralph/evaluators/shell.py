"""A shell check: any command; exit 0 passes, anything else fails with the output's tail."""

from __future__ import annotations

from ralph.evaluators.command import CommandCheck


class ShellCheck(CommandCheck):
    """`CommandCheck`'s own judgement is the shell's: nothing to add."""
