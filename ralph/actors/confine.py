"""The loop's sandbox policy from its settings, and which sandbox each actor runs in.

The table says, per preset, the variables that carry the agent's credentials (other providers'
keys stay out unless `--pass-env` names them) and the directories under HOME it must write
(its login, sessions, settings), which it gets as a throwaway copy (ralph/throwaway.py);
`--sandbox-write` replaces that list with paths it writes for real. A `cmd:` actor gets only
ralph's variables and those named. The LLM actor and `script:` start no process: ralph applies
their edits itself, so only their checks are confined.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Collection, Mapping
from dataclasses import replace
from pathlib import Path

from ralph.actors.agents import AgentActor
from ralph.actors.command import CommandActor
from ralph.actors.readiness import AIDER_KEYS, GEMINI_KEYS, GEMINI_SETTINGS, OPENCODE_KEYS
from ralph.config import Settings
from ralph.files import ACTOR_PYCACHE, AIWG_DIR, PYCACHE_PREFIX, private_tmp
from ralph.sandbox import Policy, Sandbox, resolve
from ralph.workspace.locate import memory_root

# Claude Code's own settings without its prefixes (ANTHROPIC_*, CLAUDE_CODE_*: its credentials,
# endpoints, models and switches), from its documentation and the 2.1.197 bundle's list of the
# variables a settings file may set: dropped, a user's CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC
# or DISABLE_TELEMETRY no longer held and each attempt paid a title-generation request.
CLAUDE_SETTINGS = (
    "DISABLE_TELEMETRY", "DISABLE_ERROR_REPORTING", "DISABLE_AUTOUPDATER", "DISABLE_UPDATES",
    "DISABLE_BUG_COMMAND", "DISABLE_COST_WARNINGS", "DISABLE_NON_ESSENTIAL_MODEL_CALLS",
    "DISABLE_INSTALLATION_CHECKS", "DISABLE_GROWTHBOOK", "DISABLE_PROMPT_CACHING",
    "DISABLE_PROMPT_CACHING_HAIKU", "DISABLE_PROMPT_CACHING_SONNET", "DISABLE_PROMPT_CACHING_OPUS",
    "DISABLE_INTERLEAVED_THINKING", "DISABLE_AUTO_COMPACT", "DISABLE_COMPACT", "DO_NOT_TRACK",
    "API_TIMEOUT_MS", "MAX_THINKING_TOKENS", "MAX_MCP_OUTPUT_TOKENS", "MCP_TIMEOUT",
    "MCP_TOOL_TIMEOUT", "MCP_CONNECT_TIMEOUT_MS", "MCP_CONNECTION_NONBLOCKING",
    "ENABLE_TOOL_SEARCH", "BASH_DEFAULT_TIMEOUT_MS", "BASH_MAX_TIMEOUT_MS",
    "BASH_MAX_OUTPUT_LENGTH", "USE_BUILTIN_RIPGREP", "CLOUD_ML_REGION", "VERTEX_REGION_*",
    "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_BEARER_TOKEN_BEDROCK",
)  # fmt: skip
# preset -> (variables it is given, `NAME_*` for every variable starting `NAME_`; directories
# under HOME it may write; variables naming such a directory elsewhere)
AGENT_NEEDS: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "claude": (
        ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "ANTHROPIC_MODEL",
         "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX",
         "CLAUDE_CODE_USE_FOUNDRY", "CLAUDE_CONFIG_DIR", "ANTHROPIC_*", "CLAUDE_CODE_*",
         *CLAUDE_SETTINGS),
        (".claude", ".claude.json"),
        ("CLAUDE_CONFIG_DIR",),
    ),
    "codex": (
        # its credentials and endpoint, then its own settings (0.171.0 reads them): its state
        # and certificates, the OpenAI organization and project, its log level
        ("OPENAI_API_KEY", "CODEX_API_KEY", "OPENAI_BASE_URL", "CODEX_HOME",
         "CODEX_ACCESS_TOKEN", "CODEX_CA_CERTIFICATE", "CODEX_SQLITE_HOME", "OPENAI_ORGANIZATION",
         "OPENAI_ORG_ID", "OPENAI_PROJECT", "OPENAI_PROJECT_ID", "RUST_LOG"),
        (".codex",),
        ("CODEX_HOME",),
    ),
    "aider": ((*AIDER_KEYS,), (".aider", ".aider.conf.yml"), ()),
    "gemini": (
        (*GEMINI_KEYS, *GEMINI_SETTINGS),
        (".gemini",),
        ("GEMINI_CLI_HOME",),
    ),
    "opencode": (
        (*OPENCODE_KEYS,),
        (".local/share/opencode", ".config/opencode", ".cache/opencode", ".local/state/opencode"),
        (),
    ),
}  # fmt: skip


# Presets whose CLI runs a sandbox of its own that writes in /tmp (codex: its helper's lock and
# daemon folders, `/tmp/codex-*`, whatever TMPDIR says): their /tmp is their private TMPDIR.
OWN_TMP = frozenset({"codex"})


def confine(actor: object, policy: Policy | None, environ: Mapping[str, str]) -> Sandbox | None:
    """Give an actor that starts a process its sandbox; the checks' sandbox to give them
    (None for both: they run as ralph does)."""
    if policy is None:
        return None
    if isinstance(actor, AgentActor):
        names, homes, elsewhere = AGENT_NEEDS.get(actor.preset.name, ((), (), ()))
        home = Path(environ.get("HOME") or os.path.expanduser("~"))
        dirs = [home / place for place in homes]
        dirs += [Path(environ[name]) for name in elsewhere if environ.get(name)]
        keep = {*given(names, environ), *(name for name, _ in actor.preset.env)}
        box = policy.for_actor(keep, dirs)
        actor.sandbox = with_bytecode(replace(box, own_tmp=actor.preset.name in OWN_TMP), policy)
    elif isinstance(actor, CommandActor):
        actor.sandbox = with_bytecode(policy.for_actor((), ()), policy)
    return policy.for_checks()


def given(names: Collection[str], environ: Mapping[str, str]) -> set[str]:
    """The variables a row names: each name, and for `PREFIX_*` those of `environ` so named."""
    prefixes = tuple(name[:-1] for name in names if name.endswith("*"))
    kept = {name for name in names if not name.endswith("*")}
    return kept | {name for name in environ if prefixes and name.startswith(prefixes)}


def with_bytecode(sandbox: Sandbox, policy: Policy) -> Sandbox:
    """The actor's bytecode folder (`files.bytecode_env`, named in its environment by
    `build_parts`) writable and its variable kept, whatever `--sandbox-write` says: else the
    agent's Python writes `__pycache__/` into the tree. Made now, as bwrap binds only what
    exists; the checks' folder stays read-only to the actor."""
    folder = (policy.scratch or policy.repository / AIWG_DIR / "tmp") / ACTOR_PYCACHE
    with contextlib.suppress(OSError):
        folder.mkdir(mode=0o700, exist_ok=True)
    return replace(
        sandbox, writable=(*sandbox.writable, folder), keep=sandbox.keep | {PYCACHE_PREFIX}
    )


def policy_of(
    settings: Settings,
    root: Path,
    environ: Mapping[str, str],
    note: Callable[[str], None] | None = None,
) -> Policy | None:
    """`--sandbox`: None runs as ralph does (`none`, or `auto` where bwrap cannot run, said in
    one line through `note`); `bwrap` where it cannot run is refused (exit 2)."""
    bwrap, warning = resolve(settings.sandbox)
    if warning and note is not None:
        note(warning)
    if bwrap is None:
        return None
    writes = settings.sandbox_write
    repository = memory_root(root).resolve()
    return Policy(
        bwrap,
        root.resolve(),
        repository,
        network=settings.sandbox_network,
        pass_env=tuple(settings.pass_env),
        writes=tuple(Path(p).expanduser().resolve() for p in writes) if writes else None,
        environ=dict(environ),
        scratch=private_tmp(repository),
        hidden=settings.holdout_paths(root),
    )
