"""The typer app: every command is a few lines over a service module.

Errors of the RalphError family are caught once, in `main`, and printed as one line plus a hint;
a traceback only with `--debug` (or RALPH_DEBUG=1).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from ralph import __version__
from ralph.errors import RalphError

if TYPE_CHECKING:
    from rich.console import Console

    from ralph.store import MemoryStore

app = typer.Typer(
    name="ralph",
    help="Run a coding agent in a Reflexion loop until the project's own checks pass.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
reflections_app = typer.Typer(
    help="Read the episodic memory: list, show, validate and search reflections.",
    no_args_is_help=True,
)
app.add_typer(reflections_app, name="reflections")

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON on stdout.")]


def _version(value: bool) -> None:
    if value:
        print(f"ralph {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Show the version."),
    ] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of errors.")] = False,
) -> None:
    if debug:
        os.environ["RALPH_DEBUG"] = "1"


def console(stderr: bool = False) -> Console:
    """Rich on a terminal; plain lines without a TTY or with CI=true."""
    from rich.console import Console

    plain = os.environ.get("CI", "").lower() == "true" or os.environ.get("NO_COLOR") is not None
    return Console(stderr=stderr, no_color=plain, highlight=False, soft_wrap=plain)


def store_here() -> MemoryStore:
    from ralph.store import MemoryStore

    return MemoryStore.discover()


def print_json(data: Any) -> None:
    import json

    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


# reflections -------------------------------------------------------------------------------
@reflections_app.command("list")
def reflections_list(
    loop: Annotated[str | None, typer.Option("--loop", help="List this loop's iterations.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """List loops (id, task, status, iterations, best reward, updated) or one loop's iterations."""
    from ralph import views

    store = store_here()
    store.require()
    if loop:
        views.list_iterations(store, loop, console(), as_json=as_json)
    else:
        views.list_loops(store, console(), as_json=as_json)


@reflections_app.command("show")
def reflections_show(
    loop: Annotated[str, typer.Argument(help="Loop id (see `ralph reflections list`).")],
    iteration: Annotated[
        int | None, typer.Argument(help="Iteration number; default the last one.", min=0)
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Show one iteration record: actions, failing checks, the reflection, insights, lessons."""
    from ralph import views

    store = store_here()
    store.require()
    views.show_record(store, loop, iteration, console(), as_json=as_json)


@reflections_app.command("validate")
def reflections_validate(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(help="Files or directories; default all of .aiwg/ralph/reflections."),
    ] = None,
) -> None:
    """Validate records (and state files) against the schemas; exit 1 if any is invalid."""
    from ralph import views

    store = store_here()
    if not paths:
        store.require()
        paths = [store.base / "reflections", store.base / "loops"]
    raise typer.Exit(views.validate_paths(paths, console()))


@reflections_app.command("search")
def reflections_search(
    query: Annotated[str, typer.Argument(help="Words to look for, e.g. 'date format slash'.")],
    category: Annotated[
        str | None, typer.Option(help="Only this failure category (e.g. edge_case_miss).")
    ] = None,
    min_confidence: Annotated[
        float | None, typer.Option(help="Only reflections this confident (0-1).", min=0, max=1)
    ] = None,
    loop: Annotated[str | None, typer.Option("--loop", help="Only this loop.")] = None,
    since: Annotated[
        str | None, typer.Option(help="Only records written on or after (YYYY-MM-DD).")
    ] = None,
    until: Annotated[
        str | None, typer.Option(help="Only records written on or before (YYYY-MM-DD).")
    ] = None,
    limit: Annotated[int, typer.Option(help="At most this many results.", min=1)] = 10,
    as_json: JsonFlag = False,
) -> None:
    """Rank reflections of every loop by relevance to QUERY (BM25 over SQLite FTS5)."""
    from ralph import views

    store = store_here()
    store.require()
    views.search_reflections(
        store, query, console(), as_json=as_json, category=category,
        min_confidence=min_confidence, loop_id=loop, since=since, until=until, limit=limit,
    )  # fmt: skip


@reflections_app.command("obsolete")
def reflections_obsolete(
    loop: Annotated[str, typer.Argument(help="Loop id.")],
    iteration: Annotated[int, typer.Argument(help="Iteration number.", min=0)],
    undo: Annotated[
        bool, typer.Option("--undo", help="Clear the mark: its lessons may be injected again.")
    ] = False,
) -> None:
    """Mark a reflection obsolete: its lessons are never again injected into a prompt."""
    from ralph import views

    store = store_here()
    store.require()
    views.mark_obsolete(store, loop, iteration, console(), obsolete=not undo)


# init --------------------------------------------------------------------------------------
@app.command()
def init(
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing config.")] = False,
) -> None:
    """Write .aiwg/ralph/config.yaml with the checks detected in this repository."""
    from ralph import detect

    store = store_here()
    path, checks = detect.write_config(store, force=force)
    out = console()
    out.print(f"wrote {path}")
    for check in checks:
        out.print(f"  check {check.name}: {check.command}")
    if not checks:
        out.print("  no pytest, mypy or ruff configuration found: add checks to the file")


# the loop ------------------------------------------------------------------------------------
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
TestOpt = Annotated[str | None, typer.Option("--test", help="Test command, e.g. 'pytest -q'.")]
CheckOpt = Annotated[
    list[str] | None,
    typer.Option("--check", help="pytest, mypy, ruff or any shell command; repeatable."),
]
DurationOpt = Annotated[str | None, typer.Option(help="Seconds, or 45s, 10m, 2h.")]


def _run_flags(**flags: Any) -> dict[str, Any]:
    """Typer's values -> config keys; flags left at None were not given (config/env win)."""
    checks = flags.pop("check", None)
    if checks:
        flags["checks"] = list(checks)
    for key in ("no_git", "allow_dirty", "no_rollback", "worktree", "json", "quiet"):
        if flags.get(key) is False:
            flags[key] = None
    return flags


def _output_mode(flags: dict[str, Any], as_json: bool, quiet: bool) -> tuple[bool, bool]:
    """--json and --quiet, or their config keys and RALPH_JSON / RALPH_QUIET."""
    from ralph import config, runner

    settings = config.load(runner.memory_root(runner.project_root()), flags)
    return as_json or settings.json, quiet or settings.quiet


def _finish(result: Any, as_json: bool) -> None:
    if as_json:
        print_json(result.to_json())
    raise typer.Exit(result.exit_code)


@app.command()
def run(
    task: Annotated[str, typer.Argument(help="What the agent should achieve, in plain words.")],
    actor: ActorOpt = None,
    reflector: ReflectorOpt = None,
    test: TestOpt = None,
    check: CheckOpt = None,
    max_iterations: Annotated[
        int | None, typer.Option(help="Stop after this many attempts (default 5).", min=1)
    ] = None,
    omega: Annotated[
        int | None, typer.Option(help="Reflections in the prompt (1-10).", min=1, max=10)
    ] = None,
    window_policy: Annotated[
        str | None,
        typer.Option(help="Which reflections fill the window: fifo, recency, relevance_weighted."),
    ] = None,
    memory_tokens: Annotated[
        int | None, typer.Option(help="Token budget of the reflections in the prompt.", min=100)
    ] = None,
    lessons: Annotated[
        int | None,
        typer.Option(help="Lessons of other loops' similar failures (default 3, 0 = off).", min=0),
    ] = None,
    patience: Annotated[
        int | None, typer.Option(help="Iterations without improvement before stopping.", min=1)
    ] = None,
    budget_usd: Annotated[float | None, typer.Option(help="Stop when this much is spent.")] = None,
    max_tokens: Annotated[int | None, typer.Option(help="Stop after this many tokens.")] = None,
    timeout: DurationOpt = None,
    iteration_timeout: DurationOpt = None,
    idle_timeout: DurationOpt = None,
    loop_id: Annotated[str | None, typer.Option(help="Use this loop id.")] = None,
    no_git: Annotated[
        bool, typer.Option("--no-git", help="No branch, commits or rollback.")
    ] = False,
    allow_dirty: Annotated[
        bool, typer.Option("--allow-dirty", help="Run on a tree with uncommitted changes.")
    ] = False,
    no_rollback: Annotated[
        bool, typer.Option("--no-rollback", help="Keep a regressed attempt's code.")
    ] = False,
    worktree: Annotated[
        bool,
        typer.Option(
            "--worktree", help="Work in a new git worktree, so several loops share one repository."
        ),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON result object on stdout.")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress output.")] = False,
) -> None:
    """Run the Reflexion loop on TASK until the checks pass or a limit is reached."""
    from ralph import runner, ui

    flags = _run_flags(
        actor=actor, reflector=reflector, test=test, check=check, max_iterations=max_iterations,
        omega=omega, window_policy=window_policy, memory_tokens=memory_tokens, lessons=lessons,
        patience=patience, budget_usd=budget_usd, max_tokens=max_tokens,
        timeout=timeout, iteration_timeout=iteration_timeout, idle_timeout=idle_timeout,
        no_git=no_git, allow_dirty=allow_dirty, no_rollback=no_rollback, worktree=worktree,
    )  # fmt: skip
    as_json, quiet = _output_mode(flags, as_json, quiet)
    result = runner.run_task(task, flags, ui.make_reporter(quiet=quiet), loop_id=loop_id)
    _finish(result, as_json)


@app.command()
def resume(
    loop: Annotated[str | None, typer.Argument(help="Loop id; default the latest paused.")] = None,
    max_iterations: Annotated[
        int | None, typer.Option(help="Raise the iteration limit.", min=1)
    ] = None,
    as_json: JsonFlag = False,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress output.")] = False,
) -> None:
    """Continue a paused or crashed loop with the memory it had."""
    from ralph import runner, ui

    flags = {"max_iterations": max_iterations}
    _finish(runner.resume_task(loop, flags, ui.make_reporter(quiet=quiet)), as_json)


@app.command()
def status(
    loop: Annotated[str | None, typer.Argument(help="Loop id; default the latest.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Show a loop's state, iteration, rewards and usage."""
    from ralph import runner, ui

    info = runner.loop_status(loop)
    if as_json:
        print_json(info)
        return
    out = console()
    best = "-" if info["best_reward"] is None else f"{info['best_reward']:.2f}"
    cost = info["usage"].get("cost_usd")
    out.print(f"{info['loop_id']}  {info['status']}", markup=False)
    out.print(f"  task        {info['task']}", markup=False)
    out.print(f"  iteration   {info['iteration']}/{info['max_iterations']}  best {best}")
    out.print(f"  rewards     {ui.sparkline(info['reward_history'])} {info['reward_history']}")
    out.print(
        f"  usage       {info['usage'].get('tokens_in', 0)} in / "
        f"{info['usage'].get('tokens_out', 0)} out tokens, "
        f"cost {'unknown' if cost is None else f'${cost:.4f}'}"
    )
    if info.get("worktree"):
        out.print(f"  worktree    {info['worktree']}", markup=False)
    if info["stop_reason"]:
        out.print(f"  stopped     {info['stop_reason']}", markup=False)


@app.command()
def abort(loop: Annotated[str, typer.Argument(help="Loop id.")]) -> None:
    """Mark a loop aborted (stopping it first if it is running)."""
    from ralph import runner

    state = runner.abort_loop(loop)
    console().print(f"loop {state.loop_id} aborted", markup=False)


@app.command()
def check(
    test: TestOpt = None,
    check: CheckOpt = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the evaluator_output object.")
    ] = False,
) -> None:
    """Run the evaluator once on the working tree; exit 0 when green, 1 when not."""
    from ralph import config, runner
    from ralph.evaluators import early
    from ralph.evaluators.suite import render_check_report
    from ralph.records import to_json

    root = early.confirmed_root()  # the checks started early are in the right place
    if root is None:
        root = runner.project_root()
        home = runner.memory_root(root)
    else:
        home = root  # a `.git` folder of its own: its own main worktree
    settings = config.load(home, _run_flags(test=test, check=check))
    suite = runner.make_evaluator(settings)
    suite.preflight()
    out = None if as_json else console()
    if out is not None:
        import rich.table  # noqa: F401  (loaded while the checks run, not after them)
    # The console script may have started these very checks already (ralph.evaluators.early).
    evaluation = early.adopt(root, settings) or suite.evaluate(root)
    if out is None:
        print_json(to_json(evaluation.output))
    else:
        render_check_report(evaluation, out)
    raise typer.Exit(0 if evaluation.passed else 1)


@app.command()
def demo(
    keep: Annotated[
        Path | None, typer.Option("--keep", help="Build the demo repository here and keep it.")
    ] = None,
    actor: ActorOpt = None,
    reflector: ReflectorOpt = None,
    as_json: JsonFlag = False,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress output.")] = False,
) -> None:
    """Run the whole loop offline on a small buggy repository (scripted actor by default)."""
    from ralph import demo, runner, ui

    repo = demo.prepare(keep)
    out = console(stderr=as_json)
    who = "a SCRIPTED actor (offline, no model)" if actor is None else f"actor {actor}"
    out.print(f"ralph demo: {demo.TASK}", markup=False)
    out.print(f"repository {repo}; {who}", markup=False)
    reporter = ui.make_reporter(quiet=quiet)
    flags = demo.flags_for(actor, reflector)
    result = runner.run_task(demo.TASK, flags, reporter, cwd=repo)
    if not quiet:
        demo.show_outcome(repo, result.loop_id, out)
    _finish(result, as_json)


# analyze -----------------------------------------------------------------------------------
@app.command()
def analyze(
    loops: Annotated[
        list[str] | None, typer.Argument(help="Loop ids; default every loop in .aiwg/ralph.")
    ] = None,
    since: Annotated[
        str | None, typer.Option(help="Only loops created on or after this date (YYYY-MM-DD).")
    ] = None,
    status: Annotated[
        str | None, typer.Option(help="Only loops with this status (completed, failed, ...).")
    ] = None,
    task: Annotated[str | None, typer.Option(help="Only loops whose task contains TEXT.")] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the analysis as one JSON object.")
    ] = False,
    as_csv: Annotated[bool, typer.Option("--csv", help="Print one CSV row per iteration.")] = False,
    html: Annotated[
        Path | None, typer.Option("--html", help="Write a self-contained HTML report here.")
    ] = None,
) -> None:
    """Learning curves and what the memory taught: success@k, learning rate, breakthroughs."""
    from ralph import analyze as analysis

    if as_json and as_csv:
        raise RalphError("--json and --csv both print on stdout", hint="choose one of them")
    from ralph.ui import progress_bar
    from ralph.views import parse_when

    since_date = parse_when(since, "--since")
    with progress_bar("reading the records") as progress:
        result = analysis.analyze(
            store_here(), loops, since=since_date, status=status, task=task, progress=progress
        )
    if html is not None:
        analysis.write_html(result, html)
        console(stderr=True).print(f"report written to {html}", markup=False, soft_wrap=True)
    if as_json:
        print_json(analysis.analysis_json(result))
    elif as_csv:
        analysis.write_csv(result, sys.stdout)
    elif html is None:
        analysis.render(result, console())


def fail(error: RalphError) -> NoReturn:
    sys.stderr.write(f"ralph: error: {error.message}\n")
    if error.hint:
        sys.stderr.write(f"hint: {error.hint}\n")
    sys.exit(error.exit_code)


def main() -> None:
    """Console-script entry point: run the app, turn errors into one line and an exit code."""
    try:
        code = app(standalone_mode=False)
    except RalphError as error:
        if os.environ.get("RALPH_DEBUG"):
            raise
        fail(error)
    except (KeyboardInterrupt, typer.Abort):
        print("ralph: interrupted", file=sys.stderr)
        sys.exit(130)
    except Exception as error:
        # Usage errors of the CLI parser (typer's vendored click): they know how to show
        # themselves; exit 2 like every other usage error.
        show = getattr(error, "show", None)
        if os.environ.get("RALPH_DEBUG"):
            raise
        if show is None:
            sys.stderr.write(f"ralph: internal error: {type(error).__name__}: {error}\n")
            sys.stderr.write("hint: run again with `ralph --debug ...` for the traceback\n")
            sys.exit(2)
        show()
        sys.exit(int(getattr(error, "exit_code", 2)))
    sys.exit(code if isinstance(code, int) else 0)
