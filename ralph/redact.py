"""Secrets never reach disk or a reflector: environment values and common credential shapes."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
MIN_SECRET_LENGTH = 6
CREDENTIAL_SHAPES = re.compile(
    "|".join(
        [
            r"sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{20,}",  # OpenAI / Anthropic keys
            r"gh[pousr]_[A-Za-z0-9]{30,}",  # GitHub tokens
            r"github_pat_[A-Za-z0-9_]{30,}",
            r"AKIA[0-9A-Z]{16}",  # AWS access key id
            r"xox[abprs]-[A-Za-z0-9-]{10,}",  # Slack
            r"AIza[0-9A-Za-z_\-]{35}",  # Google API key
            r"(?i:bearer)\s+[A-Za-z0-9._~+/=\-]{20,}",
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
        ]
    )
)


@functools.lru_cache(maxsize=8)
def _secret_values(items: frozenset[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    found = [
        (value, name)
        for name, value in items
        if SECRET_NAME.search(name) and len(value) >= MIN_SECRET_LENGTH
    ]
    return tuple(sorted(found, key=lambda pair: -len(pair[0])))


def redact(text: str, environ: Mapping[str, str] | None = None) -> str:
    """Replace secret environment values with `[REDACTED:NAME]` and credential shapes too."""
    env = os.environ if environ is None else environ
    for value, name in _secret_values(frozenset(env.items())):
        if value in text:
            text = text.replace(value, f"[REDACTED:{name}]")
    return CREDENTIAL_SHAPES.sub("[REDACTED]", text)
