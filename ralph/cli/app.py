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

from ralph import __version__, glyphs
from ralph.cli.output import console, print_json
from ralph.errors import RalphError

if TYPE_CHECKING:
    from ralph.memory.store import MemoryStore

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
LoopArg = Annotated[str, typer.Argument(help="Loop id (see `ralph reflections list`).")]
IterationArg = Annotated[
    int | None, typer.Argument(help="Iteration number; default the last one.", min=0)
]


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


def memory(start: Path | None = None) -> MemoryStore:
    """The project's memory (`MemoryStore.discover`), imported late so `--help` stays fast."""
    from ralph.memory.store import MemoryStore

    return MemoryStore.discover(start)


# reflections -------------------------------------------------------------------------------
@reflections_app.command("list")
def reflections_list(
    loop: Annotated[str | None, typer.Option("--loop", help="List this loop's iterations.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """List loops (id, task, status, iterations, best reward, updated) or one loop's iterations."""
    from ralph.cli import views

    store = memory()
    store.require()
    if loop:
        views.list_iterations(store, loop, console(), as_json=as_json)
    else:
        views.list_loops(store, console(), as_json=as_json)


@reflections_app.command("show")
def reflections_show(
    loop: LoopArg,
    iteration: IterationArg = None,
    as_json: JsonFlag = False,
) -> None:
    """Show one iteration record: actions, failing checks, the reflection, insights, lessons."""
    from ralph.cli import views

    store = memory()
    store.require()
    views.show_record(store, loop, iteration, console(), as_json=as_json)


@app.command("trace")
def trace_command(
    loop: LoopArg,
    iteration: IterationArg = None,
    as_json: JsonFlag = False,
) -> None:
    """What the agent did in an attempt: thought, action, observation per step, as a timeline."""
    from ralph.cli.trace_view import show_trace

    store = memory()
    store.require()
    show_trace(store, loop, iteration, console(), as_json=as_json)


@reflections_app.command("validate")
def reflections_validate(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(help="Files or directories; default all of .aiwg/ralph/reflections."),
    ] = None,
) -> None:
    """Validate records (and state files) against the schemas; exit 1 if any is invalid."""
    from ralph.cli import views

    store = memory()
    if not paths:
        store.require()
        paths = views.memory_paths(store)
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
    from ralph.cli import views

    store = memory()
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
    from ralph.cli import views

    store = memory()
    store.require()
    views.mark_obsolete(store, loop, iteration, console(), obsolete=not undo)


@reflections_app.command("import")
def reflections_import(
    paths: Annotated[
        list[Path],
        typer.Argument(help="Artifact folders, .zip archives, repositories or their .aiwg/ralph."),
    ],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only list what would change.")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Merge records from other machines into this memory; importing twice changes nothing."""
    from ralph.memory import transfer

    report = transfer.import_records(memory(), paths, dry_run=dry_run)
    if as_json:
        print_json(report.to_json())
    else:
        transfer.render_import(report, console())
    raise typer.Exit(1 if report.invalid or report.conflicts or report.skipped else 0)


@reflections_app.command("export")
def reflections_export(
    loops: Annotated[
        list[str] | None, typer.Argument(help="Loop ids; default every loop with records.")
    ] = None,
    zip_file: Annotated[
        Path | None, typer.Option("--zip", help="Write one .zip archive here.")
    ] = None,
    folder: Annotated[Path | None, typer.Option("--dir", help="Copy into this folder.")] = None,
    prov: Annotated[
        bool, typer.Option("--prov", help="Write W3C PROV provenance instead (stdout or -o).")
    ] = False,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="PROV file.")] = None,
    fmt: Annotated[
        str, typer.Option("--format", help="PROV format: json (PROV-JSON) or jsonld.")
    ] = "json",
) -> None:
    """Copy loops' records as <loop>/NNN.json into a .zip or a folder, for another memory;
    with --prov, where every reflection and lesson came from, as W3C PROV."""
    if prov or output is not None:
        from ralph.memory.provenance import write_prov

        write_prov(memory(), loops or [], output=output, fmt=fmt)
        return
    from ralph.memory.transfer import export_records

    counts = export_records(memory(), loops or [], zip_path=zip_file, folder=folder)
    total = sum(n for _, n in counts)
    where = zip_file if zip_file is not None else folder
    loops_word = "loop" if len(counts) == 1 else "loops"
    console(stderr=True).print(
        f"exported {total} records of {len(counts)} {loops_word} to {where}",
        markup=False,
        soft_wrap=True,
    )


# init --------------------------------------------------------------------------------------
@app.command()
def init(
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing config.")] = False,
    no_run: Annotated[
        bool,
        typer.Option("--no-run", help="Do not run the detected checks; write them without roles."),
    ] = False,
    interactive: Annotated[
        bool,
        typer.Option(
            "--interactive", help="Ask, for each check failing now, whether the loop must fix it."
        ),
    ] = False,
) -> None:
    """Write .aiwg/ralph/config.yaml with the checks detected here, after running them once:
    a check that already fails is written as a guard, one that cannot run is left out."""
    from dataclasses import replace

    from ralph.config import Role
    from ralph.evaluators import detect

    store = memory()
    path = detect.config_path(store, force=force)
    checks = detect.detect_checks(store.root)
    out = console()
    if not checks:
        detect.write_config(store, path, checks)
        out.print(f"wrote {path}", markup=False, soft_wrap=True)
        out.print("  no pytest, mypy or ruff configuration found: add checks to the file")
        return
    kept = checks
    if not no_run:
        names = ", ".join(c.name for c in checks)
        out.print(f"running {names} once, to see where the project stands ...", markup=False)
        with out.status(f"running {names}"):
            probes = detect.probe_checks(store.root, checks)
        kept = []
        for probe in probes:
            role: Role | None = detect.role_for(probe)
            if role == "guard" and interactive:
                question = f"{probe.spec.name} fails now ({probe.detail}): must the loop fix it?"
                role = "target" if typer.confirm(question, default=False) else "guard"
            out.print(f"  {_probe_line(probe, role)}", markup=False)
            if probe.kept:
                kept.append(replace(probe.spec, role=role))
    detect.write_config(store, path, kept)
    out.print(f"wrote {path}", markup=False, soft_wrap=True)
    for check in kept:
        shown = f"  (role: {check.role})" if check.role else ""
        out.print(f"  check {check.name}: {check.command}{shown}", markup=False)
    if any(c.role == "guard" for c in kept):
        out.print(
            "a guard must not get worse; to make the loop fix it, set `role: target` in the "
            "file, name it with --check NAME, or run with --strict",
            markup=False,
        )


def _probe_line(probe: Any, role: str | None) -> str:
    name = f"{probe.spec.name}:"
    if not probe.kept:
        return f"{name} left out, {probe.detail}"
    if probe.status == "pass":
        return f"{name} passes; a target (must stay green)"
    if probe.spec.parser == "pytest":
        return f"{name} {probe.detail}; those tests are the loop's targets"
    if role == "target":
        return f"{name} {probe.detail}; a target: the loop must fix them"
    return f"{name} {probe.detail} before any change; a guard (must not get worse)"


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
TestOpt = Annotated[
    str | None,
    typer.Option(
        "--test",
        help="The test command that matters, e.g. 'pytest -q tests/test_x.py': it replaces the "
        "configured pytest checks (it runs once) and is a target; other checks stay.",
    ),
]
CheckOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--check",
        help="Only these checks, as targets: a configured check's name, pytest, mypy, ruff or "
        "any shell command; repeatable. Selects, does not add.",
    ),
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
    if "strict" in flags:
        flags["success"] = "strict" if flags.pop("strict") else None
    return flags


def _output_mode(flags: dict[str, Any], as_json: bool, quiet: bool) -> tuple[bool, bool]:
    """--json and --quiet, or their config keys and RALPH_JSON / RALPH_QUIET."""
    from ralph import config
    from ralph.loop import assembly as runner

    settings = config.load(memory(runner.project_root()).root, flags)
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
        int | None, typer.Option(help="Reflections in the prompt (0-10; 0: none).", min=0, max=10)
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
    strict: Annotated[
        bool,
        typer.Option(
            "--strict",
            help="Every check must pass, also those failing before the loop (default: targets "
            "must pass and guards must not get worse; see README, Targets and guards).",
        ),
    ] = False,
) -> None:
    """Run the Reflexion loop on TASK until the checks pass or a limit is reached."""
    from ralph.cli import live as ui
    from ralph.loop import assembly as runner

    flags = _run_flags(
        actor=actor, reflector=reflector, test=test, check=check, max_iterations=max_iterations,
        omega=omega, window_policy=window_policy, memory_tokens=memory_tokens, lessons=lessons,
        patience=patience, budget_usd=budget_usd, max_tokens=max_tokens,
        timeout=timeout, iteration_timeout=iteration_timeout, idle_timeout=idle_timeout,
        no_git=no_git, allow_dirty=allow_dirty, no_rollback=no_rollback, worktree=worktree,
        strict=strict,
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
    from ralph.cli import live as ui
    from ralph.loop import assembly as runner

    flags = {"max_iterations": max_iterations}
    _finish(runner.resume_task(loop, flags, ui.make_reporter(quiet=quiet)), as_json)


@app.command()
def status(
    loop: Annotated[str | None, typer.Argument(help="Loop id; default the latest.")] = None,
    as_json: JsonFlag = False,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Print a markdown summary (CI, pull requests).")
    ] = False,
) -> None:
    """Show a loop's state, iteration, rewards and usage."""
    from ralph.loop import assembly as runner

    if markdown:
        from ralph.cli.summary import loop_markdown

        store = memory()
        store.require()
        sys.stdout.write(loop_markdown(store, loop or store.latest_loop()))
        return
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
    out.print(f"  rewards     {glyphs.sparkline(info['reward_history'])} {info['reward_history']}")
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
    """End a loop for good; a running loop is stopped first (it exits with code 4)."""
    from ralph.loop import assembly as runner

    state, stopped = runner.abort_loop(loop)
    if stopped:
        console().print(f"loop {state.loop_id} aborted", markup=False)
    else:
        console().print(
            f"loop {state.loop_id}: abort requested; it has not stopped yet and ends as "
            "aborted before its next attempt (another host or pid namespace cannot be "
            "signalled)",
            markup=False,
        )


@app.command()
def check(
    test: TestOpt = None,
    check: CheckOpt = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the evaluator_output object.")
    ] = False,
) -> None:
    """Run the evaluator once on the working tree; exit 0 when green, 1 when not."""
    from ralph import config
    from ralph.evaluators.suite import render_check_report
    from ralph.loop import assembly as runner
    from ralph.records import to_json

    root = runner.project_root()
    settings = config.load(memory(root).root, _run_flags(test=test, check=check))
    suite = runner.make_evaluator(settings)
    suite.preflight()
    evaluation = suite.evaluate(root)
    if as_json:
        print_json(to_json(evaluation.output))
    else:
        render_check_report(evaluation, console())
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
    from ralph.cli import demo
    from ralph.cli import live as ui
    from ralph.loop import assembly as runner

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


# batch -------------------------------------------------------------------------------------
@app.command("batch")
def batch_command(
    tasks_file: Annotated[
        Path,
        typer.Argument(help="YAML list of tasks: task, and name, test, checks, actor, ..."),
    ],
    jobs: Annotated[
        int | None,
        typer.Option("--jobs", "-j", help="Loops at once (default: the number of cores).", min=1),
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue this file's unfinished loops.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object with every loop at the end.")
    ] = False,
) -> None:
    """Run many tasks on this repository, each a loop in a git worktree of its own."""
    from ralph.cli.batch_view import make_view
    from ralph.loop import batch

    result = batch.run_batch(tasks_file, jobs=jobs, resume=resume, view=make_view())
    if as_json:
        print_json(result.to_json())
    raise typer.Exit(result.exit_code)


@app.command("bench")
def bench_command(
    tasks_file: Annotated[Path, typer.Argument(help="YAML list of tasks, as for `ralph batch`.")],
    arm: Annotated[
        list[str] | None,
        typer.Option(
            "--arm",
            help="NAME=KEY=VALUE,... (omega, lessons, reflector, ...); default: "
            "reflexion and no-memory (omega=0,lessons=0).",
        ),
    ] = None,
    repeats: Annotated[int, typer.Option(help="Runs of every task in every arm.", min=1)] = 1,
    jobs: Annotated[
        int | None,
        typer.Option("--jobs", "-j", help="Loops at once (default: the number of cores).", min=1),
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue this bench without rerunning finished runs.")
    ] = False,
    as_json: JsonFlag = False,
    as_csv: Annotated[bool, typer.Option("--csv", help="Print one CSV row per arm and k.")] = False,
    html: Annotated[
        Path | None, typer.Option("--html", help="Write the table and success@k chart here.")
    ] = None,
) -> None:
    """Does the memory help? Every task in every arm, success@k per arm with 95 % intervals."""
    from ralph.bench import report as bench_report
    from ralph.bench import runner as bench
    from ralph.cli.batch_view import make_view

    if as_json and as_csv:
        raise RalphError("--json and --csv both print on stdout", hint="choose one of them")
    _, summary, interrupted = bench.run_bench(
        tasks_file,
        arm_specs=arm or [],
        repeats=repeats,
        jobs=jobs,
        resume=resume,
        view=make_view(),
    )
    if html is not None:
        bench_report.write_html(summary, html)
    if as_json:
        print_json(summary)
    elif as_csv:
        bench_report.write_csv(summary, sys.stdout)
    else:
        bench_report.render(summary, console())
    raise typer.Exit(130 if interrupted else 0)


# analyze -----------------------------------------------------------------------------------
@app.command()
def feedback(
    loop: Annotated[str, typer.Argument(help="Loop id (see `ralph status`).")],
    accept: Annotated[
        bool, typer.Option("--accept", help="The work is good: its reflections are confirmed.")
    ] = False,
    reject: Annotated[
        bool, typer.Option("--reject", help="The work is not acceptable: a lesson for later.")
    ] = False,
    note: Annotated[
        str | None, typer.Option("--note", help="Why; later loops with similar failures read it.")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """A person's verdict on a finished loop, kept as memory that later loops learn from."""
    from ralph.memory.feedback import describe, give_feedback

    store = memory()
    store.require()
    data = give_feedback(store, loop, accept=accept, reject=reject, note=note)
    if as_json:
        print_json(data)
    else:
        console().print(describe(data), markup=False, soft_wrap=True)


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
    from ralph.analyze import report as analysis_report
    from ralph.analyze import stats as analysis

    if as_json and as_csv:
        raise RalphError("--json and --csv both print on stdout", hint="choose one of them")
    from ralph.cli.live import progress_bar
    from ralph.cli.views import parse_when

    since_date = parse_when(since, "--since")
    with progress_bar("reading the records") as progress:
        result = analysis.analyze(
            memory(),
            loops,
            since=since_date,
            status=status,
            task=task,
            progress=progress,
        )
    if html is not None:
        analysis_report.write_html(result, html)
        console(stderr=True).print(f"report written to {html}", markup=False, soft_wrap=True)
    if as_json:
        print_json(analysis.analysis_json(result))
    elif as_csv:
        analysis_report.write_csv(result, sys.stdout)
    elif html is None:
        analysis_report.render(result, console())


def fail(error: RalphError) -> NoReturn:
    from ralph.redact import redact

    sys.stderr.write(f"ralph: error: {redact(error.message)}\n")
    if error.hint:
        sys.stderr.write(f"hint: {redact(error.hint)}\n")
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
