"""Canaries: two tests of ralph's own in every pytest run, one that must fail and one that must
pass, so a run that was tampered with is seen as such.

Code under test runs inside pytest's process: it can replace `Function.runtest`, rewrite the
JUnit report at exit, or a conftest can turn every failure into a pass. Whatever does that to the
project's tests does it to ralph's too: the test that must fail then passes, or the test that
must pass is missing from the report. The plugin is a module written for the run in ralph's
scratch folder (`.aiwg/ralph/tmp/canaries/`, never the tree), loaded with `-p` under a random
name, and it adds the tests under random names after every other plugin has filtered the items
(`-k`, `-m`, `--lf` and random order leave them alone): the passing one first, a failing one per
folder of the project's tests last (so `-x` stops nothing of the project's), each as if it lay in
that folder, so the conftests that apply to the project's tests there apply to it too. They do
not count in pytest's exit code: the plugin takes the failing ones out of `testsfailed` and all
out of `testscollected`, so exit 0, 1 and 5 keep their meaning; nor in the terminal's counts and
summary. The report's reader (`evaluators/pytest.parse_junit`) sets them apart.

What canaries cannot see: code that special-cases the tests' own inputs, or an object whose
`__eq__` is always true. Held-out tests (`holdout:`) are the answer to those.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

FOLDER = "canaries"
TAMPERED = "the test run was tampered with"

PLUGIN = '''\
"""ralph's canaries for one pytest run: not the project's tests (ralph/evaluators/canary.py)."""
import pathlib

import pytest

PASSES = {passes!r}
FAILS = {fails!r}
_run = {{"added": 0, "session": None}}


def _passes():
    pass


def _fails():
    raise AssertionError("ralph's canary: this test must fail")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    _run["session"] = session


def _in(session, folder, name, function):
    """A test as if in `folder` (a node of the folder itself; no file is made): the conftests of
    that folder apply to it, as they do to the project's tests there."""
    try:
        module = pytest.Module.from_parent(session, path=folder)
    except TypeError:  # pytest before 7 names a node's place `fspath`
        import py

        module = pytest.Module.from_parent(session, fspath=py.path.local(folder))
    return pytest.Function.from_parent(module, name=name, callobj=function)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    here = pathlib.Path(__file__).parent
    places = (pathlib.Path(str(getattr(item, "path", None) or item.fspath)) for item in items)
    folders = list(dict.fromkeys(place.parent for place in places)) or [here]
    first = _in(session, folders[0], PASSES, _passes)
    last = [_in(session, folder, f"{{FAILS}}_{{n}}", _fails) for n, folder in enumerate(folders)]
    items[:] = [first, *items, *last]
    _run["added"] = 1 + len(last)


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session):
    session.testscollected -= _run["added"]


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    """The terminal's counts and summary are the project's tests' (the report keeps all)."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    for reports in getattr(reporter, "stats", {{}}).values():
        reports[:] = [r for r in reports
                      if not getattr(r, "nodeid", "").split("::")[-1].startswith((PASSES, FAILS))]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_logreport(report):
    """A must-fail canary's failure is not counted: taken off before pytest counts it, so
    `-x` and `--maxfail` do not stop on it either."""
    session = _run["session"]
    if session is not None and report.failed and report.nodeid.split("::")[-1].startswith(FAILS):
        session.testsfailed -= 1
        xdist = session.config.pluginmanager.get_plugin("dsession")  # counts its own, after
        if xdist is not None and hasattr(xdist, "countfailures"):
            xdist.countfailures -= 1
    yield
'''


@dataclass(frozen=True)
class Canaries:
    """One run's canary plugin: its module (in `folder`) and its two tests' names."""

    folder: Path
    module: str
    passes: str
    fails: str

    @classmethod
    def write(cls, scratch: Path) -> Canaries:
        """A new plugin with names nobody can guess, in `scratch/canaries/`."""
        folder = scratch / FOLDER
        folder.mkdir(mode=0o700, exist_ok=True)
        module = f"c{os.urandom(8).hex()}"
        passes, fails = (f"test_{os.urandom(8).hex()}" for _ in range(2))
        canaries = cls(folder, module, passes, fails)
        (folder / f"{module}.py").write_text(
            PLUGIN.format(passes=canaries.passes, fails=canaries.fails), encoding="utf-8"
        )
        return canaries

    def owns(self, name: str) -> bool:
        """Whether a test's name is one of the canaries' (a failing one per test folder)."""
        return name == self.passes or name.startswith(f"{self.fails}_")

    def option(self) -> str:
        return f"-p {self.module}"

    def environment(self, environ: Mapping[str, str]) -> dict[str, str]:
        """`PYTHONPATH` with the plugin's folder first (`environ`: what the check would get)."""
        rest = environ.get("PYTHONPATH", "")
        return {"PYTHONPATH": os.pathsep.join(p for p in (str(self.folder), rest) if p)}

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            (self.folder / f"{self.module}.py").unlink()

    def finding(self, seen: Mapping[str, str]) -> str | None:
        """What the canaries' outcomes in the report (name -> passed, failed, skipped) say of
        the run: None when it was not tampered with."""
        passing = seen.get(self.passes)
        failing = next(
            (how for name, how in seen.items() if name != self.passes and how != "failed"), None
        )
        if failing is not None:
            return (
                f"{TAMPERED}: ralph's canary test that must fail was reported as {failing} "
                "(something in the run, a conftest, a plugin or the code under test, changes "
                "test results)"
            )
        if passing != "passed":
            how = "missing from the report" if passing is None else f"reported as {passing}"
            return (
                f"{TAMPERED}: ralph's canary test that must pass was {how} (something in the "
                "run, a conftest, a plugin or the code under test, removes or changes tests)"
            )
        return None
