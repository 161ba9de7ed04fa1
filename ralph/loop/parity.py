"""The preflight of worktree parity: tests that cannot even be imported in a loop's worktree
but can in the user's checkout are the worktree's fault, not the task's.

Without it a loop spends its attempts asking the agent to fix an import error the checkout does
not have (a git-ignored `_version.py` generated at install time), and passes that advice on as
a lesson. So before any agent call, when the worktree lacks an ignored file of the checkout
(caches aside; otherwise this costs one `git ls-files`), each configured pytest check collects
(`--collect-only`, nothing runs) in the worktree; only when that fails with an import error is
it tried in the checkout, and when it collects there the loop stops with exit 2, naming the
error, the ignored files the worktree lacks and the two fixes. `ralph batch` runs it once, in
a throwaway worktree, before any loop starts.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from shlex import quote

from ralph.config import CheckSpec, Settings
from ralph.errors import PreflightError
from ralph.evaluators.command import insert_after
from ralph.evaluators.pytest import PYTEST, parse_text
from ralph.files import bytecode_env
from ralph.ids import new_loop_id
from ralph.process import ProcessResult, run
from ralph.records import Diagnostic
from ralph.workspace.locate import memory_root
from ralph.workspace.parity import copy_included, ignored_entries, included_files, missing_ignored
from ralph.workspace.worktree import add_worktree, import_path, remove_worktree

COLLECT = "--collect-only"
NO_CACHE = "-p no:cacheprovider"  # collecting in the checkout must not write .pytest_cache
MISSING_SHOWN = 8


@dataclass(frozen=True)
class ImportFailure:
    """A pytest check whose tests cannot be imported in the worktree."""

    check: str
    error: Diagnostic


def collect_command(spec: CheckSpec) -> str | None:
    """The check's pytest command collecting only; None when pytest is behind a wrapper."""
    flags = COLLECT if "no:cacheprovider" in spec.command else f"{COLLECT} {NO_CACHE}"
    return insert_after(spec.command, PYTEST, flags)


def import_failures(result: ProcessResult, cwd: Path) -> list[Diagnostic]:
    """The collection errors of a `--collect-only` run that are import failures."""
    if result.exit_code in (0, 5) or result.timed_out:
        return []
    return [d for d in parse_text(result, cwd).collection if d.is_import_failure()]


def pytest_checks(settings: Settings) -> list[CheckSpec]:
    return [spec for spec in settings.all_checks() if spec.parser == "pytest"]


def find_failure(
    specs: Sequence[CheckSpec],
    top: Path,
    workdir: Path,
    environ: Mapping[str, str],
    timeout: float | None,
) -> ImportFailure | None:
    """The first check that cannot import its tests in `workdir` (with `environ`, the loop's
    own) but collects in the checkout at `top` (with ralph's environment)."""
    seen: set[str] = set()
    # bytecode where the checks keep theirs: never into either tree
    bytecode = bytecode_env(memory_root(top), environ)
    for spec in specs:
        command = collect_command(spec)
        if command is None or command in seen:
            continue
        seen.add(command)
        there = run(command, cwd=workdir, env={**environ, **bytecode}, wall_timeout=timeout)
        failures = import_failures(there, workdir)
        if not failures:
            continue
        ours = bytecode_env(memory_root(top), os.environ)  # the checkout's own environment
        here = run(command, cwd=top, env=ours, wall_timeout=timeout)
        if here.exit_code == 0:
            return ImportFailure(spec.name, failures[0])
    return None


def parity_error(failure: ImportFailure, missing: Sequence[str]) -> PreflightError:
    """Exit 2 with the error, the ignored files the worktree lacks and both fixes."""
    where = f" ({failure.error.location()})" if failure.error.location() else ""
    more = len(missing) - MISSING_SHOWN
    lacks = ", ".join(missing[:MISSING_SHOWN]) + (f" (+{more} more)" if more > 0 else "")
    return PreflightError(
        f"check {failure.check!r} cannot import its tests in a fresh worktree but can in your "
        f"checkout: {failure.error.message}{where}; files git ignores that your checkout has "
        f"and the worktree lacks: {lacks}",
        hint=f"list them in .worktreeinclude (gitignore syntax: {' '.join(missing[:3])}) to "
        "copy them into each worktree, or set worktree_setup: a command that makes them in the "
        f"worktree, such as `{copy_command(missing[0])}`, in .aiwg/ralph/config.yaml (not an "
        "editable install: it would point your environment at the worktree); no agent was called",
    )


def copy_command(path: str) -> str:
    """A `worktree_setup` that copies one file from the user's checkout (`$RALPH_CHECKOUT`)."""
    return f'cp "$RALPH_CHECKOUT"/{quote(path)} {quote(path)}'


def check_parity(settings: Settings, top: Path, workdir: Path, environ: Mapping[str, str]) -> None:
    """Raise `parity_error` when the worktree at `workdir` cannot import tests `top` can."""
    check_parity_of(pytest_checks(settings), top, workdir, environ, settings.check_timeout)


def batch_needs_probe(top: Path, settings: Sequence[Settings]) -> bool:
    """Some task has pytest checks, none has a `worktree_setup`, and a worktree would lack an
    ignored file of the checkout that `.worktreeinclude` does not bring."""
    if not any(pytest_checks(one) for one in settings):
        return False
    if any(one.worktree_setup for one in settings):
        return False
    return bool(set(ignored_entries(top)) - set(included_files(top)))


def probe_batch(top: Path, settings: Sequence[Settings]) -> None:
    """`ralph batch`: the parity preflight once for every task, in a throwaway worktree with the
    included files, before any loop starts. Skipped with `worktree_setup` (a setup such as
    `pip install -e .` must not run for a worktree that goes away): each loop checks then."""
    if not batch_needs_probe(top, settings):
        return
    specs = [spec for one in settings for spec in pytest_checks(one)]
    probe = add_worktree(top, new_loop_id("parity probe"))
    try:
        copy_included(top, probe)
        environ = {**os.environ, **import_path(probe, os.environ)}
        timeout = max((one.check_timeout or 0.0 for one in settings), default=0.0) or None
        check_parity_of(specs, top, probe, environ, timeout)
    finally:
        with contextlib.suppress(Exception):
            remove_worktree(probe, force=True)


def check_parity_of(
    specs: Sequence[CheckSpec],
    top: Path,
    workdir: Path,
    environ: Mapping[str, str],
    timeout: float | None,
) -> None:
    """The preflight itself. Free when the worktree lacks no ignored file of the checkout (one
    `git ls-files`): then its tests import what the checkout's do, and nothing is collected."""
    missing = missing_ignored(top, workdir, limit=MISSING_SHOWN + 20)
    if not missing:
        return
    failure = find_failure(specs, top, workdir, environ, timeout)
    if failure is not None:
        raise parity_error(failure, missing)
