"""A failed doctest (`--doctest-modules`, as humanize runs its tests) reads as what failed, not as
the first line of the docstring pytest lists before it."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from ralph.config import CheckSpec
from ralph.evaluators.suite import make_check

MODULE = '''
def add(a, b):
    """Add two numbers.

    >>> add(1, 1)
    2
    >>> add(2, 2)
    5
    """
    return a + b


def parse(text):
    """Parse a number.

    >>> parse("x")
    0
    """
    raise ValueError("not a number: " + text)
'''


def test_a_failed_doctest_names_the_example_what_it_expected_and_what_it_got(
    tmp_path: Path,
) -> None:
    (tmp_path / "calc.py").write_text(MODULE, "utf-8")
    command = f"{shlex.quote(sys.executable)} -m pytest -q --doctest-modules calc.py"
    check = make_check(CheckSpec("pytest", command, "pytest"), timeout=120, cap=1 << 20)
    outcome = check.run(tmp_path)
    messages = sorted(e.message for e in outcome.errors)
    assert messages == [
        "doctest `>>> add(2, 2)` expected 5, got 4",
        "doctest `>>> parse(\"x\")` raised ValueError('not a number: x')",
    ]
    located = {(e.file, e.line) for e in outcome.errors}
    assert located == {("calc.py", 7), ("calc.py", 16)}  # the examples
