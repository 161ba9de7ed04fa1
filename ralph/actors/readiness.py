"""Can an agent CLI run here without a person? Its version, and the credentials it would use.

An agent CLI without credentials does not always fail: aider offers an OpenRouter login in the
browser (which `--yes-always` accepts, then waits for), the others stop at a login prompt or
error. ralph runs them unattended, so `--actor auto` only picks a CLI whose credentials it can
see, an explicit `--actor NAME` without them is refused before the loop starts, and
`ralph doctor` shows the same findings. What counts, per CLI (from each tool's documentation):

- claude: ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, CLAUDE_CODE_OAUTH_TOKEN, Bedrock/Vertex/
  Foundry switches; or a login: `.credentials.json` in $CLAUDE_CONFIG_DIR or ~/.claude, an
  `oauthAccount` in ~/.claude.json (macOS keeps the token in the Keychain), an `apiKeyHelper`.
- codex: CODEX_API_KEY or OPENAI_API_KEY; or `auth.json` in $CODEX_HOME or ~/.codex; else
  `codex login status` (exit 0 when logged in, also with the OS keyring).
- aider: a model named (`--model`, AIDER_MODEL) or a key aider picks a model by (ANTHROPIC,
  DEEPSEEK, OPENROUTER, OPENAI, GEMINI keys, VERTEXAI_PROJECT with Google credentials), in the
  environment, a `.env` or `.aider.conf.yml` (home or project), or ~/.aider/oauth-keys.env.
- gemini: GEMINI_API_KEY, GOOGLE_API_KEY, GOOGLE_GENAI_USE_VERTEXAI, GOOGLE_GENAI_USE_GCA (also
  in a `.env` of the project or ~/.gemini); or a Google login in ~/.gemini/oauth_creds.json. Not
  GOOGLE_GEMINI_BASE_URL without `security.auth.selectedType` in its settings: 0.61 takes that
  for a "gateway" and exits 41 ("Invalid auth method selected."). gemini's own auth check, for
  a probe: stdin "ok" to `gemini -o stream-json` with `model.maxSessionTurns: 0` in the settings
  of a GEMINI_CLI_HOME (`mcp_wiring.gemini_home`): exit 53 ("Reached max session turns") after
  the auth is validated and refreshed, no model request; exit 41 and its line when refused.
- opencode: OPENCODE_API_KEY or a provider key in the environment; `auth.json` of
  `opencode auth login` ($XDG_DATA_HOME/opencode); or an opencode.json configuring providers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ralph import process
from ralph.actors.mcp_wiring import jsonc_object
from ralph.actors.trace import as_dict

VERSION_TIMEOUT = 15.0  # node-based CLIs take a second or two to start on a busy machine
LOGIN_STATUS_TIMEOUT = 15.0


@dataclass(frozen=True)
class Credentials:
    """Whether the CLI has what it needs to run unattended; `source` says where it was found,
    or what is missing."""

    ok: bool
    source: str
    hint: str | None = None


@dataclass(frozen=True)
class AgentProbe:
    """One agent CLI as found here: its path (None: not installed), version, credentials."""

    name: str
    path: str | None
    version: str | None
    credentials: Credentials | None
    install: str
    reaches: bool | None = None  # its own auth check (reach.py): None when it has none
    reach_detail: str = ""
    reach_hint: str | None = None

    @property
    def ready(self) -> bool:
        found = self.path is not None and self.credentials is not None and self.credentials.ok
        return found and self.reaches is not False


def version(binary: str, environ: Mapping[str, str], root: Path) -> str | None:
    """The first line `BINARY --version` prints, or None when it prints nothing in time."""
    result = process.run(
        [binary, "--version"], cwd=root, env=dict(environ), wall_timeout=VERSION_TIMEOUT
    )
    if result.timed_out or result.exit_code != 0:
        return None
    for line in (result.stdout + "\n" + result.stderr).splitlines():
        if line.strip():
            return line.strip()[:80]
    return None


def credentials(
    name: str,
    environ: Mapping[str, str],
    *,
    root: Path,
    actor_args: Sequence[str] = (),
    binary: str | None = None,
) -> Credentials:
    """What `name` would authenticate with here; see the module docstring for the rules."""
    home = Path(environ.get("HOME") or Path.home())
    check = _CHECKS[name]
    return check(environ, home, root, list(actor_args), binary)


def _set(environ: Mapping[str, str], *names: str) -> str | None:
    """The first of `names` set to something other than blanks."""
    return next((n for n in names if environ.get(n, "").strip()), None)


def _readable(path: Path) -> bool:
    try:
        return path.is_file() and path.stat().st_size > 0
    except OSError:
        return False


def _json_keys(path: Path) -> set[str]:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return set()
    return {key for key, value in data.items() if value} if isinstance(data, dict) else set()


def _mentions(path: Path, word: str) -> bool:
    try:
        return path.is_file() and word in path.read_text("utf-8", errors="replace")
    except OSError:
        return False


def _assignments(path: Path) -> set[str]:
    """Names given a non-empty value in a `.env` file (`KEY=value`, `export KEY=value`) or a
    YAML config (`key: value`)."""
    try:
        text = path.read_text("utf-8", errors="replace")
    except OSError:
        return set()
    found = set()
    for line in text.splitlines():
        match = re.match(r"\s*(?:export\s+)?([A-Za-z_][\w-]*)\s*[=:]\s*(\S.*)?$", line)
        if match and match.group(2) and match.group(2).strip() not in ('""', "''"):
            found.add(match.group(1))
    return found


def _shown(path: Path, home: Path) -> str:
    try:
        return "~/" + str(path.relative_to(home))
    except ValueError:
        return str(path)


def _claude(
    env: Mapping[str, str], home: Path, root: Path, args: list[str], binary: str | None
) -> Credentials:
    variable = _set(
        env,
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "CLAUDE_CODE_USE_BEDROCK",
        "CLAUDE_CODE_USE_VERTEX",
        "CLAUDE_CODE_USE_FOUNDRY",
    )
    if variable:
        return Credentials(True, variable)
    folder = Path(env["CLAUDE_CONFIG_DIR"]) if _set(env, "CLAUDE_CONFIG_DIR") else home / ".claude"
    if _readable(folder / ".credentials.json"):
        return Credentials(True, f"logged in ({_shown(folder / '.credentials.json', home)})")
    for state in (home / ".claude.json", folder / ".claude.json"):
        if _json_keys(state) & {"oauthAccount", "primaryApiKey"}:
            return Credentials(True, f"logged in ({_shown(state, home)})")
    for settings in (folder / "settings.json", root / ".claude" / "settings.json"):
        if "apiKeyHelper" in _json_keys(settings):
            return Credentials(True, f"apiKeyHelper ({_shown(settings, home)})")
    return Credentials(
        False,
        "no ANTHROPIC_API_KEY and not logged in",
        "export ANTHROPIC_API_KEY, or run `claude` once and log in (/login)",
    )


def _codex(
    env: Mapping[str, str], home: Path, root: Path, args: list[str], binary: str | None
) -> Credentials:
    variable = _set(env, "CODEX_API_KEY", "OPENAI_API_KEY")
    if variable:
        return Credentials(True, variable)
    folder = Path(env["CODEX_HOME"]) if _set(env, "CODEX_HOME") else home / ".codex"
    if _readable(folder / "auth.json"):
        return Credentials(True, f"logged in ({_shown(folder / 'auth.json', home)})")
    if binary is not None:  # the OS keyring: only codex itself can tell
        result = process.run(
            [binary, "login", "status"],
            cwd=root,
            env=dict(env),
            wall_timeout=LOGIN_STATUS_TIMEOUT,
        )
        said = (result.stdout.strip() or result.stderr.strip()).splitlines()
        if result.exit_code == 0 and not result.timed_out:
            return Credentials(True, said[0][:80] if said else "codex login status")
    return Credentials(
        False,
        "no OPENAI_API_KEY and not logged in",
        "export OPENAI_API_KEY (or CODEX_API_KEY), or run `codex login`",
    )


AIDER_KEYS = (
    "ANTHROPIC_API_KEY",
    "DEEPSEEK_API_KEY",
    "OPENROUTER_API_KEY",
    "OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "AIDER_MODEL",
    "AIDER_API_KEY",
    "AIDER_OPENAI_API_KEY",
    "AIDER_ANTHROPIC_API_KEY",
)
AIDER_CONF_KEYS = {"model", "api-key", "openai-api-key", "anthropic-api-key"}


def _aider(
    env: Mapping[str, str], home: Path, root: Path, args: list[str], binary: str | None
) -> Credentials:
    given = [a.split("=", 1)[0] for a in args if a.startswith("--")]
    if "--model" in given or "--api-key" in given:
        return Credentials(True, "--model/--api-key in its arguments")
    variable = _set(env, *AIDER_KEYS)
    if variable:
        return Credentials(True, variable)
    if _set(env, "VERTEXAI_PROJECT") and _set(env, "GOOGLE_APPLICATION_CREDENTIALS"):
        return Credentials(True, "VERTEXAI_PROJECT")
    oauth = home / ".aider" / "oauth-keys.env"
    if _readable(oauth):
        return Credentials(True, f"OpenRouter login ({_shown(oauth, home)})")
    for folder in dict.fromkeys((root, home)):
        dotenv = folder / ".env"
        if _assignments(dotenv) & set(AIDER_KEYS):
            return Credentials(True, f"a key in {_shown(dotenv, home)}")
        conf = folder / ".aider.conf.yml"
        if _assignments(conf) & AIDER_CONF_KEYS:
            return Credentials(True, f"model or key in {_shown(conf, home)}")
    return Credentials(
        False,
        "no model and no API key: aider would wait for a browser login to OpenRouter",
        "export ANTHROPIC_API_KEY or OPENAI_API_KEY (or another key aider knows), or pass a "
        "model with --model",
    )


GEMINI_KEYS = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI")
GEMINI_ENV_AUTH = ("GOOGLE_GENAI_USE_GCA", "GOOGLE_GENAI_USE_VERTEXAI")  # chosen over the URL
# what else gemini (0.61) reads from its environment to find its model and its settings: the
# endpoints, Google Cloud's project and login, its home and settings files, its headers
GEMINI_SETTINGS = (
    "GOOGLE_GEMINI_BASE_URL", "GOOGLE_VERTEX_BASE_URL", "GOOGLE_GENAI_API_VERSION",
    "GOOGLE_GENAI_USE_GCA", "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_PROJECT_ID",
    "GOOGLE_CLOUD_LOCATION", "GOOGLE_CLOUD_QUOTA_PROJECT", "GOOGLE_CLOUD_ACCESS_TOKEN",
    "GOOGLE_APPLICATION_CREDENTIALS", "CLOUDSDK_CONFIG", "CODE_ASSIST_ENDPOINT",
    "GEMINI_CLI_HOME", "GEMINI_CLI_SYSTEM_SETTINGS_PATH", "GEMINI_CLI_SYSTEM_DEFAULTS_PATH",
    "GEMINI_CLI_TRUSTED_FOLDERS_PATH", "GEMINI_MODEL", "GEMINI_SYSTEM_MD",
    "GEMINI_API_KEY_AUTH_MECHANISM", "GEMINI_CLI_CUSTOM_HEADERS", "GEMINI_CLI_USE_COMPUTE_ADC",
    "GEMINI_FORCE_FILE_STORAGE", "GEMINI_CLI_NO_RELAUNCH",
)  # fmt: skip


def _gemini(
    env: Mapping[str, str], home: Path, root: Path, args: list[str], binary: str | None
) -> Credentials:
    own = Path(env["GEMINI_CLI_HOME"]) if _set(env, "GEMINI_CLI_HOME") else home
    selected = None
    for settings in (root / ".gemini" / "settings.json", own / ".gemini" / "settings.json"):
        auth = as_dict(as_dict(jsonc_object(settings).get("security")).get("auth"))
        selected = selected or auth.get("selectedType")
    if not selected and _set(env, "GOOGLE_GEMINI_BASE_URL") and not _set(env, *GEMINI_ENV_AUTH):
        # gemini 0.61 then takes the endpoint for a "gateway" it refuses: exit 41
        return Credentials(
            False,
            "GOOGLE_GEMINI_BASE_URL with no auth method selected: gemini says "
            '"Invalid auth method selected." (exit 41)',
            'add "security": {"auth": {"selectedType": "gemini-api-key"}} to '
            f"{_shown(own / '.gemini' / 'settings.json', home)} (or pick one with /auth)",
        )
    variable = _set(env, *GEMINI_KEYS, "GOOGLE_GENAI_USE_GCA")
    if variable:
        return Credentials(True, variable)
    creds = home / ".gemini" / "oauth_creds.json"
    if _readable(creds):
        return Credentials(True, f"logged in with Google ({_shown(creds, home)})")
    for dotenv in (root / ".gemini" / ".env", root / ".env", home / ".gemini" / ".env"):
        if _assignments(dotenv) & set(GEMINI_KEYS):
            return Credentials(True, f"a key in {_shown(dotenv, home)}")
    return Credentials(
        False,
        "no GEMINI_API_KEY and not logged in",
        "export GEMINI_API_KEY, or run `gemini` once and log in with Google",
    )


OPENCODE_KEYS = (
    "OPENCODE_API_KEY",
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_GENERATIVE_AI_API_KEY",
    "OPENROUTER_API_KEY",
    "GROQ_API_KEY",
    "DEEPSEEK_API_KEY",
    "XAI_API_KEY",
)


def _opencode(
    env: Mapping[str, str], home: Path, root: Path, args: list[str], binary: str | None
) -> Credentials:
    variable = _set(env, *OPENCODE_KEYS)
    if variable:
        return Credentials(True, variable)
    data = Path(env["XDG_DATA_HOME"]) if _set(env, "XDG_DATA_HOME") else home / ".local/share"
    auth = data / "opencode" / "auth.json"
    if _json_keys(auth):
        return Credentials(True, f"logged in ({_shown(auth, home)})")
    config = Path(env["XDG_CONFIG_HOME"]) if _set(env, "XDG_CONFIG_HOME") else home / ".config"
    for folder in (root, config / "opencode"):
        for name in ("opencode.json", "opencode.jsonc"):
            if "provider" in _json_keys(folder / name) or _mentions(folder / name, "provider"):
                return Credentials(True, f"providers in {_shown(folder / name, home)}")
    return Credentials(
        False,
        "no provider key and not logged in",
        "export a provider key (ANTHROPIC_API_KEY, OPENAI_API_KEY, ...), or run "
        "`opencode auth login`",
    )


_CHECKS = {
    "claude": _claude,
    "codex": _codex,
    "aider": _aider,
    "gemini": _gemini,
    "opencode": _opencode,
}
