"""Ollama's native chat API: local models, JSON mode via `format`, token counts from eval stats."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ralph.errors import ConfigError, ProviderError
from ralph.providers.base import ChatResponse, Message
from ralph.providers.http import (
    HttpChatClient,
    field,
    optional_int,
)

if TYPE_CHECKING:
    pass

PROVIDER = "ollama"
DEFAULT_PORT = 11434
DEFAULT_HOST = f"http://127.0.0.1:{DEFAULT_PORT}"
# Addresses a server binds to, which a client cannot always connect to (Windows refuses 0.0.0.0).
_BIND_ALL = {"0.0.0.0": "127.0.0.1", "::": "[::1]"}


def normalize_host(host: str | None) -> str:
    """OLLAMA_HOST as a base URL: `localhost:11434`, `0.0.0.0`, `:8080` and full URLs all work.

    Without a scheme, http and port 11434 are assumed, as the ollama CLI does; with a scheme the
    port is whatever the URL says (or the scheme's default), and a path prefix is kept.
    """
    raw = (host or "").strip().rstrip("/")
    if not raw:
        return DEFAULT_HOST
    if "://" in raw:
        return raw
    split = urlsplit(f"http://{raw}")
    try:
        port = split.port or DEFAULT_PORT
    except ValueError:
        raise ConfigError(
            f"OLLAMA_HOST={host!r} has an invalid port", hint="e.g. OLLAMA_HOST=127.0.0.1:11434"
        ) from None
    hostname = split.hostname or "127.0.0.1"
    hostname = _BIND_ALL.get(hostname, hostname)
    if ":" in hostname and not hostname.startswith("["):
        hostname = f"[{hostname}]"  # IPv6 literal
    return f"http://{hostname}:{port}{split.path}"


class OllamaClient(HttpChatClient):
    """POST {host}/api/chat with `stream: false`; no key, no per-token price."""

    provider = PROVIDER

    def __init__(
        self,
        model: str,
        *,
        host: str | None = None,
        **transport: Any,
    ) -> None:
        """`transport`: HttpChatClient's options (deadline, max_attempts, sleep, transport)."""
        super().__init__(model, **transport)
        self.host = normalize_host(host)

    def __repr__(self) -> str:
        return f"OllamaClient(model={self.model!r}, host={self.host!r})"

    @property
    def endpoint(self) -> str:
        return f"{self.host}/api/chat"

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
            "stream": False,
        }
        if json_mode:
            body["format"] = "json"
        if max_tokens is not None:
            body["options"] = {"num_predict": max_tokens}
        data = self._http.post(
            self.endpoint,
            body,
            headers={"Content-Type": "application/json"},
            hints={404: f"is the model pulled? run `ollama pull {self.model}`"},
        )
        text = field(data, ("message", "content"), PROVIDER)
        if not isinstance(text, str):
            raise ProviderError(f"{PROVIDER} answered with `message.content` that is not text")
        tokens_in = optional_int(data, "prompt_eval_count")
        tokens_out = optional_int(data, "eval_count")
        answered_by = data.get("model") if isinstance(data.get("model"), str) else self.model
        return ChatResponse(
            text=text,
            model=str(answered_by),
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            cost_usd=self._cost(),
        )

    def _cost(self) -> float | None:
        # A model running on your own machine costs nothing per token: 0.0 is a known value here,
        # not a stand-in for "unknown". Ollama's cloud models (`*-cloud`, or the ollama.com host)
        # are paid by subscription, so their per-call cost is genuinely unknown.
        hostname = urlsplit(self.host).hostname or ""
        if self.model.endswith("-cloud") or hostname.endswith("ollama.com"):
            return None
        return 0.0
