"""Commands about the project rather than one loop: `init` (detect and probe the checks), `check`
(the evaluator once, now), `demo` (the whole loop offline on a small buggy repository)."""

from __future__ import annotations

import os
import shutil
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ralph.cli import early
from ralph.cli.common import (
    ConfigOpt,
    JsonFlag,
    console,
    memory,
    print_json,
    show,
)
from ralph.cli.loops import ActorOpt, CheckOpt, ReflectorOpt, TestOpt, finish_loop, run_flags
from ralph.rendering import Wrapped

if TYPE_CHECKING:
    from ralph.config import Role
from ralph.errors import RalphError


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
    failing tests become the loop's targets, another check that already fails is written as a
    guard, one that cannot run is left out."""
    from ralph.evaluators import detect

    store = memory()
    path = detect.config_path(store, force=force)
    kept_settings = detect.previous_settings(path) if path.is_file() else {}
    checks = detect.detect_checks(store.root)
    out = console()
    if not checks:
        _write(out, store, path, checks, kept_settings)
        out.print("  no pytest, mypy or ruff configuration found: add checks to the file")
        _next_steps(out, store, path)
        return
    kept = detect.unprobed(store.root, checks) if no_run else checks
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
            out.print(Wrapped(f"  {_probe_line(probe, role)}"), crop=False)
            if probe.kept:
                kept.append(replace(probe.spec, role=role))
    _write(out, store, path, kept, kept_settings)
    for check in kept:
        shown = f"  (role: {check.role})" if check.role else ""
        out.print(f"  check {check.name}: {check.command}{shown}", markup=False)
    if any(c.role == "guard" for c in kept):
        out.print(
            Wrapped(
                "a guard must not get worse; to make the loop fix it, set `role: target` in the "
                "file, name it with --check NAME, or run with --strict"
            ),
            crop=False,
        )
    _next_steps(out, store, path)


def _write(out: Any, store: Any, path: Path, checks: Any, settings: dict[str, Any]) -> None:
    """Write the config and say where, which settings of the replaced file were kept, and
    where the replaced file's bytes are."""
    from ralph.evaluators import detect

    backup = detect.write_config(store, path, checks, settings)
    out.print(f"wrote {path}", markup=False, soft_wrap=True)
    if backup is not None:
        names = ", ".join(settings) if settings else "none"
        out.print(
            f"  kept your settings: {names}; the replaced file is {backup}",
            markup=False,
            soft_wrap=True,
        )


def _next_steps(out: Any, store: Any, config: Path) -> None:
    """What to do after init, as command lines to copy: see that the loop can run, commit what
    init wrote (the team shares the checks and the memory), start a loop."""
    from ralph.actors.registry import auto_actor

    def here(path: Path) -> str:
        return os.path.relpath(path)

    try:
        actor = f"actor: {auto_actor(base_dir=store.root, reachable=True).name} (found here)"
    except RalphError:
        actor = "no actor found yet: `ralph doctor` says what each one needs"
    files = f"{here(config)} {here(store.base / '.gitignore')}"
    out.print("next:", markup=False)
    for line, comment in (
        ("ralph doctor", None),
        (f'git add {files} && git commit -m "ralph init"', None),
        ('ralph run "TASK"', actor),
    ):
        out.print(Wrapped(f"  {line}", hang=4, shell=True, comment=comment), crop=False)


def _probe_line(probe: Any, role: Role | None) -> str:
    """A probed check and the role a loop will give it, in judging's words (doctor and run
    say the same)."""
    from ralph.evaluators.judging import role_of, role_text

    name = f"{probe.spec.name}:"
    if not probe.kept:
        return f"{name} left out, {probe.detail}"
    spec = replace(probe.spec, role=role if role == "target" else None)  # a guard by the rule
    return f"{name} {probe.detail}; {role_text(*role_of(spec, probe.status, probe.count))}"


# the loop ------------------------------------------------------------------------------------


def check(
    test: TestOpt = None,
    check: CheckOpt = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the evaluator_output object.")
    ] = False,
    config_file: ConfigOpt = None,
) -> None:
    """Run the evaluator once on the working tree; exit 0 when green, 1 when not."""
    from ralph import config
    from ralph.cli.check_view import CheckReport
    from ralph.cli.progress import check_progress
    from ralph.loop import assembly as runner
    from ralph.records import to_json

    root = runner.project_root()
    flags = run_flags(test=test, check=check, config=config_file)
    settings = config.load(memory(root).root, flags)
    suite = runner.make_evaluator(settings)
    suite.preflight()
    running = early.claim(suite, root)  # started before this command was parsed, if the same
    with check_progress([c.spec.name for c in suite.checks], enabled=not as_json) as done:
        if running is not None:
            evaluation = running.result(suite, on_done=done)
        else:
            evaluation = suite.evaluate(root, on_done=done)
    if as_json:
        print_json(to_json(evaluation.output))
    else:
        show(CheckReport(evaluation))
    raise typer.Exit(0 if evaluation.passed else 1)


def demo(
    keep: Annotated[
        Path | None, typer.Option("--keep", help="Build the demo repository here and keep it.")
    ] = None,
    actor: ActorOpt = None,
    reflector: ReflectorOpt = None,
    as_json: JsonFlag = False,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress output.")] = False,
) -> None:
    """Run the whole loop offline on a small buggy repository (scripted actor by default); the
    repository is removed at the end unless --keep names where to build it."""
    from ralph.cli import demo
    from ralph.cli import live as ui
    from ralph.loop import assembly as runner

    repo = demo.prepare(keep)
    try:
        out = console(stderr=as_json)
        who = "a SCRIPTED actor (offline, no model)" if actor is None else f"actor {actor}"
        out.print(f"ralph demo: {demo.TASK}", markup=False)
        out.print(f"repository {repo}; {who}", markup=False)
        reporter = ui.make_reporter(quiet=quiet)
        reporter.next_steps = keep is not None  # no "apply" of a repository about to go
        flags = demo.flags_for(actor, reflector)
        result = runner.run_task(demo.TASK, flags, reporter, cwd=repo)
        if not quiet:
            demo.show_outcome(repo, result.loop_id, out, kept=keep is not None)
    finally:
        if keep is None:
            shutil.rmtree(repo, ignore_errors=True)
    finish_loop(result, as_json)
