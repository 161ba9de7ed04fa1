"""Many loops at once and what they show: `batch`, `bench`, `analyze`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ralph.cli.common import (
    JsonFlag,
    complete_loop_id,
    console,
    loop_in,
    memory,
    print_json,
    show,
    text_out,
)
from ralph.cli.sandboxing import (
    PassEnvOpt,
    SandboxNetworkOpt,
    SandboxOpt,
    SandboxWriteOpt,
    export_sandbox,
    sandbox_flags,
)
from ralph.errors import RalphError

# batch -------------------------------------------------------------------------------------


def batch_command(
    tasks_file: Annotated[
        Path,
        typer.Argument(
            metavar="TASKS_FILE",
            help="The tasks (YAML): a list, or a mapping with `tasks:` and `defaults:`; below.",
        ),
    ],
    jobs: Annotated[
        int | None,
        typer.Option(
            "--jobs", "-j", metavar="N", help="Loops at once (default: the number of cores).", min=1
        ),
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue this file's unfinished loops.")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object with every loop at the end.")
    ] = False,
    sandbox: SandboxOpt = None,
    sandbox_network: SandboxNetworkOpt = None,
    sandbox_write: SandboxWriteOpt = None,
    pass_env: PassEnvOpt = None,
) -> None:
    """Run many tasks on this repository, each a loop in a git worktree of its own.

    TASKS_FILE is YAML: a list of tasks, or a mapping with `tasks:` (that list) and
    `defaults:` (keys every task gets unless it sets them: test, checks, actor,
    max_iterations, allow_test_edits). A task is its text as a bare string, or a mapping:

    \b
      task              what to do (required; at most 32,000 characters)
      name              unique; names its loop and branch (default: from the task)
      test              the tests this task must make pass: its target. The
                        configured checks still run, as guards: no test that
                        passed may fail, no new finding (a check whose config
                        sets `role:` keeps it)
      checks            instead of the configured checks: a name (pytest, mypy,
                        ruff, a configured check's), a command, or a mapping
                        like config.yaml's {name, command, parser, weight,
                        timeout, role}; one or a list. Without `role:`, a target
      actor             who changes the code: claude, codex, cmd:/abs/agent.sh
                        (a relative cmd: path is beside the tasks file)
      max_iterations    attempts before the loop gives up (default: the config's)
      allow_test_edits  true: the task is about the tests; its edits of them count

    A task with neither `test` nor `checks` is judged by the configured checks alone:
    every test failing before the loop is its target, the other tasks' too. Every task's
    actor and checks are checked before any loop starts.

    \b
    Example:
      defaults: {actor: claude, max_iterations: 5}
      tasks:
        - name: dates
          task: fix the failing date parser tests
          test: pytest -q tests/test_dates.py
        - name: lint
          task: make ruff clean on src/api
          checks: [ruff check src/api, {name: pytest, role: guard}]
        - make mypy pass
    """
    from ralph.cli.batch_view import make_view
    from ralph.loop import batch

    export_sandbox(sandbox_flags(sandbox, sandbox_network, sandbox_write, pass_env))

    result = batch.run_batch(tasks_file, jobs=jobs, resume=resume, view=make_view())
    if as_json:
        show(result, as_json=True)
    raise typer.Exit(result.exit_code)


def bench_command(
    tasks_file: Annotated[
        Path, typer.Argument(metavar="TASKS_FILE", help="YAML list of tasks, as for `ralph batch`.")
    ],
    arm: Annotated[
        list[str] | None,
        typer.Option(
            "--arm",
            metavar="NAME=KEY=VALUE,...",
            help="An arm: its name and run settings (omega, lessons, reflector, model, ...); "
            "repeatable. Default: reflexion and no-memory=omega=0,lessons=0.",
        ),
    ] = None,
    repeats: Annotated[
        int, typer.Option(metavar="K", help="Runs of every task in every arm.", min=1)
    ] = 1,
    jobs: Annotated[
        int | None,
        typer.Option(
            "--jobs", "-j", metavar="N", help="Loops at once (default: the number of cores).", min=1
        ),
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue this bench without rerunning finished runs.")
    ] = False,
    as_json: JsonFlag = False,
    as_csv: Annotated[bool, typer.Option("--csv", help="Print one CSV row per arm and k.")] = False,
    html: Annotated[
        Path | None,
        typer.Option("--html", metavar="FILE", help="Write the table and success@k chart here."),
    ] = None,
    sandbox: SandboxOpt = None,
    sandbox_network: SandboxNetworkOpt = None,
    sandbox_write: SandboxWriteOpt = None,
    pass_env: PassEnvOpt = None,
) -> None:
    """Does the memory help? Every task in every arm, success@k per arm with 95 % intervals."""
    from ralph.bench import report as bench_report
    from ralph.bench import runner as bench
    from ralph.cli.batch_view import make_view

    if as_json and as_csv:
        raise RalphError("--json and --csv both print on stdout", hint="choose one of them")
    export_sandbox(sandbox_flags(sandbox, sandbox_network, sandbox_write, pass_env))
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
        console(stderr=True).print(f"report written to {html}", markup=False, soft_wrap=True)
    if as_json:
        print_json(summary)
    elif as_csv:
        bench_report.write_csv(summary, text_out())
    else:
        out = console()
        grid, width = bench_report.table(summary)
        wide = type(out)(  # as clean as `out`, only wider
            file=out.file, width=max(out.width, width), no_color=out.no_color, highlight=False
        )
        wide.print(grid)
        out.print(summary["interval"], markup=False)
        for line in bench_report.footnotes(summary):
            out.print(line, markup=False)
    raise typer.Exit(130 if interrupted else 1 if summary["could_not_run"] else 0)


# analyze -----------------------------------------------------------------------------------


def analyze(
    loops: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="LOOP",
            help="Loop ids or unique prefixes; default every loop in .aiwg/ralph.",
            autocompletion=complete_loop_id,
        ),
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
    from ralph import config
    from ralph.analyze import report as analysis_report
    from ralph.analyze import stats as analysis
    from ralph.cli import analyze_view

    if as_json and as_csv:
        raise RalphError("--json and --csv both print on stdout", hint="choose one of them")
    from ralph.cli.live import progress_bar
    from ralph.cli.views import parse_when

    since_date = parse_when(since, "--since")
    store = memory()
    if loops:
        loops = [loop_in(store, loop) for loop in loops]
    with progress_bar("reading the records") as progress:
        result = analysis.analyze(
            store,
            loops,
            since=since_date,
            status=status,
            task=task,
            progress=progress,
            retire_after=config.load(store.root).lesson_retire_after,
        )
    if html is not None:
        analysis_report.write_html(result, html)
        console(stderr=True).print(f"report written to {html}", markup=False, soft_wrap=True)
    if as_json:
        print_json(analysis.analysis_json(result))
    elif as_csv:
        analysis_report.write_csv(result, text_out())
    elif html is None:
        show(analyze_view.AnalysisView(result))
