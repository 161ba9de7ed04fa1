"""`ralph reflections …`, `ralph trace`, `ralph feedback`: reading and judging the memory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ralph.cli.common import (
    LOOP_HELP,
    IterationArg,
    JsonFlag,
    LoopArg,
    complete_loop_id,
    console,
    loop_in,
    memory,
    print_json,
    show,
    text_out,
)
from ralph.glyphs import plural

LoopOpt = Annotated[
    str | None,
    typer.Option("--loop", metavar="LOOP", help=LOOP_HELP, autocompletion=complete_loop_id),
]

reflections_app = typer.Typer(
    help="Read the episodic memory: list, show, validate and search reflections.",
    no_args_is_help=True,
)


@reflections_app.command("list")
def reflections_list(
    loop: LoopOpt = None,
    as_json: JsonFlag = False,
) -> None:
    """List loops (id, task, status, iterations, best reward, updated) or one loop's iterations
    (--loop)."""
    from ralph.memory.listing import list_iterations, list_loops

    store = memory()
    store.require()
    listing = list_iterations(store, loop_in(store, loop)) if loop else list_loops(store)
    show(listing, as_json=as_json)


@reflections_app.command("show")
def reflections_show(
    loop: LoopArg,
    iteration: IterationArg = None,
    as_json: JsonFlag = False,
) -> None:
    """Show one iteration record: actions, failing checks, the reflection, insights, lessons."""
    from ralph.memory.shown import record_data, show_record

    store = memory()
    loop = loop_in(store, loop)
    if as_json:
        print_json(record_data(store, loop, iteration))
    else:
        show(show_record(store, loop, iteration))


def trace_command(
    loop: LoopArg,
    iteration: IterationArg = None,
    as_json: JsonFlag = False,
) -> None:
    """What the agent did in an attempt: thought, action, observation per step, as a timeline."""
    from ralph.cli.trace_view import show_trace

    store = memory()
    show_trace(store, loop_in(store, loop), iteration, as_json=as_json)


def prompt_command(
    loop: LoopArg,
    iteration: IterationArg = None,
) -> None:
    """Print the prompt an iteration's actor got, as stored (loops/<id>/NNN/prompt.md)."""
    from ralph.cli.views import stored_prompt

    store = memory()
    text_out().write(stored_prompt(store, loop_in(store, loop), iteration))


@reflections_app.command("validate")
def reflections_validate(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(help="Files or directories; default all of .aiwg/ralph/reflections."),
    ] = None,
) -> None:
    """Validate records (and state files) against the schemas; exit 1 if any is invalid."""
    from ralph.memory.validation import memory_paths, validate_paths

    store = memory()
    if not paths:
        store.require()
        paths = memory_paths(store)
    validation = validate_paths(paths)
    show(validation)
    raise typer.Exit(validation.exit_code)


@reflections_app.command("search")
def reflections_search(
    query: Annotated[
        str, typer.Argument(metavar="QUERY", help="Words to look for, e.g. 'date format slash'.")
    ],
    category: Annotated[
        str | None, typer.Option(help="Only this failure category (e.g. edge_case_miss).")
    ] = None,
    min_confidence: Annotated[
        float | None,
        typer.Option(metavar="X", help="Only reflections this confident (0-1).", min=0, max=1),
    ] = None,
    loop: LoopOpt = None,
    since: Annotated[
        str | None, typer.Option(help="Only records written on or after (YYYY-MM-DD).")
    ] = None,
    until: Annotated[
        str | None, typer.Option(help="Only records written on or before (YYYY-MM-DD).")
    ] = None,
    limit: Annotated[int, typer.Option(metavar="N", help="At most this many results.", min=1)] = 10,
    as_json: JsonFlag = False,
) -> None:
    """Rank reflections of every loop by relevance to QUERY (BM25 over SQLite FTS5)."""
    from ralph.cli import views

    store = memory()
    store.require()
    loop = loop_in(store, loop) if loop else None
    views.search_reflections(
        store, query, console(), as_json=as_json, category=category,
        min_confidence=min_confidence, loop_id=loop, since=since, until=until, limit=limit,
    )  # fmt: skip


@reflections_app.command("obsolete")
def reflections_obsolete(
    loop: LoopArg,
    iteration: Annotated[int, typer.Argument(metavar="ITERATION", help="Iteration number.", min=0)],
    undo: Annotated[
        bool, typer.Option("--undo", help="Clear the mark: its lessons may be injected again.")
    ] = False,
) -> None:
    """Mark a reflection obsolete: its lessons are never again injected into a prompt."""
    from ralph.cli import views

    store = memory()
    views.mark_obsolete(store, loop_in(store, loop), iteration, console(), obsolete=not undo)


@reflections_app.command("lessons")
def reflections_lessons(
    include_all: Annotated[
        bool, typer.Option("--all", help="Also retired lessons and those of obsolete records.")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """What the memory teaches: each lesson, the failure it is for, how often it was offered
    and helped, retired or not, and where it came from."""
    from ralph import config
    from ralph.memory.taught import lessons_taught

    store = memory()
    store.require()
    retire_after = config.load(store.root).lesson_retire_after
    show(
        lessons_taught(store, retire_after=retire_after, include_all=include_all),
        as_json=as_json,
    )


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
        show(report)
    raise typer.Exit(1 if report.invalid or report.conflicts or report.skipped else 0)


@reflections_app.command("export")
def reflections_export(
    loops: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="LOOP",
            help="Loop ids or unique prefixes; default every loop with records.",
            autocompletion=complete_loop_id,
        ),
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
    store = memory()
    loops = [loop_in(store, loop) for loop in loops or []]
    if prov or output is not None:
        from ralph.memory.provenance import prov_data, write_prov

        if output is None:
            print_json(prov_data(store, loops, fmt=fmt))
        else:
            write_prov(store, loops, output=output, fmt=fmt)
            ids = loops or store.loop_ids()
            records = sum(len(store.record_paths(loop_id)) for loop_id in ids)
            console(stderr=True).print(
                f"wrote {output} ({plural(records, 'record')})", markup=False, soft_wrap=True
            )
        return
    from ralph.memory.transfer import export_records

    counts = export_records(store, loops, zip_path=zip_file, folder=folder)
    total = sum(n for _, n in counts)
    where = zip_file if zip_file is not None else folder
    console(stderr=True).print(
        f"exported {plural(total, 'record')} of {plural(len(counts), 'loop')} to {where}",
        markup=False,
        soft_wrap=True,
    )


def feedback(
    loop: LoopArg,
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
    data = give_feedback(store, loop_in(store, loop), accept=accept, reject=reject, note=note)
    if as_json:
        print_json(data)
    else:
        console().print(describe(data), markup=False, soft_wrap=True)
