"""Can every task of a batch start? Asked before the first loop, so a batch never starts loops
that die at their preflight (and names loop ids that then never existed).

Each task's settings are those its `ralph run` will load (loop/task_checks.task_settings), and
its actor, reflector and checks go through the loop's own preflights (`build_parts`' makers,
`Actor.preflight`, `CheckSuite.preflight`). One error lists every task that cannot start.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from ralph.errors import PreflightError, RalphError
from ralph.glyphs import plural
from ralph.loop.task_checks import task_settings

if TYPE_CHECKING:
    from ralph.config import Settings
    from ralph.loop.tasks_file import BatchTask


def preflight_tasks(root: Path, tasks: list[BatchTask], configured: Settings) -> None:
    """PreflightError naming each task whose loop could not start, with the first one's hint."""
    problems: list[tuple[int, BatchTask, RalphError]] = []
    seen: dict[tuple[str, tuple[str, ...], str | None, str | None], RalphError | None] = {}
    for number, task in enumerate(tasks, start=1):
        try:
            settings = task_settings(root, task, configured)
            key = (settings.actor, tuple(settings.actor_args), settings.model, settings.reflector)
            if key not in seen:  # one probe per actor: `auto` and agent CLIs run programs
                seen[key] = _actor_problem(settings, root)
            problem = seen[key]
            if problem is not None:
                raise problem
            _checks_ready(settings)
        except RalphError as error:
            problems.append((number, task, error))
    if not problems:
        return
    lines = [
        f"task {number} ({task.name!r}): {error.message.strip()}"
        for number, task, error in problems
    ]
    head = f"{len(problems)} of {plural(len(tasks), 'task')} cannot start; no loop was started"
    raise PreflightError(
        "\n  ".join([head + ":", *lines]),
        hint=problems[0][2].hint or "fix the tasks file or the configuration, then run it again",
    )


def _actor_problem(settings: Settings, root: Path) -> RalphError | None:
    """What stops the loop's actor (or its reflector) from being built or run unattended."""
    from ralph.actors.registry import make_actor
    from ralph.loop.assembly import make_reflector

    try:
        actor = make_actor(
            settings.actor,
            actor_args=settings.actor_args,
            model=settings.model,
            environ=os.environ,
            base_dir=root,
        )
        actor.preflight()
        make_reflector(settings, actor, root, os.environ)
    except RalphError as error:
        return error
    return None


def _checks_ready(settings: Settings) -> None:
    from ralph.loop.assembly import make_evaluator

    make_evaluator(settings).preflight()
