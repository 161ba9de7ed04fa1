"""Test doubles: a local provider HTTP server, fake agent CLIs on a temporary PATH (agents/),
and in-process fakes of the loop's seams (loop.py)."""

from tests.fakes.provider_server import (
    FAKE_ANTHROPIC_KEY,
    FAKE_OPENAI_KEY,
    FakeProvider,
    RecordedRequest,
)

# What the fake agent CLIs in fakes/agents/ need to pass ralph's credentials preflight
# (actors/readiness.py): claude and aider and opencode take ANTHROPIC_API_KEY, codex
# OPENAI_API_KEY, gemini GEMINI_API_KEY. Tests set them with monkeypatch or in a child's env.
AGENT_CREDENTIALS = {
    "ANTHROPIC_API_KEY": FAKE_ANTHROPIC_KEY,
    "OPENAI_API_KEY": FAKE_OPENAI_KEY,
    "GEMINI_API_KEY": "fake-gemini-key-0000000000",
}

__all__ = [
    "AGENT_CREDENTIALS",
    "FAKE_ANTHROPIC_KEY",
    "FAKE_OPENAI_KEY",
    "FakeProvider",
    "RecordedRequest",
]
