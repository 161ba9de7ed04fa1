"""Can an agent CLI reach its model? Its own auth check, run as the loop would run the CLI,
bounded in time; for `ralph doctor` and the actor `ralph init` suggests.

Credentials ralph can see (readiness.py) are not enough: gemini 0.61 with GOOGLE_GEMINI_BASE_URL
picks an auth method it then refuses ("Invalid auth method selected.", exit 41), a login can be
stale. Where the CLI has a check of its own that spends no tokens, ralph runs it:

- claude: `claude auth status` (JSON; exit 0 when logged in, 1 when not);
- codex: `codex login status` (exit 0 when logged in; it does not count CODEX_API_KEY or
  OPENAI_API_KEY, so it is not asked when the key is one of those variables);
- gemini: `gemini -p ""` with nothing on stdin: it checks its auth method first (exit 41 and
  its reason when it has none it accepts), then stops for want of input (exit 42) before any
  model request.

aider and opencode have no such check: their credentials are all ralph knows.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ralph import process
from ralph.actors.agents import PRESETS
from ralph.actors.verified import VERIFIED

AUTH_TIMEOUT = 20.0  # gemini takes ~5 s to start on a busy machine
# preset -> (its own check's arguments, the exit codes that mean its auth is in order)
AUTH_CHECKS: dict[str, tuple[tuple[str, ...], frozenset[int]]] = {
    "claude": (("auth", "status"), frozenset({0})),
    "codex": (("login", "status"), frozenset({0})),
    "gemini": (("-p", ""), frozenset({0, 42})),  # 42: no input, after its auth passed
}
KEY_VARIABLES = {"codex": ("CODEX_API_KEY", "OPENAI_API_KEY")}  # what its check does not see


@dataclass(frozen=True)
class Reach:
    """What the CLI's own check said: `ok` None when it has none ralph can run."""

    ok: bool | None
    detail: str = ""
    hint: str | None = None


def auth_check(
    name: str, binary: str, environ: Mapping[str, str], root: Path, *, source: str = ""
) -> Reach:
    """Run `name`'s own auth check (`binary`, in `root`, with the variables the preset sets);
    `source`: where its credentials were found (readiness.Credentials.source)."""
    check = AUTH_CHECKS.get(name)
    if check is None or source in KEY_VARIABLES.get(name, ()):
        return Reach(None)
    args, passed = check
    shown = " ".join([name, *(arg or '""' for arg in args)])
    env = {**environ, **dict(PRESETS[name].env)}
    result = process.run([binary, *args], cwd=root, env=env, stdin="", wall_timeout=AUTH_TIMEOUT)
    hint = f"run `{shown}` for its own message; fix its login, key or endpoint settings"
    if result.timed_out:
        return Reach(False, f"`{shown}` gave no answer in {AUTH_TIMEOUT:g}s", hint)
    if result.exit_code in passed:
        return Reach(True, f"`{shown}` passed")
    said = _said(result.stdout, result.stderr)
    return Reach(False, f"`{shown}` exit {result.exit_code}: {said}", hint)


def _said(stdout: str, stderr: str) -> str:
    """The CLI's own line: claude's JSON as words, else the last line it printed."""
    try:
        data = json.loads(stdout)
    except ValueError:
        data = None
    if isinstance(data, dict) and data.get("loggedIn") is False:
        return "not logged in"
    for text in (stderr, stdout):
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if lines:
            return lines[-1][:200]
    return "no output"


def newer_than_verified(name: str, version_line: str | None) -> str | None:
    """The version ralph's preset was verified with (`verified.VERIFIED`), when the installed
    one (`--version`'s line: `2.1.197 (Claude Code)`, `codex-cli 0.171.0`) is newer; else None."""
    verified = VERIFIED.get(name)
    found = re.search(r"\d+(?:\.\d+)+", version_line or "")
    if verified is None or found is None:
        return None
    installed = tuple(int(part) for part in found.group().split("."))
    known = tuple(int(part) for part in verified[1].split("."))
    return verified[1] if installed > known else None
