"""`--actor SPEC` to an Actor: `cmd:...`, `script:FILE`, a preset name, `PROVIDER:MODEL`, `auto`."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ralph import process
from ralph.actors.agents import PRESETS, AgentActor, AgentChatClient
from ralph.actors.base import Actor
from ralph.actors.command import CommandActor
from ralph.actors.llm import LLMActor, shown_messages
from ralph.actors.reach import auth_check
from ralph.actors.readiness import AgentProbe, Credentials, credentials, version
from ralph.config import model_args
from ralph.errors import ConfigError, PreflightError
from ralph.providers.base import ChatClient
from ralph.providers.registry import make_client, probe_provider, provider_available

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
    model: str | None = None,
    environ: Mapping[str, str] | None = None,
    base_dir: Path,
) -> Actor:
    """Build the actor `spec` names; unknown or malformed specs are a ConfigError.

    `model` (`--model`) becomes an agent CLI's `--model MODEL` or replaces a provider's model."""
    spec = spec.strip()
    kind, sep, rest = spec.partition(":")
    kind = kind.strip().lower()
    model = model.strip() if model and model.strip() else None
    if spec == "auto":
        return auto_actor(actor_args=actor_args, model=model, environ=environ, base_dir=base_dir)
    if kind == "cmd" and sep:
        _no_model(model, spec)
        return CommandActor(rest, actor_args=actor_args, environ=environ, base_dir=base_dir)
    if kind in PRESETS and not sep:
        args = with_model(actor_args, model)
        return AgentActor(PRESETS[kind], actor_args=args, environ=environ, base_dir=base_dir)
    if actor_args and (kind == "script" or kind in DEFAULT_MODELS):
        raise ConfigError(
            f"actor_args do not apply to --actor {spec}",
            hint="they are extra arguments for an agent CLI or a cmd: actor",
        )
    if kind == "script" and sep:
        _no_model(model, spec)
        return _scripted(rest, base_dir)
    if kind in DEFAULT_MODELS:
        return llm_actor(kind, model or rest.strip() or DEFAULT_MODELS[kind], environ=environ)
    raise ConfigError(
        f"unknown actor {spec!r}",
        hint="valid forms: " + ", ".join(VALID_FORMS),
    )


def with_model(actor_args: Sequence[str], model: str | None) -> list[str]:
    """An agent CLI's arguments with `--model MODEL` first (every preset's CLI spells it so)."""
    if model is None:
        return list(actor_args)
    if model_args(actor_args):
        raise ConfigError(
            f"two models: --model {model} and {' '.join(model_args(actor_args))} in actor_args",
            hint="name the model once: drop it from actor_args, or leave out --model",
        )
    return ["--model", model, *actor_args]


def _no_model(model: str | None, spec: str) -> None:
    if model is not None:
        raise ConfigError(
            f"--model does not apply to --actor {spec}",
            hint="a cmd: or script: actor chooses its own model; --model is for agent CLIs "
            "and providers",
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

    spec = f"{provider}:{model}"
    return LLMActor(spec, make_client(spec, environ=environ))


def auto_actor(
    *,
    actor_args: Sequence[str] = (),
    model: str | None = None,
    environ: Mapping[str, str] | None = None,
    base_dir: Path,
    reachable: bool = False,
) -> Actor:
    """The first agent CLI on PATH that can run unattended (readiness.py: never one that would
    wait for a login), else an LLM provider whose key is set. `reachable` (`ralph init`'s
    suggestion): only one that can reach its model too (its own auth check, reach.py; a
    provider's endpoint answering)."""

    env = os.environ if environ is None else environ
    args = with_model(actor_args, model)
    skipped = []
    for name in PRESET_ORDER:
        binary = process.which(PRESETS[name].binary, path=env.get("PATH"))
        if binary is None:
            continue
        found = credentials(name, env, root=base_dir, actor_args=args, binary=binary)
        if found.ok and reachable:  # only for a suggestion: it takes a process start
            reach = auth_check(name, binary, env, base_dir, source=found.source)
            found = found if reach.ok is not False else Credentials(False, reach.detail)
        if found.ok:
            return AgentActor(PRESETS[name], actor_args=args, environ=environ, base_dir=base_dir)
        skipped.append(f"{name} ({found.source})")
    for provider, default in DEFAULT_MODELS.items():
        if provider_available(provider, env) and not (
            reachable and not probe_provider(provider, env).ok
        ):
            return llm_actor(provider, model or default, environ=environ)
    if skipped:
        raise PreflightError(
            "no actor can run unattended: " + "; ".join(skipped),
            hint="give one of them its credentials (`ralph doctor` shows what each needs), or "
            'set OPENAI_API_KEY, ANTHROPIC_API_KEY or OLLAMA_HOST, or pass --actor cmd:"..."',
        )
    raise PreflightError(
        "no actor available: no agent CLI on PATH and no LLM provider configured",
        hint=(
            f"install one of {', '.join(PRESET_ORDER)}; or set OPENAI_API_KEY, "
            'ANTHROPIC_API_KEY or OLLAMA_HOST; or pass --actor (e.g. cmd:"./agent.sh")'
        ),
    )


def reflector_client(
    actor: Actor, *, environ: Mapping[str, str] | None, timeout: float | None
) -> ChatClient | None:
    """The actor's own model as the reflector, bounded by `timeout` (`--reflector-timeout`;
    None: no limit): a read-only run of the agent CLI, or a fresh client of the provider."""
    if isinstance(actor, AgentActor):
        return AgentChatClient(actor, timeout=timeout)
    if isinstance(actor, LLMActor):
        return make_client(actor.name, environ=environ, deadline=timeout or NO_DEADLINE)
    return actor.chat_client()


NO_DEADLINE = 86_400.0  # a provider client needs some deadline; "no limit" is a day


def describe_actor(actor: Actor) -> str:
    """How an attempt runs, in one line (`ralph run --dry-run`)."""
    describe = getattr(actor, "describe", None)
    return str(describe()) if callable(describe) else actor.name


def prompt_as_sent(actor: Actor, prompt: str, workdir: Path) -> str:
    """The prompt as the actor receives it: an LLM actor's messages carry the rules and the
    files the prompt points at; every other actor gets the prompt itself."""
    if isinstance(actor, LLMActor):
        return shown_messages(actor.messages(prompt, workdir))
    return prompt


def probe_agents(
    environ: Mapping[str, str], root: Path, *, actor_args: Sequence[str] = ()
) -> list[AgentProbe]:
    """Every preset, in `--actor auto`'s order, as found here (`ralph doctor`); in parallel,
    as each version takes a process start."""

    def one(name: str) -> AgentProbe:
        preset = PRESETS[name]
        path = process.which(preset.binary, path=environ.get("PATH"))
        if path is None:
            return AgentProbe(name, None, None, None, preset.install)
        found = credentials(name, environ, root=root, actor_args=actor_args, binary=path)
        said = version(path, environ, root)
        if not found.ok:
            return AgentProbe(name, path, said, found, preset.install)
        reach = auth_check(name, path, environ, root, source=found.source)
        return AgentProbe(
            name, path, said, found, preset.install, reach.ok, reach.detail, reach.hint
        )

    with ThreadPoolExecutor(len(PRESET_ORDER), thread_name_prefix="ralph-probe") as pool:
        return list(pool.map(one, PRESET_ORDER))
