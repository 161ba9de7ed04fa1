"""OpenAI chat completions, and every local or hosted server that speaks the same API."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

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

PROVIDER = "openai"
# Includes /v1, as OPENAI_BASE_URL does by convention (and the official SDK).
DEFAULT_BASE_URL = "https://api.openai.com/v1"


class OpenAIClient(HttpChatClient):
    """POST {base_url}/chat/completions with a Bearer key (optional for local servers)."""

    provider = PROVIDER

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        **transport: Any,
    ) -> None:
        """`transport`: HttpChatClient's options (deadline, max_attempts, sleep, transport)."""
        super().__init__(model, secrets=[api_key], **transport)
        self.base_url = (base_url or DEFAULT_BASE_URL).rstrip("/")
        self._api_key = api_key or None

    def __repr__(self) -> str:
        return f"OpenAIClient(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def endpoint(self) -> str:
        return f"{self.base_url}/chat/completions"

    def chat(
        self,
        messages: list[Message],
        *,
        json_mode: bool = False,
        max_tokens: int | None = None,
    ) -> ChatResponse:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
        }
        if json_mode:
            body["response_format"] = {"type": "json_object"}
        if max_tokens is not None:
            # OpenAI deprecated `max_tokens` and its reasoning models reject it; many compatible
            # servers (older vLLM, llama.cpp, LM Studio) only know `max_tokens`.
            name = "max_completion_tokens" if self._is_openai() else "max_tokens"
            body[name] = max_tokens
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        data = self._http.post(
            self.endpoint,
            body,
            headers=headers,
            hints={
                401: "check OPENAI_API_KEY",
                403: "check OPENAI_API_KEY and that it may use this model",
                404: f"check the model name {self.model!r} and OPENAI_BASE_URL",
            },
        )
        return self._response(data)

    def _is_openai(self) -> bool:
        host = urlsplit(self.base_url).hostname or ""
        return host == "api.openai.com" or host.endswith(".openai.azure.com")

    def _response(self, data: dict[str, Any]) -> ChatResponse:
        message = field(data, ("choices", 0, "message"), PROVIDER)
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            refusal = message.get("refusal") if isinstance(message, dict) else None
            reason = f"it refused: {refusal}" if isinstance(refusal, str) else "no text content"
            raise ProviderError(f"{PROVIDER} answered with {reason}")
        tokens_in = optional_int(data, "usage", "prompt_tokens")
        tokens_out = optional_int(data, "usage", "completion_tokens")
        answered_by = data.get("model") if isinstance(data.get("model"), str) else self.model
        price = cost(self.model, tokens_in, tokens_out)
        if price is None:  # a dated snapshot in the answer may be priced where an alias is not
            price = cost(str(answered_by), tokens_in, tokens_out)
        return ChatResponse(
            text=content,
            model=str(answered_by),
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            cost_usd=price,
        )
