"""Before the loop: help that teaches, settings in pyproject.toml and --config, loop
ids by prefix and `latest`, shell completion, `run --dry-run`, `ralph prompt`, check progress."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ralph.config import Settings, load
from ralph.errors import ConfigError, StoreError
from ralph.memory.store import LoopState, MemoryStore
from tests.conftest import RunCli
from tests.fakes.calc_project import git, make_calc_repo

CALC = "def add(a, b):\n    return a - b\n"
TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
CHECK = f'{sys.executable} -c "import calc, sys; sys.exit(calc.add(2, 3) != 5)"'
AGENT = f"cmd:{sys.executable} -c pass"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return make_calc_repo(tmp_path / "repo", calc=CALC, tests=TESTS, monkeypatch=monkeypatch)


# help -----------------------------------------------------------------------------------------


def _help(ralph: RunCli, *args: str) -> str:
    result = ralph(*args, "--help")
    assert result.code == 0, result.err
    return result.out


def _records(*command: str) -> dict[str, tuple[str, str]]:
    """Each option's help record (names, text) as `--help` prints it, unwrapped."""
    import typer

    from ralph.cli.app import app

    cmd: Any = typer.main.get_command(app)  # typer's own (vendored) click objects
    for name in command:
        cmd = cmd.get_command(cmd.context_class(cmd), name)
    ctx = cmd.context_class(cmd, info_name=command[-1])
    records = {}
    for param in cmd.params:
        record = param.get_help_record(ctx)
        if record is not None and param.param_type_name == "option":
            records[next(o for o in param.opts if o.startswith("--"))] = record
    return records


@pytest.mark.parametrize(
    "command",
    [["run"], ["check"], ["doctor"], ["status"], ["resume"], ["mcp"], ["hook", "claude-stop"]],
)
def test_help_renders_no_type_placeholders_for_flags(ralph: RunCli, command: list[str]) -> None:
    text = _help(ralph, *command)
    options = text.split("Options:", 1)[1]
    for placeholder in ("<bool>", "<list[str]>", "<str>", "<int", "<float>"):
        assert placeholder not in options, (placeholder, options)


def test_run_help_shows_short_flags_defaults_and_variables(ralph: RunCli) -> None:
    text = " ".join(_help(ralph, "run").split())
    for short in ("-n, --max-iterations N", "-t, --test CMD", "-a, --actor SPEC"):
        assert short in text
    for short in ("-m, --model MODEL", "-c, --config FILE", "-q, --quiet"):
        assert short in text
    records = _records("run")
    for option in ("--max-iterations", "--timeout", "--reflector-timeout", "--no-git", "--json"):
        variable = "RALPH_" + option[2:].replace("-", "_").upper()
        assert f"env var: {variable}" in records[option][1], records[option]
    assert "--dry-run" in records and records["--config"][0] == "-c, --config FILE"


def test_the_defaults_help_shows_are_the_settings_defaults() -> None:
    """The option defaults are None (so config files and variables can win); what help shows
    is written out, so it is held equal to config.Settings here."""
    from ralph.config import parse_duration

    shown = {}
    for option, (_, text) in _records("run").items():
        match = re.search(r"default: \(([^)]*)\)", text)
        if match:
            shown[option.removeprefix("--")] = match.group(1)
    settings = Settings()
    assert shown.pop("actor") == settings.actor
    assert shown.pop("window-policy") == settings.window_policy
    assert shown.pop("model") == "the actor's own" and settings.model is None
    assert shown.pop("reflector") == "the actor's model" and settings.reflector is None
    assert shown.pop("omega") == "by verification type" and settings.omega is None
    assert shown.pop("sandbox") == settings.sandbox
    assert shown.pop("sandbox-network") == settings.sandbox_network
    assert shown.pop("sandbox-write") == "the agent's own directories"
    assert settings.sandbox_write is None
    assert shown.pop("on-limit") == settings.on_limit
    assert parse_duration(shown.pop("max-wait")) == settings.max_wait
    assert {"max-iterations", "iteration-timeout", "reflector-timeout"} <= set(shown)
    for key, text_value in shown.items():
        value = getattr(settings, key.replace("-", "_"))
        if text_value == "no limit":
            assert value is None, key
        elif key.endswith("timeout"):
            assert parse_duration(text_value) == value, key
        else:
            assert int(text_value) == value, key


def test_a_bad_value_in_an_option_variable_is_a_usage_error(
    ralph: RunCli, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RALPH_MAX_ITERATIONS", "0")
    result = ralph("run", "fix add", "--dry-run", cwd=repo)
    assert result.code == 2
    assert "RALPH_MAX_ITERATIONS" in result.err


# settings: pyproject.toml [tool.ralph], --config FILE --------------------------------------------


def test_precedence_pyproject_file_config_env_flags(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.ralph]\nmax-iterations = 2\npatience = 2\n'
        'omega = 2\nlessons = 2\nmemory_tokens = 200\nchecks = ["ruff"]\n'
    )
    config = tmp_path / ".aiwg/ralph/config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text("patience: 3\nomega: 3\nlessons: 3\n")
    extra = tmp_path / "ci.yaml"
    extra.write_text("omega: 4\nlessons: 4\n")
    assert load(tmp_path, environ={}).max_iterations == 2
    assert load(tmp_path, environ={}).checks[0].name == "ruff"
    env = {"RALPH_LESSONS": "5"}
    settings = load(tmp_path, {"config": extra, "memory_tokens": 600}, environ=env)
    assert settings.max_iterations == 2  # pyproject
    assert settings.patience == 3  # config.yaml over pyproject
    assert settings.omega == 4  # --config over config.yaml
    assert settings.lessons == 5  # the environment over --config
    assert settings.memory_tokens == 600  # flags over everything
    via_env = load(tmp_path, environ={"RALPH_CONFIG": str(extra)})
    assert via_env.omega == 4


def test_a_toml_config_file_and_its_tool_ralph_table(tmp_path: Path) -> None:
    plain = tmp_path / "plain.toml"
    plain.write_text("max-iterations = 7\n")
    nested = tmp_path / "nested.toml"
    nested.write_text("[tool.ralph]\nmax_iterations = 8\n")
    assert load(tmp_path, {"config": plain}, environ={}).max_iterations == 7
    assert load(tmp_path, {"config": nested}, environ={}).max_iterations == 8


@pytest.mark.parametrize(
    ("pyproject", "message"),
    [
        ("[tool.ralph]\nmax-iteratons = 3\n", r"pyproject.toml \[tool.ralph\]: unknown setting"),
        ("[tool.ralph]\nmax-iterations = 0\n", r"pyproject.toml \[tool.ralph\]: .*max_iterations"),
        ("[tool.ralph\n", "cannot read TOML"),
    ],
)
def test_pyproject_settings_are_validated_like_every_source(
    tmp_path: Path, pyproject: str, message: str
) -> None:
    (tmp_path / "pyproject.toml").write_text(pyproject)
    with pytest.raises(ConfigError, match=message):
        load(tmp_path, environ={})


def test_a_missing_config_file_is_a_one_line_error(ralph: RunCli, repo: Path) -> None:
    result = ralph("check", "-c", "nope.yaml", cwd=repo)
    assert result.code == 2
    assert result.err.startswith("ralph: error: config file nope.yaml not found")


def test_check_reads_the_project_pyproject(ralph: RunCli, repo: Path) -> None:
    (repo / "pyproject.toml").write_text(f"[tool.ralph]\ncheck = []\ntest = '''{CHECK}'''\n")
    result = ralph("check", "--json", cwd=repo)
    assert result.code == 2 and "unknown setting 'check'" in result.err
    (repo / "pyproject.toml").write_text(f"[tool.ralph]\ntest = '''{CHECK}'''\n")
    result = ralph("check", "--json", cwd=repo)
    assert result.code == 1, result.err
    assert [r["tool"] for r in json.loads(result.out)["results"]] == ["tests"]


# loop ids: prefixes and `latest` --------------------------------------------------------------


def _store_with(root: Path, *loop_ids: str) -> MemoryStore:
    """Finished loops, each updated a minute after the one before."""
    store = MemoryStore(root)
    store.ensure()
    for n, loop_id in enumerate(loop_ids):
        state = LoopState(loop_id=loop_id, task=f"task {n}", status="completed")
        store.write_state(state)
        data = json.loads(store.state_path(loop_id).read_text())
        data["updated_at"] = f"2025-01-01T00:{n:02d}:00Z"
        store.state_path(loop_id).write_text(json.dumps(data))
    return store


def test_resolve_loop_id_takes_ids_prefixes_and_latest(tmp_path: Path) -> None:
    ids = ("ralph-fix-dates-0a0a0a0a", "ralph-fix-dates-1b1b1b1b", "ralph-add-cache-2c2c2c2c")
    store = _store_with(tmp_path, *ids)
    assert store.resolve_loop_id("ralph-add-cache-2c2c2c2c") == ids[2]
    assert store.resolve_loop_id("ralph-add") == ids[2]
    assert store.resolve_loop_id("add") == ids[2]  # `ralph-` may be left out
    assert store.resolve_loop_id("fix-dates-1") == ids[1]
    assert store.resolve_loop_id("latest") == ids[2]  # the last one written
    with pytest.raises(StoreError) as ambiguous:
        store.resolve_loop_id("fix")
    assert ids[0] in ambiguous.value.message and ids[1] in ambiguous.value.message
    assert ambiguous.value.hint == "type more of the loop id"
    with pytest.raises(StoreError, match="unknown loop 'nothing'"):
        store.resolve_loop_id("nothing")
    with pytest.raises(StoreError, match="invalid loop id"):
        store.resolve_loop_id("../x")


def test_the_short_id_every_screen_shows_names_its_loop(tmp_path: Path, ralph: RunCli) -> None:
    """`ralph(2c2c2c2c): iteration 1` in a commit, `2c2c2c2c` in analyze: the same id works
    wherever a loop is asked for, here and through the CLI."""
    ids = ("ralph-fix-dates-0a0a0a0a", "ralph-add-cache-2c2c2c2c")
    store = _store_with(tmp_path, *ids)
    assert store.resolve_loop_id("2c2c2c2c") == ids[1]
    assert store.resolve_loop_id("0a0a0a0a") == ids[0]
    result = ralph("status", "2c2c2c2c", "--json", cwd=tmp_path)
    assert result.code == 0, result.err
    assert json.loads(result.out)["loop_id"] == ids[1]


def test_an_ambiguous_prefix_lists_at_most_a_few_candidates(tmp_path: Path) -> None:
    store = _store_with(tmp_path, *(f"ralph-many-{n:08x}" for n in range(12)))
    with pytest.raises(StoreError) as info:
        store.resolve_loop_id("many")
    assert info.value.message.count("ralph-many-") == 8
    assert info.value.message.endswith("and 4 more")


@pytest.mark.parametrize(
    "command",
    [
        ["status", "{}"],
        ["status", "--markdown", "{}"],
        ["reflections", "show", "{}"],
        ["reflections", "list", "--loop", "{}"],
        ["trace", "{}"],
        ["prompt", "{}"],
        ["reflections", "obsolete", "{}", "1"],
        ["feedback", "{}", "--accept"],
        ["abort", "{}"],
        ["resume", "{}"],
        ["analyze", "{}", "--json"],
    ],
)
def test_every_command_taking_a_loop_id_names_ambiguous_prefixes(
    ralph: RunCli, tmp_path: Path, command: list[str]
) -> None:
    _store_with(tmp_path, "ralph-fix-dates-0a0a0a0a", "ralph-fix-dates-1b1b1b1b")
    result = ralph(*[part.format("fix") for part in command], cwd=tmp_path)
    assert result.code == 2
    [line, hint] = result.err.splitlines()
    assert line == (
        "ralph: error: loop 'fix' is ambiguous: ralph-fix-dates-0a0a0a0a, ralph-fix-dates-1b1b1b1b"
    )
    assert hint == "hint: type more of the loop id"


def test_status_and_show_take_a_prefix_and_latest(ralph: RunCli, example_project: Path) -> None:
    from tests.conftest import EXAMPLE_LOOP

    by_prefix = ralph("status", "fix-date", "--json", cwd=example_project)
    assert by_prefix.code == 0, by_prefix.err
    assert json.loads(by_prefix.out)["loop_id"] == EXAMPLE_LOOP
    shown = ralph("reflections", "show", "latest", "1", "--json", cwd=example_project)
    assert json.loads(shown.out)["loop_id"] == EXAMPLE_LOOP


# shell completion -----------------------------------------------------------------------------


def test_loop_ids_complete_from_the_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ralph.cli.common import complete_loop_id

    _store_with(tmp_path, "ralph-fix-dates-0a0a0a0a", "ralph-add-cache-2c2c2c2c")
    monkeypatch.chdir(tmp_path)
    assert complete_loop_id("ralph-a") == ["ralph-add-cache-2c2c2c2c"]
    assert complete_loop_id("fix") == ["ralph-fix-dates-0a0a0a0a"]
    assert set(complete_loop_id("")) == {
        "latest",
        "ralph-fix-dates-0a0a0a0a",
        "ralph-add-cache-2c2c2c2c",
    }
    monkeypatch.chdir(tmp_path / ".aiwg")  # no git, memory found upwards
    assert "latest" in complete_loop_id("l")


def test_the_shell_asks_ralph_for_loop_ids(tmp_path: Path) -> None:
    """What `ralph --install-completion` wires up: bash calls ralph with _RALPH_COMPLETE."""
    _store_with(tmp_path, "ralph-fix-dates-0a0a0a0a", "ralph-add-cache-2c2c2c2c")
    env = {
        "_RALPH_COMPLETE": "complete_bash",
        "COMP_WORDS": "ralph status ralph-f",
        "COMP_CWORD": "2",
        "PATH": str(Path(sys.executable).parent),
    }
    ralph = str(Path(sys.executable).parent / "ralph")  # the console script the shell calls
    done = subprocess.run([ralph], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.stdout.split() == ["ralph-fix-dates-0a0a0a0a"], done.stderr
    script = subprocess.run(
        [ralph, "--show-completion", "bash"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert script.returncode == 0 and "_RALPH_COMPLETE" in script.stdout


# run --dry-run and ralph prompt ---------------------------------------------------------------


def _branches(repo: Path) -> str:
    return git(repo, "branch", "--list")


def test_dry_run_prints_the_first_prompt_the_actor_would_get(ralph: RunCli, repo: Path) -> None:
    before = _branches(repo)
    flags = ["--actor", AGENT, "--test", CHECK, "-n", "1", "--reflector", "heuristic"]
    dry = ralph("run", "fix add", *flags, "--dry-run", cwd=repo)
    assert dry.code == 0, dry.err
    assert "command  sh -c" in dry.err
    assert re.search(r"tests\s+fail\s+target", dry.err)
    assert "# Task\n\nfix add" in dry.out
    assert _branches(repo) == before
    assert not (repo / ".aiwg/ralph/loops").exists()
    assert not (repo / ".aiwg/ralph/reflections").exists()
    assert git(repo, "status", "--porcelain") == ""
    real = ralph("run", "fix add", *flags, "--json", cwd=repo)
    loop_id = json.loads(real.out)["loop_id"]
    stored = repo / ".aiwg/ralph/loops" / loop_id / "001" / "prompt.md"
    assert dry.out == stored.read_text()
    shown = ralph("prompt", loop_id[:12], cwd=repo)
    assert shown.code == 0 and shown.out == stored.read_text()
    assert ralph("prompt", "latest", "1", cwd=repo).out == stored.read_text()
    missing = ralph("prompt", "latest", "7", cwd=repo)
    assert missing.code == 2
    assert "no prompt for iteration 7; it has prompts for iterations 1" in missing.err


def test_dry_run_json_names_checks_roles_and_the_command(ralph: RunCli, repo: Path) -> None:
    mypy_like = f'{sys.executable} -c "import sys; sys.exit(1)"'
    (repo / "pyproject.toml").write_text(
        "[tool.ralph]\nchecks = [\n"
        f"  {{name = 'tests', command = '''{CHECK}''', role = 'target'}},\n"
        f"  {{name = 'legacy', command = '''{mypy_like}''', role = 'guard'}},\n]\n"
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "config")
    result = ralph("run", "fix add", "-a", AGENT, "--dry-run", "--json", cwd=repo)
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["command"].startswith("sh -c ") and data["actor"] == AGENT
    roles = {c["name"]: (c["status"], c["role"]) for c in data["checks"]}
    assert roles == {"tests": ("fail", "target"), "legacy": ("fail", "guard")}
    assert data["already_green"] is False and "# Task" in data["prompt"]
    assert result.err == ""


def test_dry_run_on_a_green_tree_says_there_is_nothing_to_do(ralph: RunCli, repo: Path) -> None:
    green = f'{sys.executable} -c "pass"'
    result = ralph("run", "x", "-a", AGENT, "-t", green, "--dry-run", "--json", cwd=repo)
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["already_green"] is True and data["prompt"] is None


def test_dry_run_says_whether_the_sandbox_is_on(ralph: RunCli, repo: Path) -> None:
    from ralph.sandbox import find

    flags = ["-a", AGENT, "-t", CHECK, "--dry-run"]
    off = ralph("run", "fix add", *flags, "--sandbox", "none", cwd=repo)
    assert off.code == 0, off.err
    assert "sandbox  off (--sandbox none)" in off.err
    auto = ralph("run", "fix add", *flags, "--sandbox", "auto", "--json", cwd=repo)
    said = json.loads(auto.out)["sandbox"]
    assert said.startswith("on: bubblewrap" if find().works else "off: "), said


def test_dry_run_refuses_what_run_refuses(ralph: RunCli, repo: Path) -> None:
    (repo / "calc.py").write_text(CALC + "# edited\n")
    result = ralph("run", "fix add", "-a", AGENT, "-t", CHECK, "--dry-run", cwd=repo)
    assert result.code == 2 and "uncommitted changes" in result.err
    git(repo, "checkout", "-q", "calc.py")
    result = ralph(
        "run", "fix add", "-a", "cmd:no-such-agent-x", "-t", CHECK, "--dry-run", cwd=repo
    )
    assert result.code == 2 and "no-such-agent-x" in result.err


def test_dry_run_shows_an_llm_actor_its_messages(
    ralph: RunCli, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An LLM actor is sent the rules and the files the prompt points at: that is its prompt."""
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # never contacted
    flags = ["-a", "openai", "-m", "tiny-model", "--reflector", "heuristic", "-t", CHECK]
    result = ralph("run", "fix add in calc.py", *flags, "--dry-run", cwd=repo)
    assert result.code == 0, result.err
    assert result.out.startswith("<!-- system -->\n")
    assert "<!-- user -->" in result.out and "def add(a, b):" in result.out
    assert "openai:tiny-model at http://127.0.0.1:9/v1/chat/completions" in result.err


# check progress -------------------------------------------------------------------------------


def test_check_progress_lines_follow_the_checks() -> None:
    from types import SimpleNamespace

    from ralph.cli.progress import CheckProgress

    progress = CheckProgress(["tests", "mypy"])
    text = [line for line, _ in progress.lines()]
    assert text[0].startswith("checks: 0/2 done")
    assert text[1].split()[:2] == ["tests", "running"]
    outcome: Any = SimpleNamespace(  # what an outcome tells: its check's name, status and time
        spec=SimpleNamespace(name="mypy"),
        result=SimpleNamespace(status="fail", duration_ms=2500),
    )
    progress.done(outcome)
    text = [line for line, _ in progress.lines()]
    assert text[0].startswith("checks: 1/2 done")
    assert text[2].split() == ["mypy", "fail", "2.5s"]


def test_check_progress_draws_on_a_terminal_only(monkeypatch: pytest.MonkeyPatch) -> None:
    from rich.console import Console

    from ralph.cli import progress

    drawn = io.StringIO()
    monkeypatch.setattr(progress, "is_ci", lambda: False)
    monkeypatch.setattr(
        "rich.console.Console",
        lambda **kwargs: Console(file=drawn, force_terminal=True, width=80),
    )
    with progress.check_progress(["tests"]) as done:
        assert callable(done)
    assert "tests" in drawn.getvalue() and "running" in drawn.getvalue()
    quiet = io.StringIO()
    monkeypatch.setattr(
        "rich.console.Console", lambda **kwargs: Console(file=quiet, force_terminal=True)
    )
    with progress.check_progress(["tests"], enabled=False):
        pass
    assert quiet.getvalue() == ""


def test_check_prints_nothing_extra_without_a_terminal(ralph: RunCli, repo: Path) -> None:
    result = ralph("check", "-t", CHECK, "--json", cwd=repo)
    assert result.code == 1 and result.err == ""
    # the record's evaluator_output, as records.to_json writes it: what is None is left out
    # (not rendering.to_data's form, which would add `"stderr": null` and the like)
    data = json.loads(result.out)
    assert data["results"][0]["tool"] == "tests" and "null" not in result.out
    plain = ralph("check", "-t", CHECK, cwd=repo)
    assert "running" not in plain.out + plain.err
    # a pipe gets tab-separated lines, as the README says of every listing
    assert plain.out.splitlines()[0] == "check\tstatus\tresult\ttime", plain.out
    assert plain.out.splitlines()[1].split("\t")[:2] == ["tests", "fail"], plain.out
