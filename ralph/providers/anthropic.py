"""Anthropic Messages API: system prompt at top level, max_tokens required, text in blocks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ralph.errors import ProviderError
from ralph.providers.base import ChatResponse, Message
from ralph.providers.http import (
    HttpChatClient,
    field,
    optional_int,
)
from ralph.providers.pricing import cost

if TYPE_CHECKING:
    pass

PROVIDER = "anthropic"
DEFAULT_BASE_URL = "https://api.anthropic.com"  # without /v1, as ANTHROPIC_BASE_URL is spelled
API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
# The API has no JSON flag; the caller's prompt already asks for JSON, this makes it emphatic.
JSON_INSTRUCTION = "Answer with one JSON object and nothing else: no prose, no code fences."


def to_wire(messages: list[Message], *, json_mode: bool) -> tuple[str | None, list[dict[str, str]]]:
    """(system, turns): system messages joined for the top-level field, same-role turns merged."""
    system = [m.content for m in messages if m.role == "system"]
    if json_mode:
        system.append(JSON_INSTRUCTION)
    turns: list[dict[str, str]] = []
    for message in messages:
        if message.role == "system":
            continue
        if turns and turns[-1]["role"] == message.role:
            turns[-1]["content"] += "\n\n" + message.content
        else:
            turns.append({"role": message.role, "content": message.content})
    return ("\n\n".join(system) if system else None), turns


class AnthropicClient(HttpChatClient):
    """POST {base_url}/v1/messages with `x-api-key` and `anthropic-version` headers."""

    provider = PROVIDER

    def __init__(
        self,
        model: str,
        *,
        api_key: str,
        base_url: str | None = None,
        **transport: Any,
    ) -> None:
        """`transport`: HttpChatClient's options (deadline, max_attempts, sleep, transport)."""
        super().__init__(model, secrets=[api_key], **transport)
        base = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self.base_url = base.removesuffix("/v1")  # tolerate the OpenAI habit of including /v1
        self._api_key = api_key

    def __repr__(self) -> str:
        return f"AnthropicClient(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def endpoint(self) -> str:
        return f"{self.base_url}/v1/messages"

    def chat(
        self,
        messages: list[Message],
        *,
        json_mode: bool = False,
        max_tokens: int | None = None,
    ) -> ChatResponse:
        system, turns = to_wire(messages, json_mode=json_mode)
        if not turns:
            raise ProviderError(f"{PROVIDER}: a request needs at least one user message")
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": max_tokens if max_tokens is not None else DEFAULT_MAX_TOKENS,
            "messages": turns,
        }
        if system is not None:
            body["system"] = system
        headers = {
            "x-api-key": self._api_key,
            "anthropic-version": API_VERSION,
            "content-type": "application/json",
        }
        data = self._http.post(
            self.endpoint,
            body,
            headers=headers,
            hints={
                401: "check ANTHROPIC_API_KEY",
                403: "check ANTHROPIC_API_KEY and that it may use this model",
                404: f"check the model name {self.model!r} and ANTHROPIC_BASE_URL",
            },
        )
        return self._response(data)

    def _response(self, data: dict[str, Any]) -> ChatResponse:
        blocks = field(data, ("content",), PROVIDER)
        if not isinstance(blocks, list):
            raise ProviderError(f"{PROVIDER} answered with `content` that is not a list")
        text = "".join(
            block["text"]
            for block in blocks
            if isinstance(block, dict)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        )
        # ralph never asks for prompt caching, so input_tokens is the whole input.
        tokens_in = optional_int(data, "usage", "input_tokens")
        tokens_out = optional_int(data, "usage", "output_tokens")
        answered_by = data.get("model") if isinstance(data.get("model"), str) else self.model
        price = cost(self.model, tokens_in, tokens_out)
        if price is None:
            price = cost(str(answered_by), tokens_in, tokens_out)
        return ChatResponse(
            text=text,
            model=str(answered_by),
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            cost_usd=price,
        )
