"""Benchmark: what the sandbox costs per iteration (`--sandbox bwrap` against `--sandbox none`).

    python bench/sandbox.py [--iterations 20] [--repeat 3] [--starts 20]

The same loop as bench/loop.py (a no-op `cmd:true` actor, one fast failing check, the heuristic
reflector, git commits), run with `--sandbox none` and with `--sandbox bwrap`, alternating so a
change of the machine's load touches both alike. Per iteration (from one prompt to the next,
iterations 2..N): the medians of each mode and their difference, which is bubblewrap's start
for the actor and for the check (mount namespace, binds, a private TMPDIR made and removed).
`--starts N` first times N starts of `true` through `process.run`, the median of each: plain,
contained (an actor's run without a sandbox: the search for what it left), sandboxed (a
check's), and sandboxed with a copy of an agent's configuration (an agent's).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: see common.py

from common import compile_bytecode, load, machine, median, ratio_line
from loop import ACTOR, CHECK, Clock, make_repo


def one_loop(iterations: int, mode: str) -> list[float]:
    """Seconds per iteration, iterations 2..N, of one loop in `mode`."""
    from ralph.loop import assembly as runner

    with tempfile.TemporaryDirectory(prefix="ralph-bench-sandbox-") as tmp:
        root = Path(tmp)
        make_repo(root)
        flags: dict[str, Any] = {
            "actor": f"cmd:{ACTOR}",
            "reflector": "heuristic",
            "checks": [CHECK],
            "max_iterations": iterations,
            "patience": iterations + 1,
            "sandbox": mode,
        }
        clock = Clock()
        runner.run_task("bench the sandbox", flags, clock, cwd=root)
    spans = [b - a for a, b in zip(clock.starts, [*clock.starts[1:], clock.end], strict=True)]
    return spans[1:]


def starts(count: int) -> None:
    """The median start of `true` through process.run, each way (a small configuration)."""
    from ralph import process
    from ralph.sandbox import Sandbox, find

    with tempfile.TemporaryDirectory(prefix="ralph-bench-starts-") as tmp:
        tree, config = Path(tmp, "tree"), Path(tmp, "config")
        tree.mkdir()
        (config / "agents").mkdir(parents=True)
        for name in ("settings.json", ".credentials.json", "agents/a.md"):
            (config / name).write_text("{}")
        bwrap = str(find().path)
        ways: dict[str, dict[str, Any]] = {
            "plain": {},
            "contained": {"contain": True},
            "sandboxed": {"sandbox": Sandbox(bwrap, tree)},
            "sandboxed + configuration copy": {"sandbox": Sandbox(bwrap, tree, copied=(config,))},
        }
        for name, options in ways.items():
            times = []
            for _ in range(count):
                began = time.perf_counter()
                process.run(["true"], cwd=tree, **options)
                times.append(time.perf_counter() - began)
            print(f"  start of `true`, {name}: {statistics.median(times) * 1000:.1f} ms")


def main() -> None:
    from ralph.sandbox import find

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--starts", type=int, default=20)
    args = parser.parse_args()
    found = find()
    if not found.works:
        sys.exit(f"bubblewrap cannot run here: {found.reason} ({found.fix})")
    compile_bytecode()
    if args.starts:
        starts(args.starts)
    before = load()
    plain: list[float] = []
    boxed: list[float] = []
    for _ in range(args.repeat):
        plain.append(statistics.median(one_loop(args.iterations, "none")))
        boxed.append(statistics.median(one_loop(args.iterations, "bwrap")))
        time.sleep(0.1)
    after = load()
    print(f"{args.iterations} iterations x {args.repeat} loops per mode; {found.line()}")
    print(machine(before, after))
    print(ratio_line("iteration time, bwrap / none", boxed, plain, unit="ms", scale=1000))
    extra = median([b - p for b, p in zip(boxed, plain, strict=True)]) * 1000
    print(f"  sandbox overhead per iteration (actor + 1 check): {extra:.1f} ms")


if __name__ == "__main__":
    main()
