"""The ChatClient protocol every provider (and an agent CLI used as reflector) implements."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

# the seam: what other packages use
__all__ = ["ChatClient", "ChatResponse", "Message"]


@dataclass
class Message:
    role: Literal["system", "user", "assistant"]
    content: str


@dataclass
class ChatResponse:
    text: str
    model: str
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None  # None when unknown, never 0 for unknown


class ChatClient(Protocol):
    model: str

    def chat(
        self,
        messages: list[Message],
        *,
        json_mode: bool = False,
        max_tokens: int | None = None,
    ) -> ChatResponse:
        """One completion. Raises ProviderError after retries are exhausted or the deadline."""
        ...
