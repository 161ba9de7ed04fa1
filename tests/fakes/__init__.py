"""Test doubles that run for real: a local provider HTTP server (and other fakes beside it)."""

from tests.fakes.provider_server import (
    FAKE_ANTHROPIC_KEY,
    FAKE_OPENAI_KEY,
    FakeProvider,
    RecordedRequest,
)

__all__ = ["FAKE_ANTHROPIC_KEY", "FAKE_OPENAI_KEY", "FakeProvider", "RecordedRequest"]
