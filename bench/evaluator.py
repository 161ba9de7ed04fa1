"""Benchmark: ralph's evaluator (pytest + mypy + ruff in parallel) against running them in turn.

    python bench/evaluator.py [--modules 30] [--tests-per-module 7] [--repeat 5] [--dir DIR]
                              [--cold-mypy]

Generates a package of MODULES modules with a test suite (some tests failing, some type errors,
some lint errors), warms every tool's cache once, then times REPEAT rounds of:

- sequential: one shell running `pytest; mypy; ruff check` one after the other;
- ralph:      `CheckSuite.evaluate` with the same three commands (what `ralph check` runs),

and prints the medians, the ratio ralph / sequential (target <= 0.75 on 2 cores) and ralph's
overhead: its total minus its slowest check (target < 100 ms). With --cold-mypy, mypy's cache
is removed before every timed run (as after an agent's edits touching shared modules) instead
of only the first.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

PY = shlex.quote(sys.executable)
COMMANDS = {
    "tests": f"{PY} -m pytest -q",
    "mypy": f"{PY} -m mypy bench_pkg",
    "ruff": f"{PY} -m ruff check --isolated --no-cache --select E,F,W,I bench_pkg tests",
}
PARSERS = {"tests": "pytest", "mypy": "mypy", "ruff": "ruff"}

MODULE = '''\
"""Module {i}: a few typed helpers, the kind of code a real package is made of."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Ledger{i}:
    name: str
    entries: list[int] = field(default_factory=list)

    def add(self, amount: int) -> int:
        self.entries.append(amount)
        return self.total()

    def total(self) -> int:
        return sum(self.entries)

    def largest(self) -> int | None:
        return max(self.entries) if self.entries else None


def scale_{i}(values: list[int], factor: int) -> list[int]:
    return [v * factor for v in values]


def describe_{i}(ledger: Ledger{i}) -> str:
    return f"{{ledger.name}}: {{ledger.total()}} over {{len(ledger.entries)}} entries"


def merge_{i}(left: dict[str, int], right: dict[str, int]) -> dict[str, int]:
    merged = dict(left)
    for key, value in right.items():
        merged[key] = merged.get(key, 0) + value
    return merged
'''
TYPE_ERROR = """

def broken_{i}(ledger: Ledger{i}) -> str:
    return ledger.total()
"""
LINT_ERROR = """

def unused_{i}() -> None:
    import os
"""
TESTS = """\
from bench_pkg.mod_{i} import Ledger{i}, describe_{i}, merge_{i}, scale_{i}


def test_add_{i}():
    ledger = Ledger{i}("a")
    assert ledger.add(3) == 3


def test_total_{i}():
    ledger = Ledger{i}("a", [1, 2, 3])
    assert ledger.total() == 6


def test_largest_{i}():
    assert Ledger{i}("a", [4, 9, 2]).largest() == 9
    assert Ledger{i}("b").largest() is None


def test_scale_{i}():
    assert scale_{i}([1, 2], 3) == [3, 6]


def test_describe_{i}():
    assert describe_{i}(Ledger{i}("x", [1])) == "x: 1 over 1 entries"


def test_merge_{i}():
    assert merge_{i}({{"a": 1}}, {{"a": 2, "b": 1}}) == {{"a": 3, "b": 1}}
"""
FAILING_TEST = """

def test_scale_wrong_{i}():
    assert scale_{i}([2], 2) == [5], "scaling is off"
"""


def generate(root: Path, modules: int, tests_per_module: int) -> None:
    """A package whose every 5th module has a type error, every 7th a lint error, and every
    10th module's tests one failure."""
    pkg = root / "bench_pkg"
    (root / "tests").mkdir(parents=True)
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for i in range(modules):
        source = MODULE.format(i=i)
        if i % 5 == 0:
            source += TYPE_ERROR.format(i=i)
        if i % 7 == 0:
            source += LINT_ERROR.format(i=i)
        (pkg / f"mod_{i}.py").write_text(source)
        tests = TESTS.format(i=i)
        extra = max(0, tests_per_module - 6)
        for j in range(extra):
            tests += f"\n\ndef test_extra_{i}_{j}():\n    assert scale_{i}([{j}], 1) == [{j}]\n"
        if i % 10 == 0:
            tests += FAILING_TEST.format(i=i)
        (root / "tests" / f"test_mod_{i}.py").write_text(tests)
    (root / "pyproject.toml").write_text(
        textwrap.dedent(
            """\
            [tool.pytest.ini_options]
            testpaths = ["tests"]

            [tool.mypy]
            strict = true
            """
        )
    )


def time_sequential(root: Path) -> tuple[float, dict[str, float]]:
    """Each command in its own shell, one after the other; the total and each one's time."""
    times = {}
    for name, cmd in COMMANDS.items():
        started = time.perf_counter()
        subprocess.run(["/bin/sh", "-c", f"{cmd} >/dev/null 2>&1"], cwd=root, check=False)
        times[name] = time.perf_counter() - started
    return sum(times.values()), times


def time_ralph(root: Path) -> tuple[float, dict[str, float], object]:
    from ralph.config import CheckSpec
    from ralph.evaluators.suite import CheckSuite

    specs = [CheckSpec(name, cmd, PARSERS[name]) for name, cmd in COMMANDS.items()]
    suite = CheckSuite(specs)
    started = time.perf_counter()
    evaluation = suite.evaluate(root)
    total = time.perf_counter() - started
    checks = {o.spec.name: (o.result.duration_ms or 0) / 1000 for o in evaluation.outcomes}
    return total, checks, evaluation


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", type=int, default=30)
    parser.add_argument("--tests-per-module", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=None, help="generate here and keep it")
    parser.add_argument("--cold-mypy", action="store_true", help="no mypy cache in timed runs")
    args = parser.parse_args()

    root = args.dir or Path(tempfile.mkdtemp(prefix="ralph-bench-evaluator-"))
    if not (root / "bench_pkg").exists():
        generate(root, args.modules, args.tests_per_module)

    time_sequential(root)  # warm caches (mypy's incremental cache, imports, ruff) and
    _, _, evaluation = time_ralph(root)  # ralph's one-time mypy version probe
    sequential, ralph, overheads = [], [], []
    per_check: dict[str, list[float]] = {name: [] for name in COMMANDS}
    alone: dict[str, list[float]] = {name: [] for name in COMMANDS}
    load_before = os.getloadavg()[0]
    for _ in range(args.repeat):
        if args.cold_mypy:
            shutil.rmtree(root / ".mypy_cache", ignore_errors=True)
        total_alone, times = time_sequential(root)
        sequential.append(total_alone)
        for name, seconds in times.items():
            alone[name].append(seconds)
        if args.cold_mypy:
            shutil.rmtree(root / ".mypy_cache", ignore_errors=True)
        total, checks, evaluation = time_ralph(root)
        ralph.append(total)
        overheads.append(total - max(checks.values()))
        for name, seconds in checks.items():
            per_check[name].append(seconds)

    seq, par = statistics.median(sequential), statistics.median(ralph)
    overhead_ms = statistics.median(overheads) * 1000
    summary = getattr(evaluation, "summary")()  # noqa: B009
    mode = "cold" if args.cold_mypy else "warm"
    print(f"repository: {root} ({args.modules} modules, mypy cache {mode})")
    print(
        f"evaluation: reward {summary['reward']}, errors per check {summary['check_error_counts']}"
    )
    print(f"load average (1 min) before {load_before:.2f}, after {os.getloadavg()[0]:.2f}")
    print("check   alone (sequential)   in ralph (parallel)")
    for name, values in per_check.items():
        print(
            f"  {name:6s} {statistics.median(alone[name]):8.3f} s"
            f"          {statistics.median(values):8.3f} s"
        )
    print(f"sequential median {seq:6.3f} s   (runs: {', '.join(f'{s:.3f}' for s in sequential)})")
    print(f"ralph      median {par:6.3f} s   (runs: {', '.join(f'{s:.3f}' for s in ralph)})")
    print(f"ratio ralph / sequential: {par / seq:.2f}   (target <= 0.75 on 2 cores)")
    print(f"ralph overhead (total - slowest check): {overhead_ms:.0f} ms   (target < 100 ms)")


if __name__ == "__main__":
    main()
