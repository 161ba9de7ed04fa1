"""`--actor SPEC` to an Actor: `cmd:...`, `script:FILE`, a preset name, `PROVIDER:MODEL`, `auto`."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from ralph import process
from ralph.actors.base import Actor
from ralph.errors import ConfigError, PreflightError

PRESET_ORDER = ("claude", "codex", "aider", "gemini", "opencode")
# Sensible current defaults when only the provider is named (`openai`, `anthropic:`).
DEFAULT_MODELS = {
    "openai": "gpt-4.1-mini",
    "anthropic": "claude-sonnet-4-5",
    "ollama": "qwen2.5-coder",
}
VALID_FORMS = (
    "auto",
    *PRESET_ORDER,
    'cmd:"COMMAND"',
    "script:FILE.yaml",
    "openai:MODEL",
    "anthropic:MODEL",
    "ollama:MODEL",
)


def make_actor(
    spec: str,
    *,
    actor_args: Sequence[str] = (),
    environ: Mapping[str, str] | None = None,
    base_dir: Path,
) -> Actor:
    """Build the actor `spec` names; unknown or malformed specs are a ConfigError."""
    from ralph.actors.agents import PRESETS, AgentActor

    spec = spec.strip()
    kind, sep, rest = spec.partition(":")
    kind = kind.strip().lower()
    if spec == "auto":
        return auto_actor(actor_args=actor_args, environ=environ, base_dir=base_dir)
    if kind == "cmd" and sep:
        from ralph.actors.command import CommandActor

        return CommandActor(rest, actor_args=actor_args, environ=environ)
    if kind in PRESETS and not sep:
        return AgentActor(PRESETS[kind], actor_args=actor_args, environ=environ, base_dir=base_dir)
    if actor_args and (kind == "script" or kind in DEFAULT_MODELS):
        raise ConfigError(
            f"actor_args do not apply to --actor {spec}",
            hint="they are extra arguments for an agent CLI or a cmd: actor",
        )
    if kind == "script" and sep:
        return _scripted(rest, base_dir)
    if kind in DEFAULT_MODELS:
        return llm_actor(kind, rest.strip() or DEFAULT_MODELS[kind], environ=environ)
    raise ConfigError(
        f"unknown actor {spec!r}",
        hint="valid forms: " + ", ".join(VALID_FORMS),
    )


def _scripted(raw: str, base_dir: Path) -> Actor:
    from ralph.actors.scripted import ScriptedActor

    raw = raw.strip().strip("'\"")
    if not raw:
        raise ConfigError("script: actor needs a file", hint="use --actor script:demo.yaml")
    path = Path(raw).expanduser()
    return ScriptedActor(path if path.is_absolute() else base_dir / path)


def llm_actor(provider: str, model: str, *, environ: Mapping[str, str] | None) -> Actor:
    """An LLM actor over the provider's chat client (keys come from the environment)."""
    from ralph.actors.llm import LLMActor
    from ralph.providers.registry import make_client

    spec = f"{provider}:{model}"
    return LLMActor(spec, make_client(spec, environ=environ))


def auto_actor(
    *,
    actor_args: Sequence[str] = (),
    environ: Mapping[str, str] | None = None,
    base_dir: Path,
) -> Actor:
    """The first agent CLI on PATH, else an LLM provider whose key is set."""
    from ralph.actors.agents import PRESETS, AgentActor
    from ralph.providers.registry import provider_available

    env = os.environ if environ is None else environ
    for name in PRESET_ORDER:
        if process.which(PRESETS[name].binary, path=env.get("PATH")) is not None:
            return AgentActor(
                PRESETS[name], actor_args=actor_args, environ=environ, base_dir=base_dir
            )
    for provider, model in DEFAULT_MODELS.items():
        if provider_available(provider, env):
            return llm_actor(provider, model, environ=environ)
    raise PreflightError(
        "no actor available: no agent CLI on PATH and no LLM provider configured",
        hint=(
            f"install one of {', '.join(PRESET_ORDER)}; or set OPENAI_API_KEY, "
            'ANTHROPIC_API_KEY or OLLAMA_HOST; or pass --actor (e.g. cmd:"./agent.sh")'
        ),
    )
