"""The one family of errors a user sees: caught once in the CLI, printed as one line and a hint."""

from __future__ import annotations


class RalphError(Exception):
    """A problem the user can fix: bad input, configuration or environment. Exit code 2."""

    exit_code = 2

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class ConfigError(RalphError):
    """Invalid configuration file, environment variable or flag."""


class PreflightError(RalphError):
    """Something the loop needs before it starts is missing: a tool, a clean tree, a lock."""


class StoreError(RalphError):
    """The memory store cannot be read or written, or an id is invalid."""


class ProviderError(RalphError):
    """An LLM provider failed after retries, or answered with something unusable."""


class BudgetExceeded(RalphError):
    """Money, tokens or time ran out. Exit code 3."""

    exit_code = 3


class LoopAborted(KeyboardInterrupt):
    """`ralph abort` asked a running loop to end. A KeyboardInterrupt, so it stops whatever runs
    the way Ctrl-C does; the loop then ends as aborted instead of paused (exit code 4)."""


EXIT_ABORTED = 4
EXIT_FOR_PERSON = 5  # stopped for a person, resumable: a usage limit not waited out


def one_line(exc: BaseException) -> str:
    """An exception as one short line for a record or a status line: type and first line."""
    message = exc.message if isinstance(exc, RalphError) else str(exc)
    first = (message.strip().splitlines() or [""])[0]
    text = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."
