"""The gemini preset as the released CLI (0.61) needs it (tests/contract/test_gemini.py drives
the real one): its endpoint and settings variables and its memory home kept in ralph's sandbox,
an endpoint it cannot reach named with the CLI's own line (not a wall timeout), and doctor's
check refusing what gemini refuses ("Invalid auth method selected.", exit 41)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from ralph.actors.agents import PRESETS, AgentActor
from ralph.actors.base import ActorContext
from ralph.actors.confine import confine
from ralph.actors.readiness import credentials
from ralph.errors import ProviderError
from ralph.sandbox import Policy, find

FETCH_FAILED = (
    "Attempt {n} failed. Retrying with backoff... Error: exception TypeError: fetch failed "
    "sending request"
)


def fake_gemini(folder: Path, body: str) -> Path:
    """A `gemini` on a PATH of its own: a Python script running `body`."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "gemini"
    script.write_text(f"#!{sys.executable}\nimport json, os, sys, time\n{body}\n")
    script.chmod(0o755)
    return folder


def context(tmp_path: Path, timeout: float = 120) -> ActorContext:
    tree = tmp_path / "tree"
    tree.mkdir(exist_ok=True)
    artifacts = tmp_path / "tree" / ".aiwg" / "ralph" / "loops" / "ralph-t-0a1b2c3d" / "001"
    return ActorContext("ralph-t-0a1b2c3d", 1, tree, artifacts, timeout, timeout)


def test_the_sandbox_keeps_geminis_endpoint_and_settings_variables(tmp_path: Path) -> None:
    actor = AgentActor(PRESETS["gemini"])
    confine(actor, Policy("bwrap", tmp_path, tmp_path), {"HOME": "/home/u"})
    assert actor.sandbox is not None
    for name in ("GOOGLE_GEMINI_BASE_URL", "GEMINI_API_KEY", "GEMINI_CLI_SYSTEM_SETTINGS_PATH"):
        assert name in actor.sandbox.keep
    assert Path("/home/u/.gemini") in actor.sandbox.copied  # a throwaway copy (throwaway.py)


@pytest.mark.skipif(not find().works, reason="bubblewrap cannot run here")
def test_under_bwrap_gemini_sees_its_endpoint_and_writes_its_memory_home(tmp_path: Path) -> None:
    """Before: the sandbox dropped GOOGLE_GEMINI_BASE_URL and the wiring's variable, and the
    agent, unable to reach its model, ran out its wall timeout."""
    body = (
        "home = os.environ['GEMINI_CLI_HOME']\n"
        "servers = json.load(open(home + '/.gemini/settings.json'))['mcpServers']\n"
        "open(home + '/.gemini/installation_id', 'w').write('x')\n"
        "print(json.dumps({'url': os.environ.get('GOOGLE_GEMINI_BASE_URL'),"
        " 'servers': sorted(servers)}))\n"
    )
    path = fake_gemini(tmp_path / "bin", body)
    home = tmp_path / "home"
    (home / ".gemini").mkdir(parents=True)
    env = {"PATH": f"{path}:/usr/bin:/bin", "HOME": str(home), "GEMINI_API_KEY": "k"}
    env["GOOGLE_GEMINI_BASE_URL"] = "http://127.0.0.1:9"
    actor = AgentActor(PRESETS["gemini"], environ=env, base_dir=tmp_path)
    ctx = context(tmp_path)
    policy = Policy(find().path or "bwrap", ctx.workdir, ctx.workdir, environ=env)
    confine(actor, policy, env)
    assert actor.offer_memory([sys.executable, "-m", "ralph", "mcp"])
    result = actor.act("fix it", ctx)
    assert result.exit_code == 0, result.output
    said = json.loads(result.output.strip().splitlines()[0])
    assert said == {"url": "http://127.0.0.1:9", "servers": ["ralph"]}
    assert (ctx.artifacts_dir / "gemini-home" / ".gemini" / "installation_id").exists()


def test_an_endpoint_gemini_cannot_reach_is_named_with_its_own_line(tmp_path: Path) -> None:
    """gemini retries a refused connection with backoff for minutes: after its third try and no
    answer ralph stops it and names it, the CLI's first line in the message."""
    lines = "".join(
        f"print({FETCH_FAILED.format(n=n)!r}, file=sys.stderr, flush=True)\n" for n in (1, 2, 3)
    )
    path = fake_gemini(tmp_path / "bin", lines + "time.sleep(600)")
    env = {"PATH": f"{path}:/usr/bin:/bin", "GEMINI_API_KEY": "k"}
    env["GOOGLE_GEMINI_BASE_URL"] = "http://127.0.0.1:9"
    actor = AgentActor(PRESETS["gemini"], environ=env, base_dir=tmp_path)
    started = time.monotonic()
    with pytest.raises(ProviderError) as caught:
        actor.act("fix it", context(tmp_path, timeout=600))
    assert time.monotonic() - started < 300  # stopped, not run out to its wall timeout
    assert caught.value.message == "gemini cannot reach its model: " + FETCH_FAILED.format(n=1)
    assert "GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:9" in str(caught.value.hint)


def test_a_retry_after_the_model_answered_is_the_attempts_own_business(tmp_path: Path) -> None:
    answer = json.dumps({"type": "message", "role": "assistant", "content": "ok"})
    lines = "".join(
        f"print({FETCH_FAILED.format(n=n)!r}, file=sys.stderr, flush=True)\n" for n in (1, 2, 3)
    )
    path = fake_gemini(tmp_path / "bin", f"print({answer!r}, flush=True)\n{lines}")
    env = {"PATH": f"{path}:/usr/bin:/bin", "GEMINI_API_KEY": "k"}
    actor = AgentActor(PRESETS["gemini"], environ=env, base_dir=tmp_path)
    result = actor.act("fix it", context(tmp_path))
    assert result.exit_code == 0 and result.summary == "ok"


def test_doctor_refuses_an_endpoint_without_an_auth_method_as_gemini_does(
    tmp_path: Path,
) -> None:
    """gemini 0.61 with GOOGLE_GEMINI_BASE_URL and no `security.auth.selectedType` takes the
    endpoint for a "gateway", then exits 41: "Invalid auth method selected."."""
    home, root = tmp_path / "home", tmp_path / "root"
    (home / ".gemini").mkdir(parents=True)
    root.mkdir()
    env = {"GEMINI_API_KEY": "k", "GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:9", "HOME": str(home)}
    found = credentials("gemini", env, root=root)
    assert not found.ok and "Invalid auth method selected." in found.source
    assert '"selectedType": "gemini-api-key"' in str(found.hint)
    (home / ".gemini" / "settings.json").write_text(
        '{"security": {"auth": {"selectedType": "gemini-api-key"}}} // via /auth'
    )
    assert credentials("gemini", env, root=root).ok
    assert credentials("gemini", {"GEMINI_API_KEY": "k", "HOME": str(tmp_path)}, root=root).ok
