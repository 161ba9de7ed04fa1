"""One loop from start to end: `run`, `resume`, `status`, `abort`."""

from __future__ import annotations

import dataclasses
import os
from typing import Annotated, Any

import typer

from ralph.cli.common import (
    LOOP_HELP,
    ConfigOpt,
    JsonFlag,
    LoopArg,
    NotifyFlag,
    OptionalLoopArg,
    complete_loop_id,
    console,
    loop_in,
    memory,
    show,
    text_out,
)
from ralph.cli.sandboxing import (
    PassEnvOpt,
    SandboxNetworkOpt,
    SandboxOpt,
    SandboxWriteOpt,
    sandbox_flags,
)
from ralph.cli.waiting import MaxWaitOpt, OnLimitOpt, limit_flags

# init --------------------------------------------------------------------------------------


ActorOpt = Annotated[
    str | None,
    typer.Option(
        "--actor",
        help="claude, codex, aider, gemini, opencode, cmd:'COMMAND', openai:MODEL, "
        "anthropic:MODEL, ollama:MODEL, script:FILE, or auto.",
    ),
]

ReflectorOpt = Annotated[
    str | None,
    typer.Option("--reflector", help="PROVIDER:MODEL or heuristic; default: the actor's model."),
]

# The options of `run` (and `check`) are settings: each shows its default and its RALPH_*
# variable; left out (None) they yield to the config files and the environment (config.load).
# The defaults shown are config.Settings' (tests/test_cli_front.py holds them equal).

RunActorOpt = Annotated[
    str | None,
    typer.Option(
        "--actor",
        "-a",
        metavar="SPEC",
        envvar="RALPH_ACTOR",
        show_default="auto",
        help="claude, codex, aider, gemini, opencode, cmd:'COMMAND', openai:MODEL, "
        "anthropic:MODEL, ollama:MODEL, script:FILE, or auto (the first agent CLI that can run "
        "unattended, else a provider whose key is set).",
    ),
]

ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        metavar="MODEL",
        envvar="RALPH_MODEL",
        show_default="the actor's own",
        help="The actor's model: an agent CLI gets --model MODEL, a provider uses MODEL.",
    ),
]

RunReflectorOpt = Annotated[
    str | None,
    typer.Option(
        "--reflector",
        metavar="SPEC",
        envvar="RALPH_REFLECTOR",
        show_default="the actor's model",
        help="PROVIDER:MODEL or heuristic.",
    ),
]

TestOpt = Annotated[
    str | None,
    typer.Option(
        "--test",
        "-t",
        metavar="CMD",
        envvar="RALPH_TEST",
        help="The test command that matters, e.g. 'pytest -q tests/test_x.py': it replaces the "
        "configured pytest checks (it runs once) and is a target; other checks stay.",
    ),
]

CheckOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--check",
        metavar="NAME|CMD",
        help="Only these checks, as targets: a configured check's name, pytest, mypy, ruff or "
        "any shell command; repeatable. Selects, does not add.  [env var: RALPH_CHECK]",
    ),
]


def _duration(flag: str, default: str | None, help: str) -> Any:
    return typer.Option(
        flag,
        metavar="DURATION",
        envvar="RALPH_" + flag.removeprefix("--").replace("-", "_").upper(),
        show_default=default or False,
        help=help + " Seconds, or 45s, 10m, 2h; 0: no limit.",
    )


def _number(flag: str, default: str | None, help: str, **limits: Any) -> Any:
    names = [flag] if "/" not in flag else flag.split("/")
    long = next(n for n in names if n.startswith("--"))
    return typer.Option(
        *names,
        metavar="N",
        envvar="RALPH_" + long.removeprefix("--").replace("-", "_").upper(),
        show_default=default or False,
        help=help,
        **limits,
    )


def _flag(flag: str, help: str, *, envvar: str | None = None) -> Any:
    key = flag.removeprefix("--").replace("-", "_").upper()
    return typer.Option(flag, envvar=envvar or f"RALPH_{key}", help=help)


AllowTestEditsFlag = Annotated[
    bool,
    _flag(
        "--allow-test-edits",
        "Let the agent's edits of the tests the baseline ran count (default: they are put "
        "back before the checks run); for tasks about the tests.",
    ),
]
MemoryToolsFlag = Annotated[
    bool | None,
    typer.Option(
        "--memory-tools/--no-memory-tools",
        envvar="RALPH_MEMORY_TOOLS",
        show_default=False,
        help="Give an agent CLI that speaks MCP (claude, codex, gemini) ralph's memory as tools "
        "it can call mid-attempt (`ralph mcp`); on when the extra ralph-reflexion[mcp] is "
        "installed.",
    ),
]
EscalateFlag = Annotated[
    bool | None,
    typer.Option(
        "--escalate/--no-escalate",
        envvar="RALPH_ESCALATE",
        show_default=False,
        help="Offer the agent the escalation exit: a final line `RALPH-ESCALATE: <reason>` "
        "stops the loop for a person (status needs_human, exit 5) unless the checks pass. On "
        "by default.",
    ),
]
BOOLEAN_FLAGS: tuple[str, ...] = ("no_git", "allow_dirty", "no_rollback", "worktree", "json")
BOOLEAN_FLAGS += ("quiet", "notify", "allow_test_edits")


def run_flags(**flags: Any) -> dict[str, Any]:
    """Typer's values -> config keys; flags left at None were not given (config/env win)."""
    checks = flags.pop("check", None)
    if checks:
        flags["checks"] = list(checks)
    for key in BOOLEAN_FLAGS:
        if flags.get(key) is False:
            flags[key] = None
    if "strict" in flags:
        flags["success"] = "strict" if flags.pop("strict") else None
    return flags


def _output_mode(flags: dict[str, Any], as_json: bool, quiet: bool) -> tuple[bool, bool, Any]:
    """--json and --quiet (or config, RALPH_JSON / RALPH_QUIET), and the loop's settings."""
    from ralph import config
    from ralph.loop import assembly as runner

    settings = config.load(memory(runner.project_root()).root, flags)
    return as_json or settings.json, quiet or settings.quiet, settings


def finish_loop(result: Any, as_json: bool, settings: Any = None) -> None:
    """`--notify` with the settings the loop started with, never the tree's at its end."""
    from ralph.cli.notify import notify

    if settings is not None and settings.notify:
        notify(result, settings.notify_command)
    if as_json:
        show(result, as_json=True)
    raise typer.Exit(result.exit_code)


def _resumed_settings(loop_id: str, notify: bool) -> Any:
    """A resumed loop's settings as stored at its start, `--notify` and the user's variable."""
    settings = memory().read_state(loop_id).settings
    command = os.environ.get("RALPH_NOTIFY_COMMAND", "").strip() or settings.notify_command
    return dataclasses.replace(settings, notify=notify or settings.notify, notify_command=command)


def run(
    task: Annotated[
        str, typer.Argument(metavar="TASK", help="What the agent should achieve, in plain words.")
    ],
    actor: RunActorOpt = None,
    model: ModelOpt = None,
    reflector: RunReflectorOpt = None,
    test: TestOpt = None,
    check: CheckOpt = None,
    max_iterations: Annotated[
        int | None, _number("--max-iterations/-n", "5", "Stop after this many attempts.", min=1)
    ] = None,
    omega: Annotated[
        int | None,
        _number(
            "--omega",
            "by verification type",
            "Reflections in the prompt (0-10; 0: none).",
            min=0,
            max=10,
        ),
    ] = None,
    window_policy: Annotated[
        str | None,
        typer.Option(
            metavar="POLICY",
            envvar="RALPH_WINDOW_POLICY",
            show_default="recency",
            help="Which reflections fill the window: fifo, recency, relevance_weighted.",
        ),
    ] = None,
    memory_tokens: Annotated[
        int | None,
        _number(
            "--memory-tokens", "2000", "Token budget of the reflections in the prompt.", min=100
        ),
    ] = None,
    lessons: Annotated[
        int | None,
        _number("--lessons", "3", "Lessons of other loops' similar failures (0: off).", min=0),
    ] = None,
    patience: Annotated[
        int | None,
        _number("--patience", "3", "Iterations without improvement before stopping.", min=1),
    ] = None,
    budget_usd: Annotated[
        float | None,
        typer.Option(
            metavar="USD",
            envvar="RALPH_BUDGET_USD",
            show_default="no limit",
            help="Stop (exit 3) when this much is spent.",
        ),
    ] = None,
    max_tokens: Annotated[
        int | None,
        _number("--max-tokens", "no limit", "Stop (exit 3) after this many tokens."),
    ] = None,
    timeout: Annotated[
        str | None, _duration("--timeout", "no limit", "The whole loop's wall time (exit 3).")
    ] = None,
    iteration_timeout: Annotated[
        str | None, _duration("--iteration-timeout", "30m", "One attempt's wall time.")
    ] = None,
    idle_timeout: Annotated[
        str | None,
        _duration("--idle-timeout", "10m", "An attempt with no output this long is killed."),
    ] = None,
    reflector_timeout: Annotated[
        str | None,
        _duration("--reflector-timeout", "5m", "One reflection's wall time (then a heuristic)."),
    ] = None,
    loop_id: Annotated[
        str | None, typer.Option(metavar="ID", help="Use this loop id (default: from the task).")
    ] = None,
    no_git: Annotated[bool, _flag("--no-git", "No branch, commits or rollback.")] = False,
    allow_dirty: Annotated[
        bool,
        _flag(
            "--allow-dirty",
            "Run on a tree with uncommitted changes; the loop's end gives them back as they were.",
        ),
    ] = False,
    no_rollback: Annotated[
        bool,
        _flag(
            "--no-rollback",
            "Never roll back: each attempt starts from the last one's code. Without it, an "
            "attempt scoring below the best code so far (every one that broke what worked) is "
            "rolled back to that code, unless it fixed more target failures than that code.",
        ),
    ] = False,
    allow_test_edits: AllowTestEditsFlag = False,
    memory_tools: MemoryToolsFlag = None,
    escalate: EscalateFlag = None,
    worktree: Annotated[
        bool,
        _flag("--worktree", "Work in a new git worktree, so several loops share one repository."),
    ] = False,
    as_json: Annotated[bool, _flag("--json", "Print one JSON result object on stdout.")] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", envvar="RALPH_QUIET", help="No progress output.")
    ] = False,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict",
            help="Every check must pass, also those failing before the loop (default: targets "
            "must pass and guards must not get worse; see README, Targets and guards).  "
            "[env var: RALPH_SUCCESS=strict]",
        ),
    ] = False,
    notify: NotifyFlag = False,
    config_file: ConfigOpt = None,
    sandbox: SandboxOpt = None,
    sandbox_network: SandboxNetworkOpt = None,
    sandbox_write: SandboxWriteOpt = None,
    pass_env: PassEnvOpt = None,
    on_limit: OnLimitOpt = None,
    max_wait: MaxWaitOpt = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Run the baseline, then print the first prompt exactly as the actor would get "
            "it, the actor's command line and the checks with their roles; run no actor, make "
            "no branch, write no record.",
        ),
    ] = False,
) -> None:
    """Run the Reflexion loop on TASK until the checks pass or a limit is reached."""
    from ralph.cli import live as ui
    from ralph.loop import assembly as runner

    flags = run_flags(
        actor=actor, model=model, reflector=reflector, test=test, check=check,
        max_iterations=max_iterations, omega=omega, window_policy=window_policy,
        memory_tokens=memory_tokens, lessons=lessons, patience=patience, budget_usd=budget_usd,
        max_tokens=max_tokens, timeout=timeout, iteration_timeout=iteration_timeout,
        idle_timeout=idle_timeout, reflector_timeout=reflector_timeout, no_git=no_git,
        allow_dirty=allow_dirty, no_rollback=no_rollback, worktree=worktree, strict=strict,
        config=config_file, notify=notify, allow_test_edits=allow_test_edits,
        **sandbox_flags(sandbox, sandbox_network, sandbox_write, pass_env),
        memory_tools=memory_tools, escalate=escalate, **limit_flags(on_limit, max_wait),
    )  # fmt: skip
    as_json, quiet, settings = _output_mode(flags, as_json, quiet)
    if dry_run:
        from ralph.cli.preview import show_preview

        raise typer.Exit(show_preview(task, flags, as_json=as_json))
    result = runner.run_task(task, flags, ui.make_reporter(quiet=quiet), loop_id=loop_id)
    finish_loop(result, as_json, settings)


def resume(
    loop: Annotated[
        str | None,
        typer.Argument(
            metavar="LOOP",
            help=LOOP_HELP + " Default: the latest paused or crashed.",
            autocompletion=complete_loop_id,
        ),
    ] = None,
    max_iterations: Annotated[
        int | None,
        typer.Option(
            "--max-iterations", "-n", metavar="N", help="Raise the iteration limit.", min=1
        ),
    ] = None,
    as_json: JsonFlag = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress output.")] = False,
    allow_test_edits: AllowTestEditsFlag = False,
    notify: NotifyFlag = False,
    sandbox: SandboxOpt = None,
    sandbox_network: SandboxNetworkOpt = None,
    sandbox_write: SandboxWriteOpt = None,
    pass_env: PassEnvOpt = None,
    on_limit: OnLimitOpt = None,
    max_wait: MaxWaitOpt = None,
) -> None:
    """Continue a paused or crashed loop with the memory it had."""
    from ralph.cli import live as ui
    from ralph.loop import assembly as runner

    if loop is not None:
        loop = loop_in(memory(), loop)
    flags = {"max_iterations": max_iterations, "allow_test_edits": allow_test_edits or None}
    flags |= sandbox_flags(sandbox, sandbox_network, sandbox_write, pass_env)
    flags |= limit_flags(on_limit, max_wait)
    result = runner.resume_task(loop, flags, ui.make_reporter(quiet=quiet))
    finish_loop(result, as_json, _resumed_settings(result.loop_id, notify))


def status(
    loop: OptionalLoopArg = None,
    as_json: JsonFlag = False,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Print a markdown summary (CI, pull requests).")
    ] = False,
) -> None:
    """Show a loop's state, iteration, rewards and usage."""
    from ralph.loop.result import loop_status

    store = memory()
    loop = loop_in(store, loop or "latest")
    if markdown:
        from ralph.cli.summary import loop_markdown

        text_out().write(loop_markdown(store, loop))
        return
    show(loop_status(loop), as_json=as_json)


def abort(loop: LoopArg) -> None:
    """End a loop for good; a running loop is stopped first (it exits with code 4)."""
    from ralph.loop import assembly as runner

    state, stopped = runner.abort_loop(loop_in(memory(), loop))
    if stopped:
        console().print(f"loop {state.loop_id} aborted", markup=False)
        from ralph.loop.handoff import give_back, switch_back

        if given := give_back(memory(), state):  # --allow-dirty: the user's tree back
            console().print(f"yours   {given.note}", markup=False, soft_wrap=True)
        if switch := switch_back(memory(), state):  # the checkout stays on the loop's branch
            branch = state.git.branch if state.git else ""
            console().print(f"branch  {branch} is still checked out here", markup=False)
            console().print(f"switch  {switch}", markup=False)
    else:
        console().print(
            f"loop {state.loop_id}: abort requested; it has not stopped yet and ends as "
            "aborted before its next attempt (another host or pid namespace cannot be "
            "signalled)",
            markup=False,
        )
