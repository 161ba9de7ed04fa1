"""`ralph doctor`, the agent CLIs' credentials (actors/readiness.py), `--actor auto` never picking
a CLI that would wait for a login, `--model`, and the reflector's own timeout."""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

from ralph.actors.readiness import credentials
from ralph.actors.registry import make_actor
from ralph.errors import ConfigError, PreflightError
from tests.conftest import RunCli
from tests.fakes import AGENT_CREDENTIALS, FakeProvider
from tests.fakes.calc_project import make_calc_repo

FAKES = Path(__file__).parent / "fakes" / "agents"
CALC = "def add(a, b):\n    return a - b\n"
TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
CHECK = f'{sys.executable} -c "import calc, sys; sys.exit(calc.add(2, 3) != 5)"'
AGENT = f"cmd:{sys.executable} -c pass"

# What each real CLI prints for --version (claude 2.x, codex-rs, aider, gemini, opencode).
VERSIONS = {
    "claude": "2.0.14 (Claude Code)",
    "codex": "codex-cli 0.46.0",
    "aider": "aider 0.86.1",
    "gemini": "0.9.0",
    "opencode": "0.15.3",
}
FAKE_VERSION = """#!/bin/sh
if [ "$1" = --version ]; then echo '{version}'; exit 0; fi
if [ "$1 $2" = "login status" ]; then
  if [ -n "$FAKE_CODEX_LOGGED_IN" ]; then echo 'Logged in using ChatGPT'; exit 0; fi
  echo 'Not logged in' >&2; exit 1
fi
if [ "$1 $2" = "auth status" ]; then  # claude's own check, as 2.1.197 answers it
  if [ -n "$FAKE_CLAUDE_LOGGED_OUT" ]; then echo '{{"loggedIn": false}}'; exit 1; fi
  echo '{{"loggedIn": true, "authMethod": "api_key"}}'; exit 0
fi
if [ "$1" = -p ] && [ -z "$2" ]; then  # gemini 0.61: its auth checked, then no input
  [ "$GEMINI_CLI_TRUST_WORKSPACE" = true ] || exit 55
  if [ -n "$GOOGLE_GEMINI_BASE_URL" ]; then echo 'Invalid auth method selected.' >&2; exit 41; fi
  echo 'No input provided via stdin.' >&2; exit 42
fi
echo "fake {name}: unexpected $*" >&2; exit 2
"""


def fake_bin(folder: Path, names: list[str] | None = None) -> Path:
    """Agent CLIs that print the real tools' --version (and codex's `login status`)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names or list(VERSIONS):
        path = folder / name
        path.write_text(FAKE_VERSION.format(version=VERSIONS[name], name=name))
        path.chmod(0o755)
    return folder


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A HOME of its own, so no login of the machine's user is seen."""
    folder = tmp_path / "home"
    folder.mkdir()
    monkeypatch.setenv("HOME", str(folder))
    for name in (*AGENT_CREDENTIALS, "CLAUDE_CONFIG_DIR", "CODEX_HOME", "XDG_DATA_HOME"):
        monkeypatch.delenv(name, raising=False)
    for name in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "OLLAMA_HOST", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(name, raising=False)
    return folder


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return make_calc_repo(tmp_path / "repo", calc=CALC, tests=TESTS, monkeypatch=monkeypatch)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# credentials ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "env", "files", "source"),
    [
        ("claude", {"ANTHROPIC_API_KEY": "sk-ant-x"}, {}, "ANTHROPIC_API_KEY"),
        ("claude", {"CLAUDE_CODE_OAUTH_TOKEN": "t"}, {}, "CLAUDE_CODE_OAUTH_TOKEN"),
        ("claude", {}, {".claude/.credentials.json": "{}"}, "logged in (~/.claude/.credentials"),
        ("claude", {}, {".claude.json": '{"oauthAccount": {"x": 1}}'}, "~/.claude.json"),
        ("codex", {"CODEX_API_KEY": "k"}, {}, "CODEX_API_KEY"),
        ("codex", {}, {".codex/auth.json": "{}"}, "logged in (~/.codex/auth.json)"),
        ("aider", {"OPENROUTER_API_KEY": "k"}, {}, "OPENROUTER_API_KEY"),
        ("aider", {}, {".aider/oauth-keys.env": 'OPENROUTER_API_KEY="k"\n'}, "OpenRouter login"),
        ("aider", {}, {".env": "ANTHROPIC_API_KEY=k\n"}, "a key in ~/.env"),
        ("aider", {}, {".aider.conf.yml": "model: sonnet\n"}, "~/.aider.conf.yml"),
        ("gemini", {"GOOGLE_API_KEY": "k"}, {}, "GOOGLE_API_KEY"),
        ("gemini", {}, {".gemini/oauth_creds.json": "{}"}, "logged in with Google"),
        ("gemini", {}, {".gemini/.env": "GEMINI_API_KEY=k\n"}, "~/.gemini/.env"),
        ("opencode", {"OPENCODE_API_KEY": "k"}, {}, "OPENCODE_API_KEY"),
        ("opencode", {}, {".local/share/opencode/auth.json": '{"anthropic": {"key": "k"}}'}, "~/"),
    ],
)
def test_credentials_an_agent_cli_can_use(
    name: str, env: dict[str, str], files: dict[str, str], source: str, home: Path
) -> None:
    for relative, text in files.items():
        (home / relative).parent.mkdir(parents=True, exist_ok=True)
        (home / relative).write_text(text)
    found = credentials(name, {"HOME": str(home), **env}, root=home / "nowhere")
    assert found.ok and source in found.source


@pytest.mark.parametrize("name", ["claude", "codex", "aider", "gemini", "opencode"])
def test_no_credentials_is_said_with_a_hint(name: str, home: Path) -> None:
    (home / ".env").write_text("ANTHROPIC_API_KEY=\nUNRELATED=1\n")  # empty values do not count
    found = credentials(name, {"HOME": str(home)}, root=home)
    assert not found.ok and found.hint


def test_aider_with_a_model_needs_no_key_to_start(home: Path) -> None:
    """With a model named aider never offers the browser login; a missing key fails fast."""
    env = {"HOME": str(home)}
    assert credentials("aider", env, root=home, actor_args=["--model", "gpt-4.1"]).ok
    assert credentials("aider", {**env, "AIDER_MODEL": "sonnet"}, root=home).ok


def test_codex_is_asked_when_its_login_is_in_the_keyring(home: Path, tmp_path: Path) -> None:
    binary = str(fake_bin(tmp_path / "bin", ["codex"]) / "codex")
    env = {"HOME": str(home), "PATH": os.environ["PATH"]}
    assert not credentials("codex", env, root=home, binary=binary).ok
    found = credentials("codex", {**env, "FAKE_CODEX_LOGGED_IN": "1"}, root=home, binary=binary)
    assert found.ok and found.source == "Logged in using ChatGPT"


# --actor auto and the preflight ---------------------------------------------------------------


def test_auto_skips_an_agent_cli_that_would_wait_for_a_login(tmp_path: Path, home: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("aider", "gemini"):
        (bin_dir / name).symlink_to(FAKES / name)
    env = {"PATH": str(bin_dir), "HOME": str(home)}
    with pytest.raises(PreflightError) as info:
        make_actor("auto", environ=env, base_dir=tmp_path)
    assert "no actor can run unattended" in info.value.message
    assert "aider (no model and no API key" in info.value.message
    assert "gemini (no GEMINI_API_KEY" in info.value.message
    # GEMINI_API_KEY would do for aider too (it picks a Gemini model): GOOGLE_API_KEY does not
    assert make_actor("auto", environ={**env, "GOOGLE_API_KEY": "k"}, base_dir=tmp_path).name == (
        "gemini"
    )
    fallback = make_actor(
        "auto", environ={**env, "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}, base_dir=tmp_path
    )
    assert fallback.name == "openai:gpt-4.1-mini"


def test_run_refuses_an_agent_cli_without_credentials_before_anything_starts(
    ralph: RunCli, repo: Path, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "agent.log"
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_AGENT_LOG", str(log))
    result = ralph("run", "fix add", "--actor", "aider", "--test", CHECK, cwd=repo)
    assert result.code == 2
    assert result.err.splitlines()[0].startswith("ralph: error: aider cannot run unattended here")
    assert "hint: export ANTHROPIC_API_KEY or OPENAI_API_KEY" in result.err
    assert not log.exists()  # aider never ran, neither as actor nor as reflector
    assert not (repo / ".aiwg/ralph/loops").exists()


# --model -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["claude", "codex", "aider", "gemini", "opencode"])
def test_model_becomes_the_agent_clis_model_flag(name: str, tmp_path: Path) -> None:
    actor = make_actor(name, model="some-model", actor_args=["--x"], base_dir=tmp_path)
    assert f"{name} " in actor.describe()  # type: ignore[attr-defined]
    assert " --model some-model --x" in actor.describe()  # type: ignore[attr-defined]
    chat = actor.chat_client()
    assert chat is not None and chat.model == "some-model"  # the reflector's model too


def test_model_replaces_a_providers_model_and_is_refused_where_meaningless(
    tmp_path: Path,
) -> None:
    env = {"OPENAI_API_KEY": "sk-test", "ANTHROPIC_API_KEY": "k"}
    openai = make_actor("openai:gpt-4o", model="o4-mini", environ=env, base_dir=tmp_path)
    assert openai.name == "openai:o4-mini"
    assert make_actor("anthropic", model="claude-x", environ=env, base_dir=tmp_path).name == (
        "anthropic:claude-x"
    )
    with pytest.raises(ConfigError, match="--model does not apply to --actor cmd:"):
        make_actor("cmd:./agent.sh", model="m", base_dir=tmp_path)
    with pytest.raises(ConfigError, match="two models"):
        make_actor("claude", model="m", actor_args=["--model", "n"], base_dir=tmp_path)


def test_dry_run_shows_the_model_flag_on_the_agents_command_line(
    ralph: RunCli, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("ANTHROPIC_API_KEY", AGENT_CREDENTIALS["ANTHROPIC_API_KEY"])
    result = ralph(
        "run", "fix add", "-a", "claude", "-m", "sonnet", "-t", CHECK, "--dry-run", cwd=repo
    )
    assert result.code == 0, result.err
    # the wait for the memory server (actors/mcp_wiring.py), then claude's own command line
    assert (
        "command  MCP_CONNECT_TIMEOUT_MS=60000 claude -p --output-format stream-json" in result.err
    )
    assert "--permission-mode acceptEdits " in result.err  # then the memory's tools
    assert "--model sonnet < prompt.md" in result.err


# the reflector's timeout ---------------------------------------------------------------------


def test_the_reflector_timeout_bounds_the_default_and_a_named_reflector(tmp_path: Path) -> None:
    from ralph.config import Settings
    from ralph.loop.assembly import make_reflector

    env = {"OPENAI_API_KEY": "sk-test", "PATH": os.environ["PATH"], **AGENT_CREDENTIALS}
    agent = make_actor("claude", base_dir=tmp_path, environ=env)
    settings = Settings(reflector_timeout=42.0)
    assert make_reflector(settings, agent, tmp_path, env).client.timeout == 42.0
    llm = make_actor("openai:gpt-4o", base_dir=tmp_path, environ=env)
    assert make_reflector(settings, llm, tmp_path, env).client._http.deadline == 42.0
    named = Settings(reflector="openai:gpt-4o", reflector_timeout=7.0)
    assert make_reflector(named, agent, tmp_path, env).client._http.deadline == 7.0


HANGING_CLAUDE = """#!{python}
import json, sys, time
if "plan" in sys.argv:  # the read-only run that reflects: it never answers
    time.sleep(600)
sys.stdin.read()
print(json.dumps({{"type": "result", "subtype": "success", "is_error": False, "result": "ok"}}))
"""


def test_a_reflector_that_hangs_is_stopped_and_the_loop_goes_on(
    ralph: RunCli, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "hang"
    bin_dir.mkdir()
    (bin_dir / "claude").write_text(HANGING_CLAUDE.format(python=sys.executable))
    (bin_dir / "claude").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("ANTHROPIC_API_KEY", AGENT_CREDENTIALS["ANTHROPIC_API_KEY"])
    monkeypatch.setenv("RALPH_REFLECTOR_TIMEOUT", "1s")
    result = ralph("run", "fix add", "-a", "claude", "-t", CHECK, "-n", "1", "--json", cwd=repo)
    assert result.code == 1, result.err
    loop_id = json.loads(result.out)["loop_id"]
    record = json.loads((repo / f".aiwg/ralph/reflections/{loop_id}/001.json").read_text())
    assert record["ralph"]["reflection_source"] == "heuristic"
    assert "claude timed out after 1s (--reflector-timeout)" in result.err


# ralph doctor --------------------------------------------------------------------------------


def test_doctor_shows_agents_providers_checks_git_and_memory(
    ralph: RunCli, repo: Path, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = fake_bin(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-doctor-key-0000")  # claude, aider, opencode
    (home / ".gemini").mkdir()
    (home / ".gemini/oauth_creds.json").write_text('{"token": "x"}')
    monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{closed_port()}")
    with FakeProvider(default_text="ok") as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.environ()["OPENAI_BASE_URL"])  # no key:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.environ()["ANTHROPIC_BASE_URL"])
        result = ralph("doctor", "-a", AGENT, "-t", CHECK, "--json", cwd=repo)
        asked = {request.path for request in fake.requests}
    assert result.code == 0, result.out + result.err
    report = json.loads(result.out)
    assert report["ok"] is True
    found = {(f["area"], f["name"]): f for f in report["findings"]}
    for name, version in VERSIONS.items():
        assert version in found["agent", name]["detail"]
    assert {n: found["agent", n]["status"] for n in VERSIONS} == {
        "claude": "ready",
        "codex": "no credentials",
        "aider": "ready",
        "gemini": "ready",
        "opencode": "ready",
    }
    assert "login" in found["agent", "codex"]["hint"]
    assert found["provider", "openai"]["status"] == "reachable"
    assert found["provider", "anthropic"]["status"] == "reachable"
    assert found["provider", "ollama"]["status"] == "unreachable"  # nothing listens there
    assert found["provider", "ollama"]["ok"] is None  # not used: for information only
    assert asked == {"/v1/models"}  # a listing, no chat: no tokens spent
    assert found["check", "tests"]["status"] == "fail, target"
    assert found["git", "repository"]["status"] == "ok"
    assert found["memory", ".aiwg/ralph"]["ok"] is True
    assert found["actor", AGENT]["ok"] is True
    assert "sk-ant-doctor-key-0000" not in result.out


def test_doctor_exits_1_naming_what_stops_a_loop(
    ralph: RunCli, repo: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent) + os.pathsep + "/usr/bin:/bin")
    (repo / "calc.py").write_text(CALC + "# edit\n")
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{closed_port()}/v1")
    flags = ["-a", "openai", "--reflector", "heuristic", "-t", CHECK, "--no-run"]
    result = ralph("doctor", *flags, cwd=repo)
    assert result.code == 1
    assert "a loop cannot start here: git repository, provider openai" in result.out
    assert "git repository: `git stash` (then `git stash pop` after the loop)" in result.out
    assert "provider openai: check the key and the base URL variable" in result.out
    lines = result.out.splitlines()
    assert lines[0].split("\t") == ["area", "what", "status", "detail"]  # a pipe gets TSV
    assert any(line.startswith("check\ttests\tfound\t") for line in lines)
    no_checks = ralph("doctor", "-a", AGENT, "--no-run", "--json", cwd=repo)
    report = json.loads(no_checks.out)
    assert no_checks.code == 1 and report["ok"] is False
    [check] = [f for f in report["findings"] if f["area"] == "check"]
    assert check["status"] == "none" and "ralph init" in check["hint"]


def test_doctor_names_invalid_settings_and_a_missing_tool(
    ralph: RunCli, repo: Path, home: Path
) -> None:
    (repo / "pyproject.toml").write_text("[tool.ralph]\nmax-iterations = 0\n")
    result = ralph("doctor", "-a", AGENT, "-t", CHECK, "--json", cwd=repo)
    assert result.code == 1
    found = {f["area"]: f for f in json.loads(result.out)["findings"]}
    assert found["settings"]["status"] == "invalid"
    assert "max_iterations" in found["settings"]["detail"]
    (repo / "pyproject.toml").write_text("[tool.ralph]\nmax-iterations = 2\n")
    result = ralph("doctor", "-a", AGENT, "--check", "no-such-tool-x --flag", "--json", cwd=repo)
    found = {f["area"]: f for f in json.loads(result.out)["findings"]}
    assert result.code == 1 and found["check"]["status"] == "missing"
    assert found["settings"]["detail"].startswith("pyproject.toml [tool.ralph]")


def test_doctor_warns_of_a_tree_left_on_a_loop_branch_and_blocks_while_its_loop_runs(
    ralph: RunCli, repo: Path, home: Path
) -> None:
    """A loop without --worktree leaves the tree on its branch; a new loop would start from
    that loop's work. `ralph run` allows it (a warning, with the way back to the branch the
    first loop started from); a loop running in this tree holds its lock (a blocker)."""
    from ralph.memory.store import MemoryStore

    from .fakes.calc_project import git

    loop = ["-a", AGENT, "-t", CHECK, "--reflector", "heuristic", "--max-iterations", "1"]
    doctor = ["doctor", "-a", AGENT, "-t", CHECK, "--no-run", "--json"]

    def branch_row() -> tuple[int, dict[str, object] | None]:
        result = ralph(*doctor, cwd=repo)
        rows = json.loads(result.out)["findings"]
        found = [f for f in rows if (f["area"], f["name"]) == ("git", "branch")]
        return result.code, found[0] if found else None

    assert branch_row() == (0, None)  # on main: nothing to say
    first = ralph("run", "fix add", *loop, "--json", cwd=repo)
    assert first.code == 1, first.err
    first_id = json.loads(first.out)["loop_id"]
    branch = git(repo, "rev-parse", "--abbrev-ref", "HEAD")
    assert branch.startswith("ralph/fix-add-")
    code, row = branch_row()
    assert code == 0 and row is not None
    assert (row["status"], row["ok"], row["hint"]) == ("loop branch", None, "git switch main")
    assert f"left by loop {first_id} (failed) from main" in str(row["detail"])

    # a loop can start there (from the first loop's work); the way back still leads to main
    second = ralph("run", "fix add again", *loop, "--json", cwd=repo)
    assert second.code == 1, second.err
    second_id = json.loads(second.out)["loop_id"]
    assert json.loads(second.out)["base_branch"] == branch
    code, row = branch_row()
    assert code == 0 and row is not None and row["hint"] == "git switch main"
    assert f"left by loop {second_id} (failed) from main" in str(row["detail"])

    # while that loop runs in this tree, no other loop can start here
    store = MemoryStore(repo)
    state = store.read_state(second_id)
    state.status = "running"
    store.write_state(state)
    with store.lock(second_id, repo):
        code, row = branch_row()
        text = ralph("doctor", "-a", AGENT, "-t", CHECK, "--no-run", cwd=repo)
    assert code == 1 and row is not None and (row["status"], row["ok"]) == ("loop running", False)
    assert f"ralph abort {second_id}" in str(row["hint"])
    assert "a loop cannot start here: git branch" in text.out
    state.status = "paused"
    store.write_state(state)
    code, row = branch_row()
    assert code == 0 and row is not None
    assert row["hint"] == f"git switch main (or `ralph resume {second_id}`)"

    git(repo, "switch", "-q", "-c", "ralph/fix-other-0123abcd")  # a loop this memory lacks
    code, row = branch_row()
    assert code == 0 and row is not None and row["hint"] == "git switch <your branch>"
    git(repo, "switch", "-q", "main")
    assert branch_row() == (0, None)


def test_a_check_s_colour_follows_its_status_not_whether_a_loop_can_start() -> None:
    """cachetools: `fail, target` was green, the colour of a finding that is fine."""
    import io

    from rich.console import Console

    from ralph.cli.diagnosis import Diagnosis, Row

    rows = [
        Row("check", "pytest", "fail, target", "9 of 476 tests failed"),
        Row("check", "ruff", "pass, target", "passes"),
    ]
    out = io.StringIO()
    Console(file=out, force_terminal=True, width=120, color_system="standard").print(
        Diagnosis.of(rows), crop=False
    )
    text = out.getvalue()
    assert "\x1b[31mfail, target" in text and "\x1b[32mpass, target" in text, repr(text)


# doctor tells the truth: the actor reaches its model ------------------------------------------


def test_doctor_asks_gemini_itself_and_fails_the_actor_it_refuses(
    ralph: RunCli, repo: Path, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gemini 0.61 with GOOGLE_GEMINI_BASE_URL exits 41 ("Invalid auth method selected.") at
    its first run, while its key made doctor call it ready and say "a loop can start here"."""
    bin_dir = fake_bin(tmp_path / "bin", ["gemini"])
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("GEMINI_API_KEY", "gm-doctor-key-0000")
    flags = ["-a", "gemini", "--reflector", "heuristic", "-t", CHECK, "--no-run"]
    assert ralph("doctor", *flags, cwd=repo).code == 0  # its own check passes: exit 42
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", f"http://127.0.0.1:{closed_port()}")
    result = ralph("doctor", *flags, cwd=repo)
    assert result.code == 1
    assert "a loop can start here" not in result.out
    assert "a loop cannot start here: actor gemini" in result.out
    found = {(f["area"], f["name"]): f for f in doctor_json(ralph, repo, flags)["findings"]}
    # known before gemini runs (readiness: the endpoint with no auth method selected), with
    # gemini's own words and the setting that fixes it
    assert found["actor", "gemini"]["status"] == "cannot run"
    assert "Invalid auth method selected." in found["actor", "gemini"]["detail"]
    assert found["agent", "gemini"]["status"] != "ready"


def doctor_json(ralph: RunCli, repo: Path, flags: list[str]) -> dict[str, Any]:
    result = ralph("doctor", *flags, "--json", cwd=repo)
    assert result.out, result.err
    data: dict[str, Any] = json.loads(result.out)
    return data


def test_an_unreachable_provider_the_auto_actor_uses_stops_the_loop(
    ralph: RunCli, repo: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--actor auto` picked openai; doctor said "provider openai unreachable" beside "a loop
    can start here", and the run spent 23 s on six retries before exit 2."""
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent) + os.pathsep + "/usr/bin:/bin")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-doctor-openai-0000")
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{closed_port()}/v1")
    result = ralph("doctor", "--reflector", "heuristic", "-t", CHECK, "--no-run", cwd=repo)
    assert result.code == 1, result.out
    assert "a loop can start here" not in result.out
    assert "a loop cannot start here: provider openai" in result.out
    with FakeProvider(default_text="ok") as fake:  # now it answers
        monkeypatch.setenv("OPENAI_BASE_URL", fake.environ()["OPENAI_BASE_URL"])
        result = ralph("doctor", "--reflector", "heuristic", "-t", CHECK, "--no-run", cwd=repo)
    assert result.code == 0, result.out
    assert result.out.rstrip().endswith("a loop can start here")


def test_doctor_says_when_an_agent_cli_is_newer_than_the_verified_one(
    ralph: RunCli, repo: Path, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ralph.actors.verified import VERIFIED

    bin_dir = fake_bin(tmp_path / "bin", ["claude", "codex"])
    (bin_dir / "claude").write_text(
        (bin_dir / "claude").read_text().replace("2.0.14 (Claude Code)", "2.2.0 (Claude Code)")
    )
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-doctor-key-0000")
    flags = ["-a", AGENT, "-t", CHECK, "--no-run"]
    found = {(f["area"], f["name"]): f for f in doctor_json(ralph, repo, flags)["findings"]}
    claude = VERIFIED["claude"][1]
    assert (
        f"2.2.0 (Claude Code) (newer than {claude}, the version ralph"
        in (found["agent", "claude"]["detail"])
    )
    assert "newer than" not in found["agent", "codex"]["detail"]  # 0.46.0: older
    assert found["agent", "claude"]["status"] == "ready"


def test_init_suggests_only_an_actor_that_passed_its_own_check(
    ralph: RunCli, repo: Path, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = fake_bin(tmp_path / "bin", ["claude", "gemini"])
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-doctor-key-0000")
    monkeypatch.setenv("GEMINI_API_KEY", "gm-doctor-key-0000")
    monkeypatch.setenv("FAKE_CLAUDE_LOGGED_OUT", "1")  # claude's own check refuses
    result = ralph("init", "--no-run", cwd=repo)
    assert result.code == 0, result.err
    assert "actor: gemini (found here)" in result.out
    monkeypatch.delenv("FAKE_CLAUDE_LOGGED_OUT")
    assert "actor: claude (found here)" in ralph("init", "--no-run", "--force", cwd=repo).out
