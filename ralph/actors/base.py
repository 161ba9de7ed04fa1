"""The Actor protocol and the result of one attempt."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ralph.providers.base import ChatClient

if TYPE_CHECKING:
    from ralph.actors.trace import Trajectory

# the seam: what other packages use
__all__ = ["Actor", "ActorContext", "ActorResult", "ToolCall"]


@dataclass
class ToolCall:
    """One step of an agent's trace (a file edit, a shell command, a read)."""

    name: str
    detail: str | None = None


@dataclass
class ActorContext:
    loop_id: str
    iteration: int
    workdir: Path
    artifacts_dir: Path  # prompt.md and actor.log go here
    iteration_timeout: float | None = None
    idle_timeout: float | None = None
    on_output: Callable[[str, str], None] | None = None


@dataclass
class ActorResult:
    output: str
    exit_code: int | None
    duration_ms: int
    timed_out: str | None = None  # "wall" or "idle"
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None  # None when unknown, never 0 for unknown
    tool_calls: list[ToolCall] = field(default_factory=list)
    summary: str | None = None  # the agent's own account of what it did, if it gives one
    unmatched_edits: list[str] = field(default_factory=list)  # edit blocks that did not apply
    trajectory: Trajectory | None = None  # from the agent's JSON stream (ralph/trace.py)
    notes: list[str] = field(default_factory=list)  # what ralph ignored in its output, and why
    unreachable: str | None = None  # "NAME could not reach its model: " and the CLI's own line


class Actor(Protocol):
    name: str

    def preflight(self) -> None:
        """Raise PreflightError when the actor cannot run here (binary missing, no key)."""
        ...

    def act(self, prompt: str, ctx: ActorContext) -> ActorResult:
        """Make one attempt at the task described by `prompt`, changing files in ctx.workdir."""
        ...

    def chat_client(self) -> ChatClient | None:
        """The actor's own model as a chat client, the default reflector; None if it has none."""
        ...
