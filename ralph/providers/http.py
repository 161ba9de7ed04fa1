"""One JSON-over-HTTP helper for every provider: retries, backoff, Retry-After, a hard deadline.

Providers differ in paths, headers and bodies, not in how a flaky network should be handled, so
that policy lives here once. httpx is imported lazily: `ralph --help` never pays for it.
"""

from __future__ import annotations

import email.utils
import logging
import math
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ralph import __version__
from ralph.errors import ProviderError
from ralph.glyphs import plural
from ralph.redact import redact, redact_data
from ralph.usage_limits import UsageLimit, UsageLimited, from_http

if TYPE_CHECKING:
    import httpx

log = logging.getLogger("ralph.providers")

USER_AGENT = f"ralph/{__version__}"
DEFAULT_DEADLINE = 120.0
DEFAULT_MAX_ATTEMPTS = 6
MAX_MESSAGE = 300  # characters of a provider's error message worth showing on one line

Sleep = Callable[[float], None]


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds the server asked us to wait, or None when it did not say.

    `retry-after-ms` (OpenAI, Anthropic) wins over `Retry-After`, which is either seconds or an
    HTTP date (RFC 9110). `now` is a Unix time, injectable so dates can be tested.
    """
    lowered = {name.lower(): value.strip() for name, value in headers.items()}
    millis = _finite(lowered.get("retry-after-ms"))
    if millis is not None:
        return max(0.0, millis / 1000)
    value = lowered.get("retry-after")
    if not value:
        return None
    seconds = _finite(value)
    if seconds is not None:
        return max(0.0, seconds)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


def _finite(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def field(data: Any, path: Sequence[str | int], provider: str) -> Any:
    """`data[path[0]][path[1]]...`, or a ProviderError naming the provider and the missing field."""
    current = data
    for key in path:
        if isinstance(key, int):
            if not isinstance(current, list) or not -len(current) <= key < len(current):
                raise _missing(data, path, provider)
        elif not isinstance(current, dict) or key not in current:
            raise _missing(data, path, provider)
        current = current[key]
    return current


def _missing(data: Any, path: Sequence[str | int], provider: str) -> ProviderError:
    dotted = ".".join(str(key) for key in path)
    detail = ""
    if isinstance(data, dict) and data.get("error"):
        detail = f" (it said: {_one_line(_error_text(data) or '')})"
    return ProviderError(
        f"{provider} answered without `{dotted}`{detail}",
        hint="the endpoint may not speak this provider's API; check its base URL",
    )


def optional_int(data: Any, *path: str) -> int | None:
    """A token count that a server may leave out: None when absent or not an integer."""
    current = data
    for key in path:
        if not isinstance(current, dict):
            return None
        current = current.get(key)
    if isinstance(current, int) and not isinstance(current, bool) and current >= 0:
        return current
    return None


class JsonPoster:
    """POSTs a JSON body and returns the decoded JSON object, retrying what is worth retrying.

    Retried: 408, 429, 5xx, connection errors and timeouts, with exponential backoff and jitter,
    or exactly the wait the server asked for (Retry-After). Never retried: other 4xx, a 429 for
    an exhausted quota, a malformed success body. Every request's timeout and every sleep fit
    inside one total deadline; a retry that could only start after it is not attempted. A 429
    that cannot be waited out within the deadline (its reset beyond it, an exhausted quota) is
    a usage limit: `UsageLimited`, which the loop waits out.
    """

    def __init__(
        self,
        provider: str,
        *,
        deadline: float = DEFAULT_DEADLINE,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        sleep: Sleep | None = None,
        transport: httpx.BaseTransport | None = None,
        secrets: Iterable[str | None] = (),
        base_delay: float = 0.5,
        max_delay: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if deadline <= 0:
            raise ValueError("deadline must be positive")
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.provider = provider
        self.deadline = deadline
        self.max_attempts = max_attempts
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._sleep: Sleep = sleep if sleep is not None else time.sleep
        self._transport = transport
        self._secrets = tuple(sorted({s for s in secrets if s}, key=len, reverse=True))
        self._clock = clock

    def __repr__(self) -> str:
        return (
            f"JsonPoster(provider={self.provider!r}, deadline={self.deadline!r}, "
            f"max_attempts={self.max_attempts!r})"
        )

    def post(
        self,
        url: str,
        body: Mapping[str, Any],
        *,
        headers: Mapping[str, str],
        hints: Mapping[int, str] | None = None,
    ) -> dict[str, Any]:
        """The decoded JSON object of a 2xx answer; ProviderError for everything else.

        The body is redacted (ralph.redact) like everything else that leaves ralph."""
        import httpx

        body = redact_data(body)
        last, attempt = "no request was sent", 0
        with httpx.Client(transport=self._transport, headers={"User-Agent": USER_AGENT}) as client:
            # the deadline is the provider's: importing httpx and setting up TLS (slow on a busy
            # machine) must not use it up before the first request is sent
            end = self._clock() + self.deadline
            limit: UsageLimit | None = None
            while attempt < self.max_attempts and end - self._clock() > 0:
                attempt += 1
                timeout = end - self._clock()
                outcome = self._attempt(client, attempt, timeout, url, body, headers, hints)
                if isinstance(outcome, dict):
                    return outcome
                last, wait, limit = outcome
                remaining = end - self._clock()
                if attempt >= self.max_attempts or remaining <= 0:
                    break
                if wait >= remaining and limit is not None:
                    raise UsageLimited(limit)
                if wait >= remaining:
                    raise ProviderError(
                        f"{self.provider}: gave up after {plural(attempt, 'attempt')}; "
                        f"waiting {wait:.1f}s more would pass the {self.deadline:g}s deadline "
                        f"(last: {last})",
                        hint="retry later, or raise the provider deadline",
                    )
                retry = f"retry {attempt + 1}/{self.max_attempts} in {wait:.2f}s"
                log.info("%s: %s; %s", self.provider, last, retry)
                self._sleep(wait)
        if attempt < self.max_attempts:
            message = f"{self.provider}: no answer within the {self.deadline:g}s deadline"
        else:
            message = f"{self.provider}: no usable answer after {plural(attempt, 'attempt')}"
        raise ProviderError(f"{message} (last: {last})", hint="check the endpoint and retry later")

    def _attempt(
        self,
        client: httpx.Client,
        attempt: int,
        timeout: float,
        url: str,
        body: Mapping[str, Any],
        headers: Mapping[str, str],
        hints: Mapping[int, str] | None,
    ) -> dict[str, Any] | tuple[str, float, UsageLimit | None]:
        """One request: the answer, or (what went wrong, how long to wait, the usage limit a
        429 reported) if worth retrying."""
        import httpx

        try:
            response = client.post(url, json=body, headers=headers, timeout=timeout)
        except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
            raise ProviderError(
                f"{self.provider}: invalid endpoint URL {url!r}",
                hint="check the base URL environment variable",
            ) from exc
        except (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError) as exc:
            return self._scrub(_describe(exc, url)), self._backoff(attempt), None
        if response.is_success:
            return self._decode(response)
        payload = _json_or_none(response)
        status = response.status_code
        problem = self._scrub(f"HTTP {status}: {_message(response, payload)}")
        server_wait = parse_retry_after(response.headers)
        limit = from_http(
            self.provider,
            status,
            response.headers,
            problem,
            retry_after=server_wait,
            quota_gone=_error_code(payload) == "insufficient_quota",
        )
        if not _should_retry(response, payload):
            if limit is not None:
                raise UsageLimited(limit)
            hint = (hints or {}).get(status)
            raise ProviderError(f"{self.provider} rejected the request: {problem}", hint)
        if server_wait is None and limit is not None and limit.resets_at is not None:
            server_wait = max(0.0, limit.resets_at - time.time())  # Anthropic's reset headers
        wait = server_wait if server_wait is not None else self._backoff(attempt)
        return problem, wait, limit

    def _backoff(self, attempt: int) -> float:
        # "Equal jitter": half deterministic, half random, so waits grow yet clients spread out.
        ceiling = min(self.max_delay, self.base_delay * 2.0 ** (attempt - 1))
        return ceiling / 2 + random.random() * ceiling / 2

    def _decode(self, response: httpx.Response) -> dict[str, Any]:
        try:
            data = response.json()
        except (ValueError, RecursionError):  # RecursionError: nested too deep
            raise ProviderError(
                f"{self.provider} answered HTTP {response.status_code} with malformed JSON",
                hint="the endpoint may not speak this provider's API; check its base URL",
            ) from None
        if not isinstance(data, dict):
            raise ProviderError(f"{self.provider} answered with JSON that is not an object")
        return data

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "[REDACTED]")
        return redact(text)


def _json_or_none(response: httpx.Response) -> Any:
    try:
        return response.json()
    except (ValueError, RecursionError):
        return None


def _error_text(payload: Any) -> str | None:
    if not isinstance(payload, dict):
        return None
    error = payload.get("error")
    if isinstance(error, str):  # Ollama: {"error": "..."}
        return error
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])  # OpenAI and Anthropic: {"error": {"message": ...}}
    message = payload.get("message") or payload.get("detail")
    return message if isinstance(message, str) else None


def _error_code(payload: Any) -> str | None:
    error = payload.get("error") if isinstance(payload, dict) else None
    if not isinstance(error, dict):
        return None
    code = error.get("code") or error.get("type")
    return code if isinstance(code, str) else None


def _message(response: httpx.Response, payload: Any) -> str:
    text = _error_text(payload) or response.text or response.reason_phrase or "no details"
    return _one_line(text)


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= MAX_MESSAGE else flat[: MAX_MESSAGE - 1] + "…"


def _should_retry(response: httpx.Response, payload: Any) -> bool:
    verdict = str(response.headers.get("x-should-retry", "")).lower()  # OpenAI/Anthropic override
    if verdict in ("true", "false"):
        return verdict == "true"
    status = response.status_code
    if status == 429 and _error_code(payload) == "insufficient_quota":
        return False  # an empty account does not refill by waiting
    return status in (408, 429) or 500 <= status <= 599


def _describe(exc: Exception, url: str) -> str:
    import httpx

    if isinstance(exc, httpx.TimeoutException):
        return f"timed out talking to {url}"
    if isinstance(exc, httpx.ConnectError):
        return f"cannot connect to {url} ({_one_line(str(exc)) or 'connection failed'})"
    return f"connection to {url} failed ({_one_line(str(exc)) or type(exc).__name__})"


def probe(
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    timeout: float = 3.0,
    secrets: Iterable[str | None] = (),
) -> tuple[int | None, str]:
    """One GET with a short timeout, no retry: (HTTP status, None when no answer; a one-line
    description). For `ralph doctor`: is the endpoint there, does it take the key?

    Loopback-safe: a proxy from the environment is not used for localhost (a proxy cannot reach
    the user's own machine), and redirects are not followed (a key never goes elsewhere)."""
    import httpx

    host = (urlsplit(url).hostname or "").lower()
    loopback = host in ("localhost", "::1") or host.startswith("127.")
    try:
        with httpx.Client(
            headers={"User-Agent": USER_AGENT}, trust_env=not loopback, follow_redirects=False
        ) as client:
            response = client.get(url, headers=dict(headers or {}), timeout=timeout)
    except (httpx.UnsupportedProtocol, httpx.InvalidURL):
        return None, f"invalid URL {url!r}"
    except httpx.HTTPError as exc:
        return None, _scrubbed(_describe(exc, url), secrets)
    payload = _json_or_none(response)
    text = f"HTTP {response.status_code}"
    if not response.is_success:
        text += f": {_message(response, payload)}"
    return response.status_code, _scrubbed(text, secrets)


def _scrubbed(text: str, secrets: Iterable[str | None]) -> str:
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(secret, "[REDACTED]")
    return redact(text)


class HttpChatClient:
    """What every provider's client shares: its model and one `JsonPoster` (retries, backoff,
    the deadline; `secrets` are kept out of its errors). A subclass adds its endpoint and wire
    format and passes the transport options through unchanged."""

    provider = "http"

    def __init__(
        self,
        model: str,
        *,
        secrets: Iterable[str | None] = (),
        deadline: float = DEFAULT_DEADLINE,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        sleep: Sleep | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.model = model
        self._http = JsonPoster(
            self.provider,
            deadline=deadline,
            max_attempts=max_attempts,
            sleep=sleep,
            transport=transport,
            secrets=secrets,
        )
