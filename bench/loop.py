"""Benchmark: ralph's own cost per iteration, on top of the actor and the checks.

    python bench/loop.py [--iterations 20] [--no-git]

Runs the real loop in-process (`runner.run_task`, as `ralph run` does) in a fresh git repository
with a no-op actor (`cmd:true`) and a trivial check that always fails (`test -f never-there`), so
every iteration runs to the limit. The heuristic reflector writes each reflection (it is ralph's
own code, so its time counts as overhead). From the records' `duration_ms` and the loop's wall
time it reports, per iteration:

- actor:    the actor process (fork/exec of `sh -c true`), as the record says;
- checks:   the evaluator run (one `sh -c test ...`), as the record says;
- overhead: the time from one iteration's start to the next minus actor and checks: prompt
            rendering, Ω selection, lessons, the diff, reflection, record validation and atomic
            write, the git commit, state updates, the stop decision.

Target: overhead under 50 ms per iteration. Start-up (imports, config, preflight, the loop
branch, the baseline evaluation) is paid once per loop and reported on its own.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ralph.ui import SilentReporter


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--no-git", action="store_true", help="measure without commits")
    args = parser.parse_args()

    from ralph import runner

    with tempfile.TemporaryDirectory(prefix="ralph-bench-loop-") as tmp:
        root = Path(tmp)
        make_repo(root)
        flags = {
            "actor": "cmd:true",
            "reflector": "heuristic",
            "checks": ["test -f never-there"],
            "max_iterations": args.iterations,
            "patience": args.iterations + 1,
            "no_git": args.no_git or None,
        }
        clock = Clock()
        began = time.perf_counter()
        result = runner.run_task("bench the loop", flags, clock, cwd=root)
        records = sorted((root / ".aiwg/ralph/reflections" / result.loop_id).glob("*.json"))
        phases = [json.loads(p.read_text("utf-8"))["ralph"]["duration_ms"] for p in records]

    n = len(records)
    spans = [
        (b - a) * 1000 for a, b in zip(clock.starts, [*clock.starts[1:], clock.end], strict=True)
    ]
    actor = [p.get("actor", 0) for p in phases]
    checks = [p.get("evaluate", 0) for p in phases]
    overhead = [span - a - c for span, a, c in zip(spans, actor, checks, strict=True)]
    mode = "no git" if args.no_git else "git commits"
    print(f"iterations: {n} ({mode}), exit {result.exit_code}")
    print(
        f"start-up until the first prompt (config, preflight, branch, baseline): "
        f"{(clock.starts[0] - began) * 1000:.0f} ms, once per loop"
    )
    print(f"per iteration (median): {statistics.median(spans):6.1f} ms")
    print(f"  actor    {statistics.median(actor):6.1f} ms")
    print(f"  checks   {statistics.median(checks):6.1f} ms")
    med = statistics.median(overhead)
    print(
        f"  overhead {med:6.1f} ms (mean {statistics.mean(overhead):.1f}, "
        f"max {max(overhead):.1f})   target < 50 ms: {'ok' if med < 50 else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
