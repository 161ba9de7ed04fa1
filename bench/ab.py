"""Benchmark: one ralph command in two or more checkouts, their runs interleaved.

    python bench/ab.py --dir PROJECT [--rounds 12] CHECKOUT CHECKOUT... -- ARGS...

Times `python -m ralph ARGS` in PROJECT with each CHECKOUT first on PYTHONPATH, round after
round, alternating the order, so a load that changes during the runs weighs on every checkout
alike (on a shared machine a figure taken before another is not comparable with it). Prints
each checkout's median, its ratio to the first's, and the median of its per-round ratios to
the first (runs of one round are next to each other in time: a load that drifts over the
rounds moves that figure least), with their quartiles. This is how a speed device is weighed:
a checkout without it against one with it, on bench/evaluator.py's project (`--dir` kept) for
`check --json`, on bench/analyze.py's for `analyze --json` (with `--fresh .aiwg/ralph/index.sqlite`
for a cold read).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import load, machine, median


def once(project: Path, checkout: str, args: list[str], fresh: list[str]) -> float:
    for name in fresh:
        for path in project.glob(name + "*"):
            path.unlink()
    env = {**os.environ, "PYTHONPATH": checkout}
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "ralph", *args], cwd=project, env=env, capture_output=True
    )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, required=True, help="the project to run in")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--fresh", action="append", default=[], help="removed before each run")
    parser.add_argument("checkouts", nargs="+")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    options, args = parser.parse_args(argv[:cut]), argv[cut + 1 :]
    checkouts: list[str] = options.checkouts
    for checkout in checkouts:  # bytecode and caches, untimed
        once(options.dir, checkout, args, options.fresh)
    times: dict[str, list[float]] = {c: [] for c in checkouts}
    before = load()
    for n in range(options.rounds):
        for checkout in checkouts if n % 2 == 0 else checkouts[::-1]:
            times[checkout].append(once(options.dir, checkout, args, options.fresh))
    print(machine(before, load()))
    first = median(times[checkouts[0]])
    for checkout in checkouts:
        ours = median(times[checkout])
        paired = [o / f for o, f in zip(times[checkout], times[checkouts[0]], strict=True)]
        low, _, high = statistics.quantiles(paired, n=4) if len(paired) > 1 else (1.0, 1.0, 1.0)
        print(
            f"{checkout:<40} median {ours:.3f} s  ratio to the first {ours / first:.3f}"
            f"  per round {median(paired):.3f} (quartiles {low:.3f}-{high:.3f})"
        )


if __name__ == "__main__":
    main()
