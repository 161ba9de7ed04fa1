"""Benchmark: `ralph check` (pytest + mypy + ruff in parallel) against its floor.

    python bench/evaluator.py [--modules 30] [--tests-per-module 7] [--repeat 5] [--dir DIR]
                              [--cold-mypy]

Generates a package of MODULES modules with a test suite (some tests failing, some type errors,
some lint errors) and a `.aiwg/ralph/config.yaml` naming the three checks, warms every tool's
cache and ralph's own (bytecode, mypy's version), then times REPEAT rounds of, each a process:

- alone:       each check on its own, one after the other (their sum is "sequential");
- ralph check: the `ralph` console script, as a user runs it (`--json`, so no terminal output);
- a probe:     `ralph check` of one check `date; sleep 1; date`, for where ralph's own time goes:
               from launch until the first check runs, and from the last check's end to exit.

Prints, as medians over the rounds: `ralph check` / the slowest check alone (the floor; goal
<= 1.10) and / the three in turn (goal <= 0.75 with --cold-mypy, where the checks cost about
the same), and the breakdown. With --cold-mypy, mypy's cache is removed before every timed
mypy and ralph run (as after an agent's edits touching shared modules).

Tried and not kept (none gains 5 %; bench/ab.py on this project, warm, 2 quiet cores, against
the checkout without it; "per round": the median of per-round ratios, where an A/A run of 24
rounds gives 1.002, quartiles 0.985-1.034). Here `ralph check` / pytest alone was 1.18: launch
-> first check 90 ms, exit 32 ms, pytest inside / alone 1.05 (~60 ms, mypy and ruff together
use ~0.2 s of CPU), so no scheduling of the short checks can win 5 %:
- the longest check first (pytest's process started before the others start theirs; the
  threads otherwise race, ruff often first), on a config listing ruff, mypy, tests: 0.999
  (24 rounds);
- mypy and ruff at nice 5 (`os.setpriority` on the child once it exists): 0.999 (24 rounds;
  nice 19, 14 rounds: 1.00);
- skipping the interpreter's teardown (`os._exit` once the output is written): 0.983 (30);
- the ~80 ms of imports before the first check (`python -X importtime`) are spread thin: yaml
  18 ms, ralph.records with dataclasses 17 ms, tomllib 4.5 ms; removing yaml's (a parsed
  config kept as JSON) would be ~1.3 % of the check: not tried.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import compile_bytecode, load, machine, median, ratio_line

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


def write_config(root: Path) -> None:
    """The three checks in ralph's config file, as `ralph init` would have written them."""
    lines = ["checks:"]
    for name, cmd in COMMANDS.items():
        lines += [f"  - name: {name}", f"    command: {json.dumps(cmd)}"]
        lines.append(f"    parser: {PARSERS[name]}")
    config = root / ".aiwg" / "ralph" / "config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("\n".join(lines) + "\n", encoding="utf-8")


def ralph_command() -> list[str]:
    """`python -m ralph`: the console script's path, and importable from PYTHONPATH (so the
    same benchmark can time another checkout: `PYTHONPATH=OLD python bench/evaluator.py`)."""
    return [sys.executable, "-m", "ralph"]


def drop_mypy_cache(root: Path, cold: bool) -> None:
    if cold:
        shutil.rmtree(root / ".mypy_cache", ignore_errors=True)
        # ralph's checks keep mypy's cache in its scratch folder, not the tree
        shutil.rmtree(root / ".aiwg" / "ralph" / "tmp" / "mypy-cache", ignore_errors=True)


def time_alone(root: Path, cold: bool) -> dict[str, float]:
    """Each command in its own shell, one after the other: each one's wall time."""
    times = {}
    for name, cmd in COMMANDS.items():
        if name == "mypy":
            drop_mypy_cache(root, cold)
        started = time.perf_counter()
        subprocess.run(["/bin/sh", "-c", f"{cmd} >/dev/null 2>&1"], cwd=root, check=False)
        times[name] = time.perf_counter() - started
    return times


def time_ralph_check(root: Path, cold: bool) -> tuple[float, dict[str, float], dict[str, object]]:
    """`ralph check --json`: its wall time, each check's time inside it, the output."""
    drop_mypy_cache(root, cold)
    started = time.perf_counter()
    done = subprocess.run(
        [*ralph_command(), "check", "--json"], cwd=root, capture_output=True, check=False
    )
    total = time.perf_counter() - started
    if done.returncode not in (0, 1):
        sys.exit(f"ralph check failed ({done.returncode}):\n{done.stderr.decode()}")
    output = json.loads(done.stdout)
    checks = {r["tool"]: r.get("duration_ms", 0) / 1000 for r in output["results"]}
    return total, checks, output


def probe(root: Path) -> tuple[float, float]:
    """(launch -> first check running, last check's end -> ralph's exit) in seconds."""
    # outside the tree: ralph puts back what a check writes in it
    marks = Path(tempfile.gettempdir()) / f"ralph-bench-marks-{os.getpid()}"
    marks.unlink(missing_ok=True)
    stamp = "date +%s.%N"  # GNU date: a ~2 ms process (a `python3` shim can take 100 ms)
    command = f"{stamp} >> {marks}; sleep 1; {stamp} >> {marks}"  # CLI loaded by then
    # named by a config file, not `--check`: a flag that changes the checks waits for the CLI
    probe_config = root / ".aiwg" / "bench-probe.yaml"
    probe_config.write_text(json.dumps({"checks": [{"name": "probe", "command": command}]}))
    launched = time.time()
    subprocess.run(
        [*ralph_command(), "check", "--json"],
        cwd=root,
        env={**os.environ, "RALPH_CONFIG": str(probe_config)},
        capture_output=True,
        check=False,
    )
    exited = time.time()
    started, ended = (float(x) for x in marks.read_text().split())
    return started - launched, exited - ended


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", type=int, default=30)
    parser.add_argument("--tests-per-module", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=None, help="generate here and keep it")
    parser.add_argument("--cold-mypy", action="store_true", help="no mypy cache in timed runs")
    args = parser.parse_args()
    compile_bytecode()

    root = args.dir or Path(tempfile.mkdtemp(prefix="ralph-bench-evaluator-"))
    if not (root / "bench_pkg").exists():
        generate(root, args.modules, args.tests_per_module)
    write_config(root)
    cold = args.cold_mypy

    time_alone(root, cold=False)  # warm: mypy's incremental cache, bytecode, ruff;
    time_ralph_check(root, cold=False)  # ralph's bytecode and its remembered mypy version
    probe(root)
    before = load()
    floor, sequential, ours, slowest_inside, slowest_alone, starts, tails = ([] for _ in range(7))
    alone: dict[str, list[float]] = {name: [] for name in COMMANDS}
    inside: dict[str, list[float]] = {name: [] for name in COMMANDS}
    output: dict[str, object] = {}
    for _ in range(args.repeat):
        times = time_alone(root, cold)
        for name, seconds in times.items():
            alone[name].append(seconds)
        slowest = max(times, key=lambda n: times[n])
        floor.append(times[slowest])
        sequential.append(sum(times.values()))
        total, checks, output = time_ralph_check(root, cold)
        ours.append(total)
        for name, seconds in checks.items():
            inside[name].append(seconds)
        slowest_inside.append(checks[slowest])
        slowest_alone.append(times[slowest])
        start, tail = probe(root)
        starts.append(start)
        tails.append(tail)
    after = load()

    mode = "cold" if cold else "warm"
    errors = list(output.get("errors") or [])  # type: ignore[call-overload]
    print(f"repository: {root} ({args.modules} modules, mypy cache {mode}, {args.repeat} rounds)")
    print(f"evaluation: reward {output.get('reward_signal')}, {len(errors)} errors")
    print(machine(before, after))
    print("check    alone (median)   inside ralph check (median)")
    for name in COMMANDS:
        print(f"  {name:6s} {median(alone[name]):8.3f} s     {median(inside[name]):8.3f} s")
    print(ratio_line("ralph check / slowest check alone", ours, floor, goal=1.10))
    goal = 0.75 if cold else None
    print(ratio_line("ralph check / the three one after another", ours, sequential, goal=goal))
    print("where ralph's own time goes (medians):")
    print(f"  launch -> first check running            {median(starts) * 1000:6.0f} ms")
    print(f"  last check's end -> exit (read, report)  {median(tails) * 1000:6.0f} ms")
    print(ratio_line("  slowest check inside ralph / alone", slowest_inside, slowest_alone))


if __name__ == "__main__":
    main()
