"""`PROVIDER:MODEL` specs to chat clients, configured from the providers' usual variables."""

from __future__ import annotations

import os
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ralph.errors import ConfigError, PreflightError
from ralph.providers.anthropic import API_VERSION, AnthropicClient
from ralph.providers.anthropic import DEFAULT_BASE_URL as ANTHROPIC_URL
from ralph.providers.base import ChatClient
from ralph.providers.http import DEFAULT_DEADLINE, probe
from ralph.providers.ollama import OllamaClient, normalize_host
from ralph.providers.openai import DEFAULT_BASE_URL as OPENAI_URL
from ralph.providers.openai import OpenAIClient

PROVIDERS = ("openai", "anthropic", "ollama")
PROBE_TIMEOUT = 3.0  # seconds `ralph doctor` waits for a provider's endpoint
_EXAMPLE = {"openai": "gpt-4.1-mini", "anthropic": "claude-sonnet-4-5", "ollama": "qwen2.5-coder"}
_HINT = "use one of: " + ", ".join(f"{name}:MODEL" for name in PROVIDERS)


def parse_spec(spec: str) -> tuple[str, str]:
    """("openai", "gpt-4o") from "openai:gpt-4o"; the model may itself contain colons."""
    name, sep, model = spec.strip().partition(":")
    name = name.strip().lower()
    if not sep:
        raise ConfigError(f"{spec!r} is not a PROVIDER:MODEL spec", hint=_HINT)
    if name not in PROVIDERS:
        raise ConfigError(
            f"unknown provider {name!r} in {spec!r} (valid: {', '.join(PROVIDERS)})", hint=_HINT
        )
    if not model.strip():
        raise ConfigError(f"{spec!r} names no model", hint=f"e.g. {name}:{_EXAMPLE[name]}")
    return name, model.strip()


def make_client(
    spec: str,
    *,
    environ: Mapping[str, str] | None = None,
    deadline: float = DEFAULT_DEADLINE,
) -> ChatClient:
    """A ready client for `spec`; PreflightError when the key it needs is missing."""
    env = os.environ if environ is None else environ
    name, model = parse_spec(spec)
    if name == "openai":
        key = _get(env, "OPENAI_API_KEY")
        base_url = _get(env, "OPENAI_BASE_URL")
        if key is None and base_url is None:
            raise PreflightError(
                f"OPENAI_API_KEY is not set (needed for {spec})",
                hint="export OPENAI_API_KEY, or set OPENAI_BASE_URL to a local server",
            )
        return OpenAIClient(model, api_key=key, base_url=base_url, deadline=deadline)
    if name == "anthropic":
        key = _get(env, "ANTHROPIC_API_KEY")
        if key is None:
            raise PreflightError(
                f"ANTHROPIC_API_KEY is not set (needed for {spec})",
                hint="export ANTHROPIC_API_KEY, or choose another provider",
            )
        base_url = _get(env, "ANTHROPIC_BASE_URL")
        return AnthropicClient(model, api_key=key, base_url=base_url, deadline=deadline)
    return OllamaClient(model, host=_get(env, "OLLAMA_HOST"), deadline=deadline)


def provider_available(name: str, environ: Mapping[str, str] | None = None) -> bool:
    """Whether `name` looks configured here: for `--actor auto` to pick a provider."""
    env = os.environ if environ is None else environ
    if name == "openai":
        return _get(env, "OPENAI_API_KEY") is not None or _get(env, "OPENAI_BASE_URL") is not None
    if name == "anthropic":
        return _get(env, "ANTHROPIC_API_KEY") is not None
    if name == "ollama":
        return _get(env, "OLLAMA_HOST") is not None
    raise ConfigError(f"unknown provider {name!r} (valid: {', '.join(PROVIDERS)})", hint=_HINT)


def _get(env: Mapping[str, str], name: str) -> str | None:
    # Keys pasted from files often carry a trailing newline; an empty value means unset.
    value = env.get(name, "").strip()
    return value or None


@dataclass(frozen=True)
class ProviderProbe:
    """A provider as `ralph doctor` finds it: configured here, and does its endpoint answer?"""

    name: str
    configured: bool  # its key (openai: or base URL; ollama: host) is set
    key: str | None  # the variable holding its key, None when unset
    url: str | None  # what was asked; None: nothing was sent
    status: int | None  # the HTTP status; None: no answer (or nothing sent)
    detail: str

    @property
    def ok(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


def probe_providers(
    environ: Mapping[str, str] | None = None, *, timeout: float = PROBE_TIMEOUT
) -> list[ProviderProbe]:
    """Each provider's key and whether its endpoint answers a `GET .../models` (no tokens
    spent), in parallel. A provider without a key is not asked; Ollama's loopback default is."""
    env = os.environ if environ is None else environ
    with ThreadPoolExecutor(len(PROVIDERS), thread_name_prefix="ralph-probe") as pool:
        return list(pool.map(lambda name: _probe(name, env, timeout), PROVIDERS))


def probe_provider(
    name: str, environ: Mapping[str, str], *, timeout: float = PROBE_TIMEOUT
) -> ProviderProbe:
    """One provider's probe (`probe_providers`): for `ralph init`'s suggested actor."""
    return _probe(name, environ, timeout)


def _probe(name: str, env: Mapping[str, str], timeout: float) -> ProviderProbe:
    if name == "openai":
        key, base = _get(env, "OPENAI_API_KEY"), _get(env, "OPENAI_BASE_URL")
        if key is None and base is None:
            return ProviderProbe(name, False, None, None, None, "OPENAI_API_KEY is not set")
        url = f"{(base or OPENAI_URL).rstrip('/')}/models"
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        variable = "OPENAI_API_KEY" if key else None
    elif name == "anthropic":
        key = _get(env, "ANTHROPIC_API_KEY")
        if key is None:
            return ProviderProbe(name, False, None, None, None, "ANTHROPIC_API_KEY is not set")
        base = (_get(env, "ANTHROPIC_BASE_URL") or ANTHROPIC_URL).rstrip("/").removesuffix("/v1")
        url = f"{base}/v1/models"
        headers = {"x-api-key": key, "anthropic-version": API_VERSION}
        variable = "ANTHROPIC_API_KEY"
    else:
        key, variable, headers = None, None, {}
        url = f"{normalize_host(_get(env, 'OLLAMA_HOST'))}/api/tags"
    status, detail = probe(url, headers=headers, timeout=timeout, secrets=[key])
    configured = name != "ollama" or _get(env, "OLLAMA_HOST") is not None or status is not None
    return ProviderProbe(name, configured, variable, url, status, detail)
