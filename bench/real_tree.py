"""Benchmark: ralph on a tree the size of a real library, not a ten-file toy.

    python bench/real_tree.py [--modules 100] [--iterations 200] [--sandbox none|bwrap]
    python bench/real_tree.py --sdist attrs-25.1.0.tar.gz [--test "python -m pytest -q -x"]

The tree is generated (nested packages, MODULES modules with five tests each, a few MB of data
files, an untracked file and an ignored one) or unpacked from a real library's sdist (each
committed as the user's repository). Three figures, each against its floor measured in the same
run on the same machine:

- per-iteration overhead: the real loop in-process (`assembly.run_task`, as `ralph run`) with a
  `cmd:` actor that edits one module and one fast failing check, to ITERATIONS; ralph's time per
  iteration (one prompt to the next) minus the same two commands with no ralph around them, at
  iterations 1-20 and at the last 20 (goal < 100 ms with bubblewrap, flat: last / first <= 1.2),
  with the median of each phase (compose, act, evaluate, reflect and remember);
- time to the first agent call with the project's tests as the check, against one plain run of
  those tests (`run` prepares a branch and runs the baseline first);
- a fresh clone's first `ralph check` against a warm second one and a plain run of the tests
  (goal: first within 1.2 x warm; warm within 1.05 x the tests alone).

The modules count sets the tree's size: compare `--modules 100` (about 500 files) with
`--modules 1000` (about 5,000) for how the overhead grows with the tree (goal: at most x 1.2).
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: see common.py

from common import compile_bytecode, load, machine, median, ratio_line
from loop import Clock

from ralph.cli.live import SilentReporter

CHECK = "test -f never-there"
ACTOR = 'echo "# $(date +%N)" >> {module}'
GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
}
PHASES = ("prompt", "act", "evaluate", "reflect")


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, env={**os.environ, **GIT_ENV}, check=True)


def generate(root: Path, modules: int) -> Path:
    """A library-shaped project: packages nested two deep, five tests a module, data files;
    returns the module the actor edits."""
    per_package = 10
    for number in range(modules):
        package = root / "lib" / f"pkg{number // per_package:02d}" / "core"
        package.mkdir(parents=True, exist_ok=True)
        for init in (package / "__init__.py", package.parent / "__init__.py"):
            init.touch()
        functions = "\n\n".join(
            f"def f{k}(x: int) -> int:\n    '''Step {k} of module {number}.'''\n"
            f"    return x * {k + 1} + {number}\n"
            for k in range(5)
        )
        (package / f"mod{number:03d}.py").write_text(functions + "\n", encoding="utf-8")
        tests = root / "tests" / f"pkg{number // per_package:02d}"
        tests.mkdir(parents=True, exist_ok=True)
        name = f"lib.pkg{number // per_package:02d}.core.mod{number:03d}"
        body = "\n\n".join(
            f"def test_f{k}() -> None:\n    assert m.f{k}(2) == {2 * (k + 1) + number}\n"
            for k in range(5)
        )
        (tests / f"test_mod{number:03d}.py").write_text(
            f"import {name} as m\n\n\n{body}", encoding="utf-8"
        )
    (root / "lib" / "__init__.py").touch()
    data = root / "docs" / "data"
    data.mkdir(parents=True)
    for number in range(modules):  # 2 files a module more, ~25 kB each: a few MB in all
        (data / f"table{number:03d}.csv").write_text(f"{number},value\n" * 2500, "utf-8")
        (root / "docs" / f"page{number:03d}.md").write_text(f"# Page {number}\n", "utf-8")
    (root / "pyproject.toml").write_text(
        '[project]\nname = "benchlib"\nversion = "0"\n\n'
        '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n',
        encoding="utf-8",
    )
    (root / ".gitignore").write_text("build/\n__pycache__/\n", encoding="utf-8")
    return Path("lib/pkg00/core/mod000.py")


def unpack(sdist: Path, root: Path) -> Path:
    """A real library from its sdist; returns its first package module for the actor."""
    with tarfile.open(sdist) as archive:
        archive.extractall(root, filter="data")
    (top,) = list(root.iterdir())
    for item in top.iterdir():
        item.rename(root / item.name)
    top.rmdir()
    sources = sorted(
        p for p in root.rglob("*.py") if "test" not in p.as_posix() and p.name != "setup.py"
    )
    return sources[0].relative_to(root)


def make_tree(root: Path, modules: int, sdist: Path | None, untracked: bool) -> Path:
    edited = unpack(sdist, root) if sdist else generate(root, modules)
    bug = root / "tests" / "test_bench_bug.py"  # the task: one failing test among the rest
    bug.parent.mkdir(exist_ok=True)
    bug.write_text("def test_the_bug() -> None:\n    assert 1 + 1 == 3\n", encoding="utf-8")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "the user's library")
    if untracked:
        (root / "notes.txt").write_text("an untracked file of the user's\n", encoding="utf-8")
    (root / "build").mkdir(exist_ok=True)
    (root / "build" / "artifact.bin").write_bytes(os.urandom(1 << 16))  # ignored
    return edited


def files_in(root: Path) -> int:
    out = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True)
    return len(out.stdout.splitlines())


class Phases(Clock):
    """Notes when each phase of each iteration starts."""

    def __init__(self) -> None:
        super().__init__()
        self.marks: list[tuple[str, float]] = []

    def phase(self, iteration: int, name: str) -> None:
        super().phase(iteration, name)
        if iteration > 0:
            self.marks.append((name, time.perf_counter()))

    def split(self) -> dict[str, list[float]]:
        """Seconds in each phase, one entry per iteration."""
        out: dict[str, list[float]] = {name: [] for name in PHASES}
        stamps = [*self.marks, ("end", self.end)]
        for (name, began), (_, ended) in itertools.pairwise(stamps):
            if name in out:
                out[name].append(ended - began)
        return out


def floor(actor: str, root: Path, iterations: int) -> float:
    """Median seconds of the actor's command and the check's with nothing around them."""
    spans = []
    for _ in range(iterations):
        began = time.perf_counter()
        for command in (actor, CHECK):
            subprocess.run(["/bin/sh", "-c", command], cwd=root, capture_output=True)
        spans.append(time.perf_counter() - began)
    subprocess.run(["git", "checkout", "-q", "--", "."], cwd=root)
    return statistics.median(spans)


def overhead_loop(root: Path, edited: Path, iterations: int, sandbox: str) -> dict[str, Any]:
    from ralph.loop import assembly

    actor = ACTOR.format(module=edited.as_posix())
    flags = {
        "actor": f"cmd:{actor}",
        "reflector": "heuristic",
        "checks": [CHECK],
        "max_iterations": iterations,
        "patience": iterations + 1,
        "sandbox": sandbox,
    }
    clock = Phases()
    began = time.perf_counter()
    result = assembly.run_task("bench the loop on a real tree", flags, clock, cwd=root)
    spans = [b - a for a, b in zip(clock.starts, [*clock.starts[1:], clock.end], strict=True)]
    git(root, "switch", "-q", "main")
    return {
        "spans": spans,
        "phases": clock.split(),
        "startup": clock.starts[0] - began,
        "floor": floor(actor, root, min(iterations, 20)),
        "exit": result.exit_code,
    }


def timed(command: list[str], root: Path, env: dict[str, str] | None = None) -> float:
    began = time.perf_counter()
    subprocess.run(command, cwd=root, capture_output=True, env=env)
    return time.perf_counter() - began


def first_agent_call(root: Path, test: str, sandbox: str) -> tuple[float, float]:
    """Seconds from `run_task` to the first prompt with the tests as the check, and one plain
    run of the tests."""
    from ralph.loop import assembly

    plain = timed(["/bin/sh", "-c", test], root)
    flags = {
        "actor": "cmd:true",
        "reflector": "heuristic",
        "checks": [test],
        "max_iterations": 1,
        "sandbox": sandbox,
    }
    clock = Clock()
    began = time.perf_counter()
    assembly.run_task("time to the first agent call", flags, SilentPhases(clock), cwd=root)
    git(root, "switch", "-q", "main")
    return (clock.starts[0] - began if clock.starts else float("nan")), plain


class SilentPhases(SilentReporter):
    """Relays the first prompt to a clock and stays quiet otherwise."""

    def __init__(self, clock: Clock) -> None:
        super().__init__()
        self.clock = clock

    def phase(self, iteration: int, name: str) -> None:
        self.clock.phase(iteration, name)

    def loop_finished(self, result: Any) -> None:
        self.clock.loop_finished(result)


def fresh_clone_check(root: Path, test: str, work: Path) -> tuple[float, float, float]:
    """A fresh clone's first `ralph check`, its second one, and the tests alone there."""
    clone = work / "clone"
    subprocess.run(["git", "clone", "-q", str(root), str(clone)], check=True)
    command = [sys.executable, "-m", "ralph", "check", "--test", test, "--json"]
    env = dict(os.environ)
    first = timed(command, clone, env)
    warm = timed(command, clone, env)
    plain = timed(["/bin/sh", "-c", test], clone)
    shutil.rmtree(clone)
    return first, warm, plain


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modules", type=int, default=100)
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--sandbox", default="none", choices=("none", "bwrap"))
    parser.add_argument("--sdist", type=Path, help="a real library's sdist instead")
    parser.add_argument("--test", default=f"{sys.executable} -m pytest -q -p no:cacheprovider")
    parser.add_argument("--skip-overhead", action="store_true")
    parser.add_argument(
        "--no-untracked", action="store_true", help="no untracked file (a ralph that refuses one)"
    )
    args = parser.parse_args()
    compile_bytecode()
    n = args.iterations
    early, late = (1, min(20, n)), (max(1, n - 19), n)

    before = load()
    with tempfile.TemporaryDirectory(prefix="ralph-bench-tree-") as tmp:
        work = Path(tmp)
        root = work / "repo"
        root.mkdir()
        sdist = args.sdist.resolve() if args.sdist else None
        edited = make_tree(root, args.modules, sdist, not args.no_untracked)
        size = sum(p.stat().st_size for p in root.rglob("*.*") if ".git" not in p.parts)
        print(f"tree: {files_in(root)} tracked files, {size / 1e6:.1f} MB, actor edits {edited}")
        if not args.skip_overhead:
            run = overhead_loop(root, edited, n, args.sandbox)
            report_overhead(run, early, late, args.sandbox)
        first, plain = first_agent_call(root, args.test, args.sandbox)
        print(ratio_line("time to the first agent call / tests alone", [first], [plain]))
        cold, warm, alone = fresh_clone_check(root, args.test, work)
        print(ratio_line("fresh clone: first check / warm check", [cold], [warm], goal=1.2))
        print(ratio_line("warm ralph check / tests alone", [warm], [alone], goal=1.05))
    print(machine(before, load()))


def report_overhead(
    run: dict[str, Any], early: tuple[int, int], late: tuple[int, int], sandbox: str
) -> None:
    spans, floor_s = run["spans"], run["floor"]
    print(f"{len(spans)} iterations, --sandbox {sandbox}, exit {run['exit']}")
    for first, last in dict.fromkeys((early, late)):
        window = spans[first - 1 : last]
        ms = (statistics.median(window) - floor_s) * 1000
        phases = ", ".join(
            f"{name} {median(run['phases'][name][first - 1 : last]) * 1000:.0f}" for name in PHASES
        )
        print(f"  overhead {first:>3}-{last:<3} {ms:6.1f} ms   phases (ms): {phases}")
    print(f"  floor (actor + check, no ralph) {floor_s * 1000:.1f} ms")
    print(f"  start-up until the first prompt {run['startup'] * 1000:.0f} ms")


if __name__ == "__main__":
    main()
