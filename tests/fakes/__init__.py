"""Test doubles: a local provider HTTP server, fake agent CLIs on a temporary PATH (agents/),
and in-process fakes of the loop's seams (loop.py)."""

from tests.fakes.provider_server import (
    FAKE_ANTHROPIC_KEY,
    FAKE_OPENAI_KEY,
    FakeProvider,
    RecordedRequest,
)

__all__ = ["FAKE_ANTHROPIC_KEY", "FAKE_OPENAI_KEY", "FakeProvider", "RecordedRequest"]
