"""The released agent CLIs ralph's presets were verified with, end to end, in one place.

`tests/contract/` runs exactly these versions (installed from npm by `.ci/agent-clis`) against
loopback fakes of each provider's wire API; `ralph doctor` says when an installed CLI is newer,
since a newer release may have changed the flags or the stream ralph reads.
"""

from __future__ import annotations

# preset -> (npm package, version verified)
VERIFIED: dict[str, tuple[str, str]] = {
    "claude": ("@anthropic-ai/claude-code", "2.1.197"),
    "codex": ("@openai/codex", "0.171.0"),
    "gemini": ("@google/gemini-cli", "0.61.0"),
}


def npm_specs() -> list[str]:
    """What `npm install` takes to install every verified CLI at its version."""
    return [f"{package}@{version}" for package, version in VERIFIED.values()]
