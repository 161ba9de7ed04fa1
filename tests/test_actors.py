"""Actors: cmd, the agent CLI presets (against fake CLIs), the LLM actor, scripts, the registry."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ralph.actors.agent_output import parse_aider
from ralph.actors.agents import PRESETS, AgentActor
from ralph.actors.base import ActorContext, ToolCall
from ralph.actors.command import CommandActor
from ralph.actors.llm import LLMActor, build_user_message, prose
from ralph.actors.registry import make_actor
from ralph.actors.scripted import ScriptedActor
from ralph.errors import ConfigError, PreflightError, ProviderError
from ralph.providers.base import ChatResponse, Message
from tests.fakes import AGENT_CREDENTIALS

FAKES = Path(__file__).parent / "fakes" / "agents"
EDIT = "FAKE-EDIT: app.py :: VALUE = 1 => VALUE = 2"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "app.py").write_text("VALUE = 1\n")
    return root


@pytest.fixture
def ctx(project: Path, tmp_path: Path) -> ActorContext:
    return ActorContext(
        loop_id="ralph-test-0a1b2c3d",
        iteration=1,
        workdir=project,
        artifacts_dir=tmp_path / "artifacts" / "001",
        iteration_timeout=60,
        idle_timeout=30,
    )


@pytest.fixture
def fake_log(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The fake agent CLIs first on PATH; returns the file they log their calls to."""
    log = tmp_path / "fake-calls.jsonl"
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("FAKE_AGENT_LOG", str(log))
    for name, value in AGENT_CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    return log


def calls(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


# --------------------------------------------------------------------------- cmd:


def test_cmd_actor_gets_prompt_on_stdin_and_in_a_file_and_ralph_env(ctx: ActorContext) -> None:
    script = (
        'cat > stdin.txt; cp "$RALPH_PROMPT_FILE" from_file.txt; '
        'printf "%s\\n" "$RALPH_LOOP_ID" "$RALPH_ITERATION" "$RALPH_WORKDIR" > env.txt; '
        "echo to-stdout; echo to-stderr >&2; exit 3"
    )
    result = CommandActor(script).act("Fix the parser.\n", ctx)
    assert (ctx.workdir / "stdin.txt").read_text() == "Fix the parser.\n"
    assert (ctx.workdir / "from_file.txt").read_text() == "Fix the parser.\n"
    assert (ctx.artifacts_dir / "prompt.md").read_text() == "Fix the parser.\n"
    assert (ctx.workdir / "env.txt").read_text().split() == [
        "ralph-test-0a1b2c3d",
        "1",
        str(ctx.workdir),
    ]
    assert result.exit_code == 3
    assert "to-stdout" in result.output and "to-stderr" in result.output
    assert (ctx.artifacts_dir / "actor.log").read_text() == result.output
    assert result.timed_out is None
    assert result.cost_usd is None and result.tokens_in is None


def test_cmd_actor_is_killed_at_the_idle_timeout(ctx: ActorContext) -> None:
    ctx.idle_timeout = 0.5
    result = CommandActor("echo started; sleep 30 & wait").act("go", ctx)
    assert result.timed_out == "idle"
    assert "started" in result.output
    assert result.exit_code != 0


def test_cmd_actor_streams_output_to_the_callback(ctx: ActorContext) -> None:
    seen: list[tuple[str, str]] = []
    ctx.on_output = lambda stream, text: seen.append((stream, text))
    CommandActor("echo hello").act("go", ctx)
    assert ("stdout", "hello\n") in seen


def test_cmd_actor_spec_quotes_are_stripped_and_empty_is_refused() -> None:
    assert CommandActor('"./agent.sh --fast"').command == "./agent.sh --fast"
    with pytest.raises(ConfigError):
        CommandActor("  ")


def test_cmd_preflight_names_a_missing_program() -> None:
    with pytest.raises(PreflightError, match="no-such-agent-xyz"):
        CommandActor("no-such-agent-xyz --go").preflight()
    CommandActor("FOO=1 sh -c true").preflight()
    CommandActor("cd sub && ./run.sh").preflight()
    assert CommandActor("echo hi").chat_client() is None


def agent_script(folder: Path, body: str = "echo edited app.py") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "agent.sh"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return script


def test_cmd_relative_program_is_the_file_in_the_invocation_directory(
    ctx: ActorContext, tmp_path: Path
) -> None:
    here = tmp_path / "invoked" / "repo"
    here.mkdir(parents=True)
    script = agent_script(tmp_path / "invoked" / "agents", "pwd > ran-in.txt; echo ran")
    actor = CommandActor("../agents/agent.sh --fast", invoked_from=here, base_dir=ctx.workdir)
    assert actor.command == f"{script} --fast"  # `..` tidied: the same file
    actor.preflight()
    # the attempt runs in another tree (a worktree), yet the same file runs
    assert actor.act("go", ctx).exit_code == 0
    assert (ctx.workdir / "ran-in.txt").read_text().strip() == str(ctx.workdir)
    prefixed = CommandActor("FOO=1 ./agent.sh", invoked_from=script.parent)
    assert prefixed.command == f"FOO=1 {script}"


def test_cmd_relative_program_not_in_the_invocation_directory_stays_as_written(
    ctx: ActorContext, tmp_path: Path
) -> None:
    agent_script(ctx.workdir / "tools")
    actor = CommandActor("tools/agent.sh", invoked_from=tmp_path, base_dir=ctx.workdir)
    assert actor.command == "tools/agent.sh"
    actor.preflight()  # found where it runs
    with pytest.raises(PreflightError, match="missing"):
        CommandActor("./missing.sh", invoked_from=tmp_path, base_dir=ctx.workdir).preflight()
    (ctx.workdir / "tools" / "agent.sh").chmod(0o644)
    with pytest.raises(PreflightError, match="not executable") as raised:
        CommandActor("tools/agent.sh", invoked_from=tmp_path, base_dir=ctx.workdir).preflight()
    assert raised.value.hint == "chmod +x tools/agent.sh"
    assert CommandActor("echo ./x; ./y", invoked_from=tmp_path).command == "echo ./x; ./y"


@pytest.mark.parametrize(
    ("command", "why"),
    [
        ("./missing.sh", "exit 127: not found"),
        ("./missing.sh | cat", "not found: ./missing.sh"),  # the pipeline exits 0
        ("./plain.txt", "exit 126: not executable"),
    ],
)
def test_cmd_agent_that_cannot_start_at_its_first_attempt_is_a_configuration_error(
    ctx: ActorContext, command: str, why: str
) -> None:
    (ctx.workdir / "plain.txt").write_text("not a program\n")
    actor = CommandActor(command, base_dir=ctx.workdir)
    with pytest.raises(PreflightError) as raised:
        actor.act("go", ctx)
    message = raised.value.message
    assert why in message and f"--actor cmd:{command}" in message
    assert str(ctx.artifacts_dir / "actor.log") in message and "\n" not in message
    assert (ctx.artifacts_dir / "actor.log").is_file()
    assert raised.value.exit_code == 2


def test_cmd_agent_summary_is_its_last_lines_bounded_clean_and_redacted(
    ctx: ActorContext,
) -> None:
    lines = "".join(f"echo line {n}; " for n in range(1, 9))
    secret = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
    command = f"{lines}echo; printf '\\033[31mred\\033[0m {secret}\\n'; echo noise >&2; exit 3"
    summary = CommandActor(command).act("go", ctx).summary
    assert summary == "line 5\nline 6\nline 7\nline 8\nred [REDACTED]\n(the agent exited 3)"
    wide = "; ".join(f"printf '{n}%0199d\\n' 0" for n in range(5))  # 5 lines of 200 chars
    long = CommandActor(wide).act("go", ctx).summary
    assert long is not None and [line[0] for line in long.splitlines()] == ["3", "4"]
    assert CommandActor("echo only-on-stderr >&2").act("go", ctx).summary == "only-on-stderr"
    assert CommandActor("true").act("go", ctx).summary is None  # the record's stand-in


def test_cmd_agent_exiting_127_after_its_first_attempt_is_its_own_business(
    ctx: ActorContext,
) -> None:
    flag = ctx.workdir / "second"
    actor = CommandActor(f"test -e {flag} && exit 127; touch {flag}")
    assert actor.act("go", ctx).exit_code == 0
    assert actor.act("go", ctx).exit_code == 127


# --------------------------------------------------------------------------- presets

EXPECTED: dict[str, dict[str, Any]] = {
    "claude": {
        "tokens": (12 + 1000 + 2000, 345),
        "cost": 0.0123,
        "tools": ["Read", "Edit"],
        "summary": "I made 1 edit(s).",
    },
    "codex": {
        "tokens": (24763, 122),
        "cost": None,
        "tools": ["command", "command", "file_change"],
        "summary": "Applied 1 change(s).",
    },
    "aider": {"tokens": (2500, 86), "cost": 0.0088, "tools": ["edit"], "summary": None},
    "gemini": {
        "tokens": (1700, 140),
        "cost": None,
        "tools": ["replace"],
        "summary": "Edited 1 file(s).",
    },
    "opencode": {
        "tokens": (1200 + 200 + 1500 + 200, 80 + 10 + 60 + 10),
        "cost": 0.0031,
        "tools": ["edit"],
        "summary": "Changed 1 file(s).",
    },
}


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_preset_runs_the_real_command_line_and_parses_its_output(
    name: str, ctx: ActorContext, fake_log: Path
) -> None:
    actor = make_actor(name, base_dir=ctx.workdir)
    actor.preflight()
    result = actor.act(f"Make the test pass.\n{EDIT}\n", ctx)
    expected = EXPECTED[name]
    assert result.exit_code == 0, result.output
    assert (ctx.workdir / "app.py").read_text() == "VALUE = 2\n"
    assert (result.tokens_in, result.tokens_out) == expected["tokens"]
    assert (
        result.cost_usd == pytest.approx(expected["cost"])
        if expected["cost"]
        else (result.cost_usd is None)
    )
    assert [call.name for call in result.tool_calls] == expected["tools"]
    assert any("app.py" in (call.detail or "") for call in result.tool_calls)
    if expected["summary"]:
        assert result.summary == expected["summary"]
    assert (ctx.artifacts_dir / "prompt.md").read_text().endswith(f"{EDIT}\n")
    assert (ctx.artifacts_dir / "actor.log").read_text() == result.output
    [call] = calls(fake_log)
    assert call["mode"] == "act"
    assert call["cwd"] == str(ctx.workdir)
    assert call["env"]["RALPH_ITERATION"] == "1"
    assert EDIT in call["prompt"]


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("claude", ["--model", "sonnet"]),
        ("codex", ["-m", "o4-mini"]),
        ("aider", ["--model", "gpt-4.1"]),
        ("gemini", ["-m", "gemini-2.5-flash"]),
        ("opencode", ["--model", "anthropic/claude-sonnet-4-5"]),
    ],
)
def test_actor_args_pass_through_to_the_agent(
    name: str, args: list[str], ctx: ActorContext, fake_log: Path
) -> None:
    result = make_actor(name, actor_args=args, base_dir=ctx.workdir).act(EDIT, ctx)
    assert result.exit_code == 0, result.output
    argv = calls(fake_log)[0]["argv"]
    position = argv.index(args[0])
    assert argv[position : position + 2] == args
    if name == "codex":
        assert argv[-1] == "-"


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_preset_chat_client_answers_read_only(
    name: str, ctx: ActorContext, fake_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_AGENT_ANSWER", '{"reflection_text": "check the off-by-one"}')
    actor = make_actor(name, actor_args=["--model", "m1"], base_dir=ctx.workdir)
    client = actor.chat_client()
    assert client is not None
    response = client.chat(
        [Message("system", "You reflect."), Message("user", f"Why did it fail?\n{EDIT}")],
        json_mode=True,
    )
    assert json.loads(response.text) == {"reflection_text": "check the off-by-one"}
    assert response.model == "m1"
    assert (ctx.workdir / "app.py").read_text() == "VALUE = 1\n"
    [call] = calls(fake_log)
    assert call["mode"] == "chat"
    assert call["argv"][call["argv"].index("--model") + 1] == "m1"
    assert call["prompt"].startswith("You reflect.")
    assert "one JSON object" in call["prompt"]


def test_chat_client_never_forwards_permission_flags(ctx: ActorContext, fake_log: Path) -> None:
    actor = make_actor(
        "claude", actor_args=["--max-turns", "3", "--model", "opus"], base_dir=ctx.workdir
    )
    client = actor.chat_client()
    assert client is not None
    client.chat([Message("user", "hi")])
    argv = calls(fake_log)[0]["argv"]
    assert "--max-turns" not in argv
    assert argv[argv.index("--permission-mode") + 1] == "plan"


def test_chat_client_without_an_answer_is_a_provider_error(
    ctx: ActorContext, fake_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_AGENT_ANSWER", "")
    client = make_actor("codex", base_dir=ctx.workdir).chat_client()
    assert client is not None
    with pytest.raises(ProviderError, match="codex gave no answer"):
        client.chat([Message("user", "hi")])


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_missing_binary_is_a_preflight_error_with_install_hint(name: str, tmp_path: Path) -> None:
    actor = make_actor(name, environ={"PATH": str(tmp_path)}, base_dir=tmp_path)
    with pytest.raises(PreflightError, match=name) as info:
        actor.preflight()
    assert info.value.hint is not None and "install" in info.value.hint


def test_fake_agent_refuses_a_command_line_the_real_tool_would_reject(tmp_path: Path) -> None:
    result = subprocess.run(
        [str(FAKES / "claude"), "-p", "--output-format", "stream-json"],
        input="hi",
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert result.returncode == 2
    assert "requires --verbose" in result.stderr


def test_agent_failure_is_reported_not_raised(ctx: ActorContext, fake_log: Path) -> None:
    actor = make_actor("codex", actor_args=["--full-auto"], base_dir=ctx.workdir)
    result = actor.act(EDIT, ctx)
    assert result.exit_code == 2
    assert "--full-auto" in result.output
    assert (ctx.workdir / "app.py").read_text() == "VALUE = 1\n"


def test_aider_parser_reads_k_suffixes_cache_tokens_and_missing_cost() -> None:
    out = parse_aider(
        "Aider v0.86.1\nsome answer\n"
        "Tokens: 4.2k sent, 3.8k cache write, 1.2k cache hit, 302 received.\n"
        "Tokens: 1,234 sent, 5 received.\n"
    )
    assert (out.tokens_in, out.tokens_out) == (4200 + 1234, 307)
    assert out.cost_usd is None
    assert out.text == "some answer"


def test_agent_actor_names_and_presets_match() -> None:
    assert sorted(PRESETS) == ["aider", "claude", "codex", "gemini", "opencode"]
    assert isinstance(make_actor("gemini", base_dir=Path.cwd()), AgentActor)


# --------------------------------------------------------------------------- LLM actor


class FakeChat:
    """An in-process ChatClient: records the conversation, answers from a list."""

    def __init__(self, *answers: str, cost: float | None = 0.002) -> None:
        self.model = "fake-model"
        self.answers = list(answers)
        self.cost = cost
        self.seen: list[list[Message]] = []

    def chat(
        self, messages: list[Message], *, json_mode: bool = False, max_tokens: int | None = None
    ) -> ChatResponse:
        self.seen.append(messages)
        return ChatResponse(self.answers.pop(0), self.model, 900, 120, self.cost)


def edit_block(path: str, search: str, replace: str) -> str:
    return f"{path}\n```python\n<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n```\n"


def test_llm_actor_applies_edit_blocks_and_reports_usage(ctx: ActorContext) -> None:
    answer = "The constant is off by one.\n\n" + edit_block("app.py", "VALUE = 1\n", "VALUE = 2\n")
    answer += edit_block("new_test.py", "", "def test_value():\n    assert True\n")
    client = FakeChat(answer)
    actor = LLMActor("openai:fake-model", client)
    result = actor.act("tests fail at app.py:1 with AssertionError", ctx)
    assert (ctx.workdir / "app.py").read_text() == "VALUE = 2\n"
    assert (ctx.workdir / "new_test.py").exists()
    assert result.exit_code == 0
    assert (result.tokens_in, result.tokens_out, result.cost_usd) == (900, 120, 0.002)
    assert result.tool_calls == [ToolCall("edit", "app.py"), ToolCall("create", "new_test.py")]
    assert result.summary == "The constant is off by one."
    assert result.unmatched_edits == []
    assert actor.chat_client() is client
    system, user = client.seen[0]
    assert system.role == "system" and "<<<<<<< SEARCH" in system.content
    assert "app.py\n```\nVALUE = 1\n```" in user.content
    # prompt.md is the loop's prompt; what went to the model (system text, files) is request.md
    assert (ctx.artifacts_dir / "prompt.md").read_text() == (
        "tests fail at app.py:1 with AssertionError"
    )
    request = (ctx.artifacts_dir / "request.md").read_text()
    assert "<!-- system -->" in request and "VALUE = 1" in request


def test_an_actor_never_overwrites_the_prompt_the_loop_wrote(ctx: ActorContext) -> None:
    ctx.artifacts_dir.mkdir(parents=True, exist_ok=True)
    (ctx.artifacts_dir / "prompt.md").write_text("the loop's prompt\n")
    LLMActor("openai:fake-model", FakeChat("no edits")).act("something else", ctx)
    assert (ctx.artifacts_dir / "prompt.md").read_text() == "the loop's prompt\n"


def test_llm_actor_records_blocks_that_did_not_match(ctx: ActorContext) -> None:
    answer = edit_block("app.py", "VALUE = 3\n", "VALUE = 4\n")
    result = LLMActor("ollama:x", FakeChat(answer)).act("fix app.py", ctx)
    assert result.exit_code == 1
    assert (ctx.workdir / "app.py").read_text() == "VALUE = 1\n"
    assert len(result.unmatched_edits) == 1
    assert "app.py" in result.unmatched_edits[0] and "VALUE = 3" in result.unmatched_edits[0]
    assert "failed:" in (ctx.artifacts_dir / "actor.log").read_text()


def test_llm_actor_says_when_the_answer_has_no_blocks(ctx: ActorContext) -> None:
    result = LLMActor("anthropic:x", FakeChat("I think it is fine.", cost=None)).act("fix", ctx)
    assert result.unmatched_edits == [
        "the answer contained no SEARCH/REPLACE blocks; nothing was changed"
    ]
    assert result.cost_usd is None


def test_context_includes_diagnostic_files_first_and_skips_unsafe_ones(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / "src" / "dates.py").write_text("def parse():\n    return None\n")
    (root / "README.md").write_text("# Dates\n")
    (root / ".aiwg" / "ralph").mkdir(parents=True)
    (root / ".aiwg" / "ralph" / "config.yaml").write_text("secret: memory\n")
    (tmp_path / "outside.py").write_text("OUTSIDE = 1\n")
    prompt = (
        "Task: see README.md and fix the parser.\n"
        f"FAILED tests/test_dates.py::test_parse - {root}/src/dates.py:2: AssertionError\n"
        "Also ../outside.py and .aiwg/ralph/config.yaml and missing.py\n"
    )
    message = build_user_message(prompt, root, budget_chars=10_000)
    assert message.startswith(prompt.rstrip())
    files = message.split("## Files", 1)[1]
    assert files.index("src/dates.py\n```") < files.index("README.md\n```")
    assert "OUTSIDE" not in message and "secret: memory" not in message
    assert "## Repository files" in message


def test_context_budget_windows_big_files_around_the_cited_line(tmp_path: Path) -> None:
    (tmp_path / "big.py").write_text("".join(f"line_{i} = {i}\n" for i in range(1, 2001)))
    (tmp_path / "other.py").write_text("x = 1\n" * 3000)
    message = build_user_message("error at big.py:1000 and other.py", tmp_path, 6_000)
    assert "big.py (lines 960-1040 of 2001)" in message
    assert "line_1000 = 1000" in message and "line_5 = 5\n" not in message
    assert "other.py\n```" not in message
    assert len(message) < 8_000


def test_prose_drops_the_edit_blocks() -> None:
    answer = "Intro.\n\n" + edit_block("a.py", "x\n", "y\n") + "\nOutro."
    assert prose(answer) == "Intro.\n\n\nOutro."


# --------------------------------------------------------------------------- script:

SCRIPT = """\
iterations:
  - summary: partial fix
    edits: |
      app.py
      <<<<<<< SEARCH
      VALUE = 1
      =======
      VALUE = 2
      >>>>>>> REPLACE
    tokens_in: 1000
    tokens_out: 200
    cost_usd: 0.01
  - when_prompt_contains: ["off-by-one", "VALUE"]
    summary: full fix, thanks to the reflection
    write: {app.py: "VALUE = 3\\n", notes/fix.md: "done\\n"}
    delete: [old.py]
    otherwise:
      summary: still guessing
      edits: |
        app.py
        <<<<<<< SEARCH
        VALUE = 99
        =======
        VALUE = 100
        >>>>>>> REPLACE
"""


@pytest.fixture
def script(project: Path) -> Path:
    path = project / "demo.yaml"
    path.write_text(SCRIPT)
    (project / "old.py").write_text("old\n")
    return path


def test_scripted_actor_plays_items_by_iteration(script: Path, ctx: ActorContext) -> None:
    actor = make_actor("script:demo.yaml", base_dir=script.parent)
    assert isinstance(actor, ScriptedActor)
    first = actor.act("fix it", ctx)
    assert (ctx.workdir / "app.py").read_text() == "VALUE = 2\n"
    assert (first.tokens_in, first.tokens_out, first.cost_usd) == (1000, 200, 0.01)
    assert first.summary == "partial fix"
    assert first.tool_calls == [ToolCall("edit", "app.py")]
    assert actor.chat_client() is None


def test_scripted_actor_takes_the_full_fix_only_when_the_prompt_has_the_words(
    script: Path, ctx: ActorContext
) -> None:
    actor = ScriptedActor(script)
    ctx.iteration = 2
    guess = actor.act("the previous attempt failed", ctx)
    assert guess.summary == "still guessing"
    assert guess.exit_code == 1 and "VALUE = 99" in guess.unmatched_edits[0]
    assert (ctx.workdir / "app.py").read_text() == "VALUE = 1\n"

    ctx.iteration = 7  # past the end: the last item repeats
    full = actor.act("reflection: an off-by-one in VALUE", ctx)
    assert full.summary == "full fix, thanks to the reflection"
    assert (ctx.workdir / "app.py").read_text() == "VALUE = 3\n"
    assert (ctx.workdir / "notes" / "fix.md").read_text() == "done\n"
    assert not (ctx.workdir / "old.py").exists()
    assert [c.name for c in full.tool_calls] == ["write", "write", "delete"]
    assert full.tokens_in is None and full.cost_usd is None
    assert "branch when" in (ctx.artifacts_dir / "actor.log").read_text()


def test_scripted_actor_refuses_paths_outside_the_repository(
    project: Path, ctx: ActorContext, tmp_path: Path
) -> None:
    path = project / "bad.yaml"
    path.write_text('iterations:\n  - write: {"../escaped.txt": "x"}\n    delete: [".git/HEAD"]\n')
    result = ScriptedActor(path).act("go", ctx)
    assert not (tmp_path / "escaped.txt").exists()
    assert len(result.unmatched_edits) == 2
    assert result.exit_code == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("iterations: [\n", "invalid YAML"),
        ("steps: []\n", "iterations"),
        ("iterations: []\n", "iterations"),
        ("iterations:\n  - wrte: {a: b}\n", "unknown key 'wrte'"),
        ("iterations:\n  - cost_usd: lots\n", "cost_usd"),
        ("iterations:\n  - when_prompt_contains: [1]\n", "when_prompt_contains"),
        ("iterations:\n  - otherwise: {delete: x}\n", "delete"),
    ],
)
def test_bad_scripts_are_config_errors(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        ScriptedActor(path)


def test_missing_script_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        make_actor("script:nope.yaml", base_dir=tmp_path)


# --------------------------------------------------------------------------- registry


def test_registry_builds_each_kind(tmp_path: Path) -> None:
    env = {"PATH": str(tmp_path), "OPENAI_API_KEY": "sk-test", "ANTHROPIC_API_KEY": "k"}
    assert isinstance(make_actor('cmd:"echo hi"', base_dir=tmp_path), CommandActor)
    openai = make_actor("openai:gpt-4o", environ=env, base_dir=tmp_path)
    assert isinstance(openai, LLMActor) and openai.client.model == "gpt-4o"
    anthropic = make_actor("anthropic", environ=env, base_dir=tmp_path)
    assert isinstance(anthropic, LLMActor) and anthropic.name == "anthropic:claude-sonnet-4-5"
    ollama = make_actor("ollama:qwen2.5-coder:7b", environ=env, base_dir=tmp_path)
    assert isinstance(ollama, LLMActor) and ollama.client.model == "qwen2.5-coder:7b"


def test_registry_rejects_unknown_specs_listing_valid_forms(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        make_actor("gpt-4o", base_dir=tmp_path)
    assert info.value.hint is not None
    for form in ("auto", "claude", "cmd:", "script:", "openai:MODEL", "ollama:MODEL"):
        assert form in info.value.hint


def test_auto_picks_the_first_agent_cli_on_path(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("gemini", "aider"):
        (bin_dir / name).symlink_to(FAKES / name)
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path), **AGENT_CREDENTIALS}
    actor = make_actor("auto", environ=env, base_dir=tmp_path)
    assert actor.name == "aider"
    actor = make_actor("auto", environ={**env, "PATH": str(FAKES)}, base_dir=tmp_path)
    assert actor.name == "claude"


def test_auto_falls_back_to_a_configured_provider_then_fails(tmp_path: Path) -> None:
    env = {"PATH": str(tmp_path), "ANTHROPIC_API_KEY": "k"}
    actor = make_actor("auto", environ=env, base_dir=tmp_path)
    assert actor.name == "anthropic:claude-sonnet-4-5"
    with pytest.raises(PreflightError) as info:
        make_actor("auto", environ={"PATH": str(tmp_path)}, base_dir=tmp_path)
    assert info.value.hint is not None and "claude" in info.value.hint


def test_actor_args_extend_a_cmd_actor_and_are_refused_where_meaningless(
    tmp_path: Path, ctx: ActorContext
) -> None:
    actor = make_actor("cmd:printf '%s|'", actor_args=["two words", "$HOME"], base_dir=tmp_path)
    assert actor.act("go", ctx).output == "two words|$HOME|"
    with pytest.raises(ConfigError, match="actor_args"):
        make_actor("ollama:m", actor_args=["--x"], base_dir=tmp_path)
    with pytest.raises(ConfigError, match="actor_args"):
        make_actor("script:s.yaml", actor_args=["--x"], base_dir=tmp_path)
