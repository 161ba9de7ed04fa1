"""Benchmark: ralph's own cost per iteration, on top of the actor and the checks.

    python bench/loop.py [--iterations 20] [--no-git]

Runs the real loop in-process (`runner.run_task`, as `ralph run` does) in a fresh git repository
with a no-op actor (`cmd:true`) and a trivial check that always fails (`test -f never-there`), so
every iteration runs to the limit. The heuristic reflector writes each reflection (it is ralph's
own code, so its time counts as overhead). From the records' `duration_ms` and the loop's wall
time it reports, per iteration:

- actor:    the actor process (fork/exec of `sh -c true`), as the record says;
- checks:   the evaluator run (one `sh -c test ...`), as the record says;
- overhead: wall time per iteration minus actor and checks: prompt rendering, Ω selection, diff,
            reflection, record validation and atomic write, the git commit, state updates.

Target: overhead under 50 ms per iteration. Python start-up and the baseline evaluation are paid
once per loop and are left out (they are reported separately).
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--no-git", action="store_true", help="measure without commits")
    args = parser.parse_args()

    from ralph import runner
    from ralph.ui import SilentReporter

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
        clock = time.perf_counter()
        result = runner.run_task("bench the loop", flags, SilentReporter(), cwd=root)
        wall_ms = (time.perf_counter() - clock) * 1000
        records = sorted((root / ".aiwg/ralph/reflections" / result.loop_id).glob("*.json"))
        phases = [json.loads(p.read_text("utf-8"))["ralph"]["duration_ms"] for p in records]
        state = json.loads(
            (root / ".aiwg/ralph/loops" / result.loop_id / "state.json").read_text("utf-8")
        )

    n = len(records)
    actor = [p.get("actor", 0) for p in phases]
    checks = [p.get("evaluate", 0) for p in phases]
    baseline_ms = statistics.median(checks)  # the baseline runs the same single check
    loop_ms = wall_ms - baseline_ms
    overhead = loop_ms / n - statistics.mean(actor) - statistics.mean(checks)
    mode = "no git" if args.no_git else "git commits"
    print(f"iterations: {n} ({mode}), exit {result.exit_code}")
    print(f"loop wall:  {wall_ms:8.1f} ms (incl. baseline ~{baseline_ms:.0f} ms)")
    print(f"per iteration: {loop_ms / n:6.1f} ms")
    print(f"  actor    {statistics.mean(actor):6.1f} ms (median {statistics.median(actor)})")
    print(f"  checks   {statistics.mean(checks):6.1f} ms (median {statistics.median(checks)})")
    print(f"  overhead {overhead:6.1f} ms   target < 50 ms: {'ok' if overhead < 50 else 'MISSED'}")
    print(f"state iterations: {state['iteration']}, status {state['status']}")


if __name__ == "__main__":
    main()
