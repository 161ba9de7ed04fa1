"""Secrets never leave ralph: environment values and common credential shapes, however printed.

The one rule, applied wherever a string leaves ralph's memory (files it writes, what it hands a
subprocess, what it prints, what it sends a model): the value of every environment variable
named like a secret is replaced by `[REDACTED:NAME]`, in the forms programs commonly print it —
as is, JSON-escaped, as a Python `repr`, URL-encoded (`quote`, `quote_plus`, either hex case),
shell-quoted, and each of those inside a JSON string once more (an agent's JSON event quoting a
tool's output) — and every credential-shaped token by `[REDACTED]`.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, quote_plus

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
MIN_SECRET_LENGTH = 6
SHAPES = [
    r"sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{20,}",  # OpenAI / Anthropic keys
    r"gh[pousr]_[A-Za-z0-9]{30,}",  # GitHub tokens
    r"github_pat_[A-Za-z0-9_]{30,}",
    r"(?:AKIA|ASIA)[0-9A-Z]{16}",  # AWS access key id
    r"(?i:aws_secret_access_key)[\"']?\s*[=:]\s*[\"']?[A-Za-z0-9/+=]{40}",
    r"xox[abprs]-[A-Za-z0-9-]{10,}",  # Slack
    r"AIza[0-9A-Za-z_\-]{35}",  # Google API key
    r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",  # JWT
    r"(?i:bearer)\s+[A-Za-z0-9._~+/=\-]{20,}",
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
]
CREDENTIAL_SHAPES = re.compile("|".join(SHAPES))
# Whether any shape occurs at all, asked of each shape alone: one that starts with a literal is
# found by a fast scan for it, where the alternation above tries every branch at every position
# (5x slower on an agent's output, which is mostly free of credentials). The two caseless ones
# are looked for only when their word is there.
_SHAPE_FINDERS = [re.compile(shape) for shape in SHAPES if not shape.startswith("(?i:")]
_CASELESS_FINDERS = {
    shape[4 : shape.index(")")]: re.compile(shape) for shape in SHAPES if shape.startswith("(?i:")
}
PERCENT = re.compile(r"%[0-9A-F]{2}")


def encodings(value: str) -> set[str]:
    """`value` as programs print it: raw, JSON, repr, URL-encoded, shell-quoted, and each of
    those inside a JSON string."""
    url = {quote(value, safe=""), quote(value), quote_plus(value, safe="")}
    url |= {PERCENT.sub(lambda m: m.group().lower(), form) for form in url}
    forms = {
        value,
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        repr(value)[1:-1],
        shlex.quote(value),
        *url,
    }
    forms |= {json.dumps(form, ensure_ascii=False)[1:-1] for form in list(forms)}
    return {form for form in forms if len(form) >= MIN_SECRET_LENGTH}


def _secrets(environ: Mapping[str, str] | None) -> tuple[tuple[str, str], ...]:
    """(name, value) of every variable named like a secret, long enough to be one."""
    if environ is None:
        raw = getattr(os.environ, "_data", None)  # CPython's own dict behind os.environ
        if isinstance(raw, dict):  # ~2 us to key a cache on, where reading it all takes ~100
            return _environ_secrets(tuple(raw.items()))
    env = os.environ if environ is None else environ
    found = [
        (name, value)
        for name, value in env.items()
        if len(value) >= MIN_SECRET_LENGTH and SECRET_NAME.search(name)
    ]
    return tuple(sorted(found))


@functools.lru_cache(maxsize=4)
def _environ_secrets(raw: tuple[tuple[Any, Any], ...]) -> tuple[tuple[str, str], ...]:
    """`_secrets` of the process environment, read again only when it changed (a loop redacts
    some 20 strings an iteration)."""
    text = {_text(name): _text(value) for name, value in raw}
    return _secrets(text)


def _text(item: Any) -> str:
    return os.fsdecode(item) if isinstance(item, bytes) else str(item)


@functools.lru_cache(maxsize=16)
def _forms(secrets: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """(form, variable name) of every secret, longest form first, so a longer encoding is
    replaced whole before a shorter one inside it could be."""
    found = {(form, name) for name, value in secrets for form in encodings(value)}
    return tuple(sorted(found, key=lambda pair: (-len(pair[0]), pair)))


def _redact(text: str, forms: tuple[tuple[str, str], ...]) -> str:
    if len(text) < MIN_SECRET_LENGTH:
        return text  # shorter than any secret form or credential shape
    for form, name in forms:
        if form in text:
            text = text.replace(form, f"[REDACTED:{name}]")
    if not _may_hold_credential(text):
        return text
    return CREDENTIAL_SHAPES.sub("[REDACTED]", text)


def _may_hold_credential(text: str) -> bool:
    """Exactly whether CREDENTIAL_SHAPES matches somewhere in `text`, found faster."""
    if any(finder.search(text) for finder in _SHAPE_FINDERS):
        return True
    lower = text.lower()
    return any(word in lower and finder.search(text) for word, finder in _CASELESS_FINDERS.items())


def redact(text: str, environ: Mapping[str, str] | None = None) -> str:
    """Replace secret environment values (in every encoding above) with `[REDACTED:NAME]` and
    credential shapes with `[REDACTED]`."""
    return _redact(text, _forms(_secrets(environ)))


def may_change_json(text: str, environ: Mapping[str, str] | None = None) -> bool:
    """Whether `redact_data` could change the data `text` is the JSON of (`ensure_ascii=False`):
    never False when it could, and one scan of the document instead of a visit of each string
    (a large `--json` is mostly numbers). A secret's forms include their JSON-escaped ones; the
    shapes without a quote or whitespace read the same escaped; the two that may hold one (a
    quoted AWS secret, a bearer token after a tab) are looked for by their word."""
    if any(form in text for form, _ in _forms(_secrets(environ))):
        return True
    if any(finder.search(text) for finder in _SHAPE_FINDERS):
        return True
    lower = text.lower()
    return any(word in lower for word in _CASELESS_FINDERS)


HEX_ID = re.compile(r"[0-9a-f]{7,64}")


def redact_data(data: Any, environ: Mapping[str, str] | None = None) -> Any:
    """`redact` applied to every string (keys included) of JSON-like data; commit ids and
    digests (lowercase hex) are left whole: a short secret inside one is a coincidence."""
    return _redact_data(data, _forms(_secrets(environ)))


def _redact_data(data: Any, forms: tuple[tuple[str, str], ...]) -> Any:
    if isinstance(data, str):
        return data if HEX_ID.fullmatch(data) else _redact(data, forms)
    if isinstance(data, dict):
        return {_redact_data(k, forms): _redact_data(v, forms) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_redact_data(item, forms) for item in data]
    return data
