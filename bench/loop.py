"""Benchmark: ralph's own cost per iteration, on top of the actor and the checks, up to 200.

    python bench/loop.py [--iterations 200] [--repeat 3] [--no-git]

Runs the real loop in-process (`runner.run_task`, as `ralph run` does) in a fresh git repository
with a no-op actor (`cmd:true`) and one fast check that always fails (`test -f never-there`),
so every iteration runs to the limit; the heuristic reflector writes each reflection (ralph's
own code, so its time counts). The floor is the same two commands run by a plain Python loop
with no ralph around it. Per iteration:

- ralph:    from one iteration's prompt to the next (the last: to the loop's end);
- floor:    `sh -c true` then `sh -c 'test -f never-there'` through `subprocess.run`;
- overhead: ralph - floor: prompt rendering, the Ω window, lessons, the diff, the reflection,
            record validation and atomic write, the git commit, the state, the stop decision.

Printed for iterations 2-20 and 181-200 (the last 20), as medians over REPEAT loops: the ratio
to the floor and the overhead (goal < 50 ms at 181-200, and flat: late / early about 1), and the
size of the record at iterations 2, 20 and the last (goal: flat from 20, where the at most 10
related reflections a record names are all there: bounded by omega, not by the iteration) and
of state.json. The loop runs with `--sandbox none`: bubblewrap's start per process is
measured by bench/sandbox.py. Start-up (imports, config, preflight, branch, baseline) is paid
once per loop and reported on its own.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: see common.py

from common import compile_bytecode, load, machine, median, ratio_line

from ralph.cli.live import SilentReporter

ACTOR, CHECK = "true", "test -f never-there"


def make_repo(root: Path) -> None:
    (root / "app.py").write_text("VALUE = 1\n", encoding="utf-8")
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "bench",
        "GIT_AUTHOR_EMAIL": "bench@example.invalid",
        "GIT_COMMITTER_NAME": "bench",
        "GIT_COMMITTER_EMAIL": "bench@example.invalid",
    }
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "start"]):
        subprocess.run(["git", *args], cwd=root, env=env, check=True)


class Clock(SilentReporter):
    """Notes when each iteration starts and when the loop ends."""

    def __init__(self) -> None:
        super().__init__()
        self.starts: list[float] = []
        self.end = 0.0

    def phase(self, iteration: int, name: str) -> None:
        if name == "prompt":
            self.starts.append(time.perf_counter())

    def loop_finished(self, result: Any) -> None:
        self.end = time.perf_counter()


def floor(iterations: int, root: Path) -> list[float]:
    """Seconds per iteration of the actor and the check with nothing around them."""
    spans = []
    for _ in range(iterations):
        began = time.perf_counter()
        subprocess.run(["/bin/sh", "-c", ACTOR], cwd=root, capture_output=True, check=False)
        subprocess.run(["/bin/sh", "-c", CHECK], cwd=root, capture_output=True, check=False)
        spans.append(time.perf_counter() - began)
    return spans


def one_loop(iterations: int, no_git: bool) -> dict[str, Any]:
    from ralph.loop import assembly as runner

    with tempfile.TemporaryDirectory(prefix="ralph-bench-loop-") as tmp:
        root = Path(tmp)
        make_repo(root)
        flags = {
            "actor": f"cmd:{ACTOR}",
            "reflector": "heuristic",
            "checks": [CHECK],
            "max_iterations": iterations,
            "patience": iterations + 1,
            "no_git": no_git or None,
            "sandbox": "none",  # ralph's own cost; bench/sandbox.py measures bubblewrap's
        }
        clock = Clock()
        began = time.perf_counter()
        result = runner.run_task("bench the loop", flags, clock, cwd=root)
        records = sorted((root / ".aiwg/ralph/reflections" / result.loop_id).glob("*.json"))
        sizes = [p.stat().st_size for p in records]
        state = state_size(root / ".aiwg/ralph/loops" / result.loop_id / "state.json")
        plain = floor(iterations, root)
    spans = [b - a for a, b in zip(clock.starts, [*clock.starts[1:], clock.end], strict=True)]
    return {
        "spans": spans,
        "floor": plain,
        "sizes": sizes,
        "state": state,
        "startup": clock.starts[0] - began,
        "exit": result.exit_code,
    }


def state_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def window(values: list[float], first: int, last: int) -> list[float]:
    """Iterations first..last (1-based, inclusive)."""
    return values[first - 1 : last]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-git", action="store_true", help="measure without commits")
    args = parser.parse_args()
    compile_bytecode()
    n = args.iterations
    late = (max(2, n - 19), n)
    early = (2, min(20, n))

    before = load()
    runs = [one_loop(n, args.no_git) for _ in range(args.repeat)]
    after = load()

    def per_run(key: str, span: tuple[int, int]) -> list[float]:
        return [statistics.median(window(run[key], *span)) for run in runs]

    def overhead(span: tuple[int, int]) -> list[float]:
        return [
            statistics.median(window(run["spans"], *span)) - statistics.median(run["floor"])
            for run in runs
        ]

    mode = "no git" if args.no_git else "git commits"
    print(f"{n} iterations ({mode}), {args.repeat} loops, exit {runs[0]['exit']}")
    print(machine(before, after))
    floor_all = [statistics.median(run["floor"]) for run in runs]
    for span in (early, late):
        label = f"iteration time {span[0]}-{span[1]} / no-ralph loop"
        print(ratio_line(label, per_run("spans", span), floor_all, unit="ms", scale=1000))
    for span in (early, late):
        ms = median([o * 1000 for o in overhead(span)])
        goal = f"   goal < 50 ms: {'met' if ms < 50 else 'NOT met'}" if span == late else ""
        print(f"  overhead {span[0]:>3}-{span[1]:<3} {ms:6.1f} ms{goal}")
    print(
        ratio_line(
            f"overhead {late[0]}-{late[1]} / overhead {early[0]}-{early[1]} (flat: ~1)",
            overhead(late),
            overhead(early),
            goal=1.2,
            unit="ms",
            scale=1000,
        )
    )
    full = min(20, n)  # by then the 10 related reflections a record may name are there
    print(
        ratio_line(
            f"record size at iteration {n} / at iteration {full}",
            [float(run["sizes"][-1]) for run in runs],
            [float(run["sizes"][full - 1]) for run in runs],
            goal=1.02,
            unit="B",
        )
    )
    sizes = [median([float(run["sizes"][i - 1]) for run in runs]) for i in (2, full, n)]
    print(f"  record size at iterations 2, {full}, {n}: {', '.join(f'{x:.0f} B' for x in sizes)}")
    print(f"  state.json at iteration {n}: {median([r['state'] for r in runs]):.0f} B")
    startup = median([r["startup"] for r in runs]) * 1000
    print(f"start-up until the first prompt (config, preflight, branch, baseline) {startup:.0f} ms")


if __name__ == "__main__":
    main()
