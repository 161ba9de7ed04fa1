"""LLM providers against a real local server: wire formats, retries, deadlines, secrets, prices."""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from email.utils import format_datetime

import httpx
import pytest

from ralph.errors import ConfigError, PreflightError, ProviderError
from ralph.providers.anthropic import JSON_INSTRUCTION, AnthropicClient
from ralph.providers.base import ChatClient, Message
from ralph.providers.http import parse_retry_after
from ralph.providers.ollama import OllamaClient, normalize_host
from ralph.providers.openai import OpenAIClient
from ralph.providers.pricing import cost, price
from ralph.providers.registry import make_client, parse_spec, provider_available
from ralph.usage_limits import UsageLimited
from tests.fakes import FakeProvider

KEY = "sk-test-THISKEYMUSTNEVERLEAK0123456789"
CHAT = [Message("system", "You are terse."), Message("user", "Say hello.")]


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """httpx honours proxy variables; requests to our 127.0.0.1 server must go direct."""
    for name in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider(default_text="default answer") as server:
        yield server


@pytest.fixture
def waits() -> list[float]:
    """Records the backoff waits instead of sleeping them."""
    return []


def openai(fake: FakeProvider, waits: list[float], **kwargs: object) -> OpenAIClient:
    options: dict[str, object] = {"api_key": KEY, "base_url": fake.openai_base_url}
    options.update(kwargs)
    return OpenAIClient("gpt-4o-mini", sleep=waits.append, **options)  # type: ignore[arg-type]


# -- OpenAI ---------------------------------------------------------------------------------


def test_openai_answer_usage_and_cost(fake: FakeProvider, waits: list[float]) -> None:
    fake.script(kind="answer", text="hello there", tokens_in=1000, tokens_out=200)
    response = openai(fake, waits).chat(CHAT)
    assert response.text == "hello there"
    assert (response.tokens_in, response.tokens_out) == (1000, 200)
    assert response.model == "gpt-4o-mini"
    assert response.cost_usd == pytest.approx((1000 * 0.15 + 200 * 0.60) / 1e6)


def test_openai_request_shape(fake: FakeProvider, waits: list[float]) -> None:
    openai(fake, waits).chat(CHAT, json_mode=True, max_tokens=64)
    (sent,) = fake.requests
    assert sent.method == "POST" and sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.headers["content-type"] == "application/json"
    assert sent.body["model"] == "gpt-4o-mini"
    assert sent.body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Say hello."},
    ]
    assert sent.body["response_format"] == {"type": "json_object"}
    assert sent.body["max_tokens"] == 64  # a custom (compatible) server gets the classic field


def test_openai_plain_mode_sends_no_optional_fields(fake: FakeProvider, waits: list[float]) -> None:
    openai(fake, waits).chat(CHAT)
    body = fake.requests[0].body
    assert set(body) == {"model", "messages"}


@pytest.mark.parametrize("suffix", ["/v1", "/v1/"])
def test_openai_base_url_with_or_without_slash(
    fake: FakeProvider, waits: list[float], suffix: str
) -> None:
    openai(fake, waits, base_url=fake.url + suffix).chat(CHAT)
    assert fake.requests[0].path == "/v1/chat/completions"


def test_openai_without_key_sends_no_authorization(fake: FakeProvider, waits: list[float]) -> None:
    openai(fake, waits, api_key=None).chat(CHAT)
    assert "authorization" not in fake.requests[0].headers


def test_openai_default_endpoint_uses_max_completion_tokens() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = {"model": "o4-mini-2025-04-16", "choices": [{"message": {"content": "ok"}}]}
        return httpx.Response(200, json=answer)

    client = OpenAIClient("o4-mini", api_key=KEY, transport=httpx.MockTransport(handler))
    response = client.chat(CHAT, max_tokens=10)
    assert str(seen[0].url) == "https://api.openai.com/v1/chat/completions"
    body = json.loads(seen[0].content)
    assert body["max_completion_tokens"] == 10 and "max_tokens" not in body
    assert response.model == "o4-mini-2025-04-16"
    assert response.tokens_in is None and response.cost_usd is None  # no usage: unknown, not 0


def test_openai_null_content_is_an_error(fake: FakeProvider, waits: list[float]) -> None:
    refusal = {"choices": [{"message": {"content": None, "refusal": "I can't help with that."}}]}
    fake.script(kind="raw", body=refusal)
    with pytest.raises(ProviderError, match="refused: I can't help"):
        openai(fake, waits).chat(CHAT)


# -- Anthropic ------------------------------------------------------------------------------


def anthropic(fake: FakeProvider, waits: list[float], **kwargs: object) -> AnthropicClient:
    options: dict[str, object] = {"api_key": KEY, "base_url": fake.url}
    options.update(kwargs)
    return AnthropicClient("claude-sonnet-4-20250514", sleep=waits.append, **options)  # type: ignore[arg-type]


def test_anthropic_answer_usage_and_cost(fake: FakeProvider, waits: list[float]) -> None:
    fake.script(kind="answer", text="hi", tokens_in=2000, tokens_out=100)
    response = anthropic(fake, waits).chat(CHAT)
    assert response.text == "hi"
    assert (response.tokens_in, response.tokens_out) == (2000, 100)
    assert response.cost_usd == pytest.approx((2000 * 3 + 100 * 15) / 1e6)


def test_anthropic_request_shape(fake: FakeProvider, waits: list[float]) -> None:
    anthropic(fake, waits).chat(CHAT)
    (sent,) = fake.requests
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert sent.headers["content-type"] == "application/json"
    assert "authorization" not in sent.headers
    assert sent.body["system"] == "You are terse."
    assert sent.body["messages"] == [{"role": "user", "content": "Say hello."}]
    assert sent.body["max_tokens"] == 4096


def test_anthropic_json_mode_instructs_instead_of_sending_a_flag(
    fake: FakeProvider, waits: list[float]
) -> None:
    anthropic(fake, waits).chat([Message("user", "Reply in JSON.")], json_mode=True, max_tokens=99)
    body = fake.requests[0].body
    assert set(body) == {"model", "max_tokens", "messages", "system"}
    assert body["system"] == JSON_INSTRUCTION
    assert body["max_tokens"] == 99


def test_anthropic_merges_turns_and_tolerates_v1_base(
    fake: FakeProvider, waits: list[float]
) -> None:
    turns = [Message("user", "a"), Message("user", "b"), Message("assistant", "c")]
    anthropic(fake, waits, base_url=fake.url + "/v1/").chat(turns)
    sent = fake.requests[0]
    assert sent.path == "/v1/messages"
    assert "system" not in sent.body
    assert sent.body["messages"] == [
        {"role": "user", "content": "a\n\nb"},
        {"role": "assistant", "content": "c"},
    ]


def test_anthropic_concatenates_text_blocks_only(fake: FakeProvider, waits: list[float]) -> None:
    blocks = [
        {"type": "text", "text": "one "},
        {"type": "tool_use", "id": "t1", "name": "x", "input": {}},
        {"type": "text", "text": "two"},
    ]
    fake.script(kind="raw", body={"model": "claude-sonnet-4-20250514", "content": blocks})
    response = anthropic(fake, waits).chat(CHAT)
    assert response.text == "one two"
    assert response.tokens_in is None and response.cost_usd is None


def test_anthropic_missing_content_names_the_provider(
    fake: FakeProvider, waits: list[float]
) -> None:
    fake.script(kind="raw", body={"id": "msg_1", "type": "message"})
    with pytest.raises(ProviderError, match=r"anthropic answered without `content`"):
        anthropic(fake, waits).chat(CHAT)


# -- Ollama ---------------------------------------------------------------------------------


def test_ollama_answer_request_shape_and_zero_cost(fake: FakeProvider, waits: list[float]) -> None:
    fake.script(kind="answer", text='{"ok": true}', tokens_in=30, tokens_out=7)
    client = OllamaClient("qwen2.5-coder:7b", host=fake.url, sleep=waits.append)
    response = client.chat(CHAT, json_mode=True, max_tokens=128)
    sent = fake.requests[0]
    assert sent.path == "/api/chat"
    assert sent.body["stream"] is False
    assert sent.body["format"] == "json"
    assert sent.body["options"] == {"num_predict": 128}
    assert sent.body["model"] == "qwen2.5-coder:7b"
    assert response.text == '{"ok": true}'
    assert (response.tokens_in, response.tokens_out) == (30, 7)
    assert response.cost_usd == 0.0  # local: a known zero


def test_ollama_plain_mode_and_cloud_cost_unknown(fake: FakeProvider, waits: list[float]) -> None:
    client = OllamaClient("gpt-oss:120b-cloud", host=fake.url, sleep=waits.append)
    response = client.chat(CHAT)
    body = fake.requests[0].body
    assert "format" not in body and "options" not in body
    assert response.cost_usd is None


def test_ollama_host_without_scheme_end_to_end(fake: FakeProvider) -> None:
    client = make_client("ollama:llama3.1:8b", environ={"OLLAMA_HOST": f"127.0.0.1:{fake.port}"})
    assert client.chat(CHAT).text == "default answer"
    assert fake.requests[0].body["model"] == "llama3.1:8b"


@pytest.mark.parametrize(
    ("host", "url"),
    [
        (None, "http://127.0.0.1:11434"),
        ("", "http://127.0.0.1:11434"),
        ("localhost:11434", "http://localhost:11434"),
        ("localhost", "http://localhost:11434"),
        ("0.0.0.0", "http://127.0.0.1:11434"),
        (":8080", "http://127.0.0.1:8080"),
        ("gpu-box:9999/ollama/", "http://gpu-box:9999/ollama"),
        ("https://ollama.example.com", "https://ollama.example.com"),
        ("http://10.0.0.5:11434/", "http://10.0.0.5:11434"),
    ],
)
def test_normalize_ollama_host(host: str | None, url: str) -> None:
    assert normalize_host(host) == url


def test_ollama_missing_model_hints_at_pull(fake: FakeProvider, waits: list[float]) -> None:
    fake.script(status=404, message='model "nope" not found, try pulling it first')
    with pytest.raises(ProviderError) as caught:
        OllamaClient("nope", host=fake.url, sleep=waits.append).chat(CHAT)
    assert "not found" in caught.value.message
    assert caught.value.hint is not None and "ollama pull nope" in caught.value.hint
    assert waits == []


# -- retries and deadlines ------------------------------------------------------------------


def test_429_with_retry_after_then_success(fake: FakeProvider, waits: list[float]) -> None:
    fake.script(status=429, headers={"Retry-After": "3"}).script(kind="answer", text="finally")
    response = openai(fake, waits).chat(CHAT)
    assert response.text == "finally"
    assert waits == [3.0]  # exactly what the server asked for
    assert len(fake.requests) == 2


def test_retry_after_ms_wins(fake: FakeProvider, waits: list[float]) -> None:
    fake.script(status=429, headers={"retry-after-ms": "250", "Retry-After": "9"})
    anthropic(fake, waits).chat(CHAT)
    assert waits == [0.25]


@pytest.mark.parametrize("status", [500, 502, 503, 529])
def test_server_error_then_success(fake: FakeProvider, waits: list[float], status: int) -> None:
    fake.script(status=status)
    assert anthropic(fake, waits).chat(CHAT).text == "default answer"
    assert len(waits) == 1 and 0.25 <= waits[0] <= 0.5  # first backoff: base 0.5s, jittered
    assert len(fake.requests) == 2


def test_backoff_grows_exponentially(fake: FakeProvider, waits: list[float]) -> None:
    for _ in range(4):
        fake.script(status=503)
    openai(fake, waits).chat(CHAT)
    assert len(waits) == 4
    for attempt, wait in enumerate(waits):
        ceiling = 0.5 * 2**attempt
        assert ceiling / 2 <= wait <= ceiling


def test_dropped_connection_then_success(fake: FakeProvider, waits: list[float]) -> None:
    fake.script(kind="drop").script(kind="answer", text="recovered")
    assert openai(fake, waits).chat(CHAT).text == "recovered"
    assert len(waits) == 1 and len(fake.requests) == 2


def test_connection_refused_gives_up_after_max_attempts(waits: list[float]) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed when the block ends: nothing listens there
    client = OllamaClient("m", host=f"127.0.0.1:{port}", sleep=waits.append, max_attempts=3)
    with pytest.raises(ProviderError, match=r"after 3 attempts .*cannot connect"):
        client.chat(CHAT)
    assert len(waits) == 2


def test_exhausted_attempts_report_the_last_error(fake: FakeProvider, waits: list[float]) -> None:
    for _ in range(3):
        fake.script(status=500, message="upstream exploded")
    with pytest.raises(ProviderError, match=r"after 3 attempt.*HTTP 500: upstream exploded"):
        openai(fake, waits, max_attempts=3).chat(CHAT)
    assert len(fake.requests) == 3 and len(waits) == 2


def test_malformed_json_is_a_provider_error(fake: FakeProvider, waits: list[float]) -> None:
    fake.script(kind="malformed")
    with pytest.raises(ProviderError, match="openai answered HTTP 200 with malformed JSON"):
        openai(fake, waits).chat(CHAT)
    assert len(fake.requests) == 1 and waits == []


def test_slow_answer_past_the_deadline(fake: FakeProvider, waits: list[float]) -> None:
    """The server holds its answer far past the deadline (until the test ends). Robust on a
    busy machine: the deadline leaves room for a slow connect, and the server is given all the
    time it needs to record the request it read (it may do so after the client gave up)."""
    fake.script(kind="delay", seconds=600, text="too late")
    with pytest.raises(ProviderError, match=r"no answer within the 2s deadline.*timed out"):
        openai(fake, waits, deadline=2.0).chat(CHAT)
    deadline = time.monotonic() + 60
    while not fake.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(fake.requests) == 1 and waits == []


def test_retry_after_beyond_the_deadline_is_a_usage_limit(
    fake: FakeProvider, waits: list[float]
) -> None:
    """A 429 whose wait the deadline cannot hold is not slept: it is a usage limit, with its
    reset, which the loop waits out (loop/limits.py)."""
    fake.script(status=429, headers={"Retry-After": "600"})
    before = time.time()
    with pytest.raises(UsageLimited) as caught:
        openai(fake, waits).chat(CHAT)
    assert waits == [] and len(fake.requests) == 1
    limit = caught.value.limit
    assert limit.source == "openai" and "HTTP 429" in limit.message
    assert limit.resets_at is not None and before + 600 <= limit.resets_at <= time.time() + 600


def test_anthropic_reset_headers_are_a_usage_limit(fake: FakeProvider, waits: list[float]) -> None:
    """No retry-after: Anthropic's reset header of the limit with nothing remaining says when."""
    soon = datetime.fromtimestamp(time.time() + 30, UTC).isoformat()
    later = datetime.fromtimestamp(time.time() + 3 * 3600, UTC).replace(microsecond=0)
    fake.script(
        status=429,
        message="Number of request tokens has exceeded your rate limit",
        headers={
            "anthropic-ratelimit-requests-remaining": "12",
            "anthropic-ratelimit-requests-reset": soon,
            "anthropic-ratelimit-tokens-remaining": "0",
            "anthropic-ratelimit-tokens-reset": later.isoformat().replace("+00:00", "Z"),
        },
    )
    with pytest.raises(UsageLimited) as caught:
        anthropic(fake, waits).chat(CHAT)
    assert caught.value.limit.resets_at == later.timestamp()
    assert "exceeded your rate limit" in caught.value.limit.message and waits == []


def test_401_fails_at_once_without_the_key(fake: FakeProvider, waits: list[float]) -> None:
    fake.script(status=401, message=f"Incorrect API key provided: {KEY}.")
    with pytest.raises(ProviderError) as caught:
        openai(fake, waits).chat(CHAT)
    error = caught.value
    assert "HTTP 401" in error.message and "Incorrect API key provided" in error.message
    assert KEY not in str(error) and KEY not in repr(error)
    assert error.hint == "check OPENAI_API_KEY"
    assert waits == [] and len(fake.requests) == 1


def test_400_is_not_retried(fake: FakeProvider, waits: list[float]) -> None:
    fake.script(status=400, message="messages: field required")
    with pytest.raises(ProviderError, match="anthropic rejected the request: HTTP 400: messages"):
        anthropic(fake, waits).chat(CHAT)
    assert len(fake.requests) == 1


def test_exhausted_quota_429_is_not_retried(fake: FakeProvider, waits: list[float]) -> None:
    """An empty account is a usage limit no wait ends: no reset, the loop pauses for a person."""
    fake.script(status=429, code="insufficient_quota", message="You exceeded your current quota")
    with pytest.raises(UsageLimited, match="exceeded your current quota") as caught:
        openai(fake, waits).chat(CHAT)
    assert waits == [] and len(fake.requests) == 1
    assert caught.value.limit.resets_at is None


def test_x_should_retry_header_overrides_status(fake: FakeProvider, waits: list[float]) -> None:
    fake.script(status=409, headers={"x-should-retry": "true"})
    assert openai(fake, waits).chat(CHAT).text == "default answer"
    assert len(waits) == 1


def test_key_never_in_repr_or_logs(
    fake: FakeProvider, waits: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    fake.script(status=429, message=f"slow down {KEY}")
    clients: list[ChatClient] = [openai(fake, waits), anthropic(fake, waits)]
    for client in clients:
        client.chat(CHAT)
        assert KEY not in repr(client) and KEY not in repr(vars(client).get("_http"))
    assert "retry 2/6" in caplog.text
    assert KEY not in caplog.text


def test_parse_retry_after_forms() -> None:
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
    later = format_datetime(datetime(2025, 1, 1, 12, 0, 7, tzinfo=UTC), usegmt=True)
    assert parse_retry_after({"Retry-After": "2"}) == 2.0
    assert parse_retry_after({"retry-after": "1.5"}) == 1.5
    assert parse_retry_after({"Retry-After": later}, now=now.timestamp()) == pytest.approx(7.0)
    assert parse_retry_after({"Retry-After": "-4"}) == 0.0
    assert parse_retry_after({"Retry-After-Ms": "40", "Retry-After": "9"}) == 0.04
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert parse_retry_after({"Retry-After": "inf"}) is None
    assert parse_retry_after({}) is None


# -- pricing --------------------------------------------------------------------------------


def test_pricing_lookups() -> None:
    assert price("gpt-4o") is not None and price("gpt-4o") == price("GPT-4o")
    assert price("claude-sonnet-4-20250514") == price("claude-sonnet-4")
    assert price("gpt-4o-mini-2024-07-18") == price("gpt-4o-mini")  # longest prefix wins
    assert price("gpt-4o-2024-08-06") == price("gpt-4o")
    assert price("claude-3-5-haiku-latest") == price("claude-3-5-haiku")
    assert price("openai/gpt-4.1") == price("gpt-4.1")
    assert price("claude-opus-4-5-20251101") != price("claude-opus-4")
    assert price("claude-opus-4-6") is None  # a newer model is unknown, not its ancestor
    assert price("llama3.1:8b") is None


def test_cost() -> None:
    assert cost("claude-sonnet-4-5", 1_000_000, 1_000_000) == pytest.approx(18.0)
    assert cost("gpt-5-mini", 4000, 1000) == pytest.approx((4000 * 0.25 + 1000 * 2.0) / 1e6)
    assert cost("totally-unknown-model", 10, 10) is None
    assert cost("gpt-4o", None, 10) is None


# -- registry -------------------------------------------------------------------------------


def test_make_client_for_each_provider(fake: FakeProvider) -> None:
    env = fake.environ()
    for spec, expected in [
        ("openai:gpt-4.1", OpenAIClient),
        ("anthropic:claude-haiku-4-5", AnthropicClient),
        ("ollama:qwen2.5-coder:7b", OllamaClient),
    ]:
        client = make_client(spec, environ=env)
        assert type(client) is expected
        assert client.chat(CHAT).text == "default answer"
    assert [r.path for r in fake.requests] == [
        "/v1/chat/completions",
        "/v1/messages",
        "/api/chat",
    ]
    assert fake.requests[2].body["model"] == "qwen2.5-coder:7b"


def test_make_client_deadline(fake: FakeProvider) -> None:
    fake.script(kind="delay", seconds=30)
    client = make_client("anthropic:claude-sonnet-4-5", environ=fake.environ(), deadline=0.2)
    with pytest.raises(ProviderError, match=r"0\.2s deadline"):
        client.chat(CHAT)


def test_unknown_provider_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigError) as caught:
        make_client("mistral:large", environ={})
    assert "openai, anthropic, ollama" in caught.value.message
    with pytest.raises(ConfigError, match="names no model"):
        parse_spec("openai:")
    with pytest.raises(ConfigError, match="not a PROVIDER:MODEL"):
        parse_spec("gpt-4o")


def test_missing_keys_are_preflight_errors() -> None:
    with pytest.raises(PreflightError, match="ANTHROPIC_API_KEY"):
        make_client("anthropic:claude-sonnet-4-5", environ={"ANTHROPIC_API_KEY": "  "})
    with pytest.raises(PreflightError, match="OPENAI_API_KEY"):
        make_client("openai:gpt-4o", environ={})
    local = make_client("openai:llama3", environ={"OPENAI_BASE_URL": "http://127.0.0.1:8000/v1"})
    assert isinstance(local, OpenAIClient) and local.base_url == "http://127.0.0.1:8000/v1"
    assert isinstance(make_client("ollama:llama3", environ={}), OllamaClient)


def test_provider_available() -> None:
    env = {"ANTHROPIC_API_KEY": "x", "OPENAI_API_KEY": ""}
    assert provider_available("anthropic", env)
    assert not provider_available("openai", env)
    assert provider_available("openai", {"OPENAI_BASE_URL": "http://127.0.0.1:1/v1"})
    assert not provider_available("ollama", env)
    assert provider_available("ollama", {"OLLAMA_HOST": "localhost"})
    with pytest.raises(ConfigError):
        provider_available("cohere", env)


# -- the fake server itself -----------------------------------------------------------------


def test_fake_unknown_path_consumes_nothing_and_lists_models(fake: FakeProvider) -> None:
    fake.script(kind="answer", text="kept")
    assert httpx.post(fake.url + "/v2/elsewhere", json={}).status_code == 404
    tags = httpx.get(fake.url + "/api/tags").json()
    assert tags["models"][0]["name"] == "fake-model"
    assert fake.pending == 1
    assert fake.chat_requests == []
    assert [r.path for r in fake.requests] == ["/v2/elsewhere", "/api/tags"]


def test_fake_default_answer_may_depend_on_the_request(fake: FakeProvider) -> None:
    fake.default_text = lambda request: f"echo: {request.messages[-1]['content']}"
    client = make_client("openai:gpt-4o", environ=fake.environ())
    assert client.chat([Message("user", "ping")]).text == "echo: ping"
    assert "ping" in fake.requests[0].prompt
