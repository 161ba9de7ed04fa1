"""Held-out tests: what checks alone cannot see, seen by tests the agent never saw.

Code that special-cases the tests' exact inputs, or returns an object whose `__eq__` is always
true, passes the tests it was written against. `holdout:` in the config names test files or
folders (from the project's root, or absolute) that are kept from the agent: under the sandbox
they are not there at all for the actor and the checks (`sandbox.Policy.hidden`: an empty file
or folder over each), they are in no prompt (they are not one of the loop's checks), and
before a success is declared they run, as a pytest check of their own (report, canaries, the
checks' sandbox without the mask), on the attempt's tree. A success they fail is not one: the
loop ends `suspect` (exit 1), naming the held-out tests that failed. Without a sandbox the agent
can read what lies in the tree: keep held-out tests outside it, which the loop says when they
are not. The tree's conftests do not apply to a file outside it; the tree's root is first on
`PYTHONPATH`, so its code imports.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ralph.config import CheckSpec, Settings
from ralph.evaluators.base import EvaluationRequest, Evaluator
from ralph.glyphs import plural
from ralph.loop.policy import Decision

if TYPE_CHECKING:
    from ralph.loop.steps import Parts, Reporter
    from ralph.sandbox import Sandbox

NAMED = 5  # failing held-out tests named in the reason


def command(settings: Settings, held: tuple[Path, ...]) -> str:
    """pytest as the project's own pytest check runs it (its interpreter), on the held-out
    paths; ralph's interpreter when no check names pytest."""
    from ralph.evaluators.pytest import PYTEST  # here: the runner imports this module, and
    # `ralph status` the runner, which loads no check

    program = f"{shlex.quote(sys.executable)} -m pytest"
    for spec in settings.all_checks():
        match = PYTEST.search(spec.command) if spec.parser == "pytest" else None
        if match is not None:
            program = spec.command[: match.end()]
            break
    return " ".join([program, "-q", *(shlex.quote(str(p)) for p in held)])


def held_out(
    settings: Settings,
    root: Path,
    environment: Mapping[str, str],
    sandbox: Sandbox | None,
    note: Callable[[str], None] | None = None,
) -> Evaluator | None:
    """The held-out tests as an evaluator of their own (None: none configured); run with the
    checks' `environment` and `sandbox` (unmasked), the tree's root first on PYTHONPATH.
    `note` hears when an agent without a sandbox could read them."""
    from ralph.evaluators.suite import CheckSuite  # here: see `command`

    held = settings.holdout_paths(root)
    if not held:
        return None
    inside = [p.name for p in held if p.is_relative_to(root.resolve())]
    if sandbox is None and inside and note is not None:
        note(
            f"held-out tests inside the tree ({', '.join(inside)}) are visible to an agent "
            "without a sandbox: keep them outside the tree, or use --sandbox bwrap"
        )

    suite = CheckSuite(
        [CheckSpec("holdout", command(settings, held), "pytest")],
        check_timeout=settings.check_timeout,
        cap=settings.output_cap,
    )
    rest = environment.get("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    suite.use_environment(
        {**environment, "PYTHONPATH": os.pathsep.join(p for p in (str(root), rest) if p)}
    )
    suite.use_sandbox(replace(sandbox, hidden=()) if sandbox is not None else None)
    return suite


def second_look(parts: Parts, decision: Decision, reporter: Reporter) -> Decision:
    """A success is declared only when the held-out tests pass on the attempt's tree too;
    otherwise the loop ends `suspect`, naming the held-out tests that failed."""
    if decision.action != "success" or parts.holdout is None:
        return decision
    evaluation = parts.holdout.handle(EvaluationRequest(parts.workspace.root))
    if evaluation.passed:
        reporter.note("held-out tests: pass")
        return decision
    failed = [d.rule or d.message.splitlines()[0] for d in evaluation.output.errors or []]
    more = f" and {len(failed) - NAMED} more" if len(failed) > NAMED else ""
    named = ", ".join(failed[:NAMED]) + more
    return Decision(
        "suspect",
        f"the checks pass but {plural(len(failed), 'held-out test')} failed: {named} (the code "
        "may fit the visible tests only: special-cased inputs, an always-true __eq__)",
    )
