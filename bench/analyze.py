"""Benchmark: `ralph analyze --json` against a script that only `json.loads` every record.

    python bench/analyze.py [--loops 1000] [--iterations 20] [--repeat 5] [--dir DIR]

Generates LOOPS loops of ITERATIONS records each (realistic records: a diff, check results,
diagnostics, a capped output tail, a reflection), then times REPEAT rounds of, as processes:

- floor:    a plain script that lists every `NNN.json` and `json.loads` it, nothing else;
- cold:     `ralph analyze --json` with no cache yet (it builds `.aiwg/ralph/index.sqlite`; on
            Linux with two cores a forked child reads half the records: analyze/prefetch.py);
- warm:     `ralph analyze --json` again (the usual case: only new or changed files are read).

and prints each median as a ratio to the floor's: goals cold <= 1.5, warm <= 1.0.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import compile_bytecode, load, machine, ratio_line

CATEGORIES = ["edge_case_miss", "logic_error", "incorrect_assumption", "incomplete_implementation"]

PLAIN_SCRIPT = """
import json, os, sys
base = os.path.join(sys.argv[1], ".aiwg", "ralph", "reflections")
n = 0
for loop in os.scandir(base):
    for entry in os.scandir(loop.path):
        if entry.name.endswith(".json"):
            with open(entry.path, encoding="utf-8") as handle:
                json.loads(handle.read())
            n += 1
print(n)
"""


def template() -> dict[str, Any]:
    """One schema-valid record as a dict, shaped like the ones `ralph run` writes."""
    from ralph import schemas
    from ralph.records import (
        Action,
        ActorOutput,
        Changes,
        CheckResult,
        CreditAssignment,
        Diagnostic,
        EvaluatorOutput,
        IterationRecord,
        MemoryMetadata,
        Metrics,
        PerformanceDelta,
        RalphExtension,
        SelfReflection,
        TotalChanges,
        Usage,
    )

    diff = "".join(f"-    old line {n}\n+    new line {n} with a change\n" for n in range(12))
    tail = "".join(f"tests/test_mod.py::test_case_{n} FAILED assert 3 == 4\n" for n in range(30))
    record = IterationRecord(
        loop_id="ralph-bench-00000000",
        iteration=1,
        timestamp="2026-01-01T00:00:00Z",
        actor_output=ActorOutput(
            actions=[
                Action(
                    "code_modification",
                    "Changed the parser to handle the compact form",
                    file_path="src/mod/parser.py",
                    changes=Changes(12, 12, diff),
                )
            ],
            rationale="The failing tests feed compact dates, so I added a branch for them.",
            files_modified=["src/mod/parser.py"],
            total_changes=TotalChanges(1, 12, 12),
        ),
        evaluator_output=EvaluatorOutput(
            passed=False,
            verification_type="combined",
            results=[
                CheckResult("pytest", "fail", 1, stdout=tail, duration_ms=1800),
                CheckResult("mypy", "pass", 0, duration_ms=2300),
                CheckResult("ruff", "pass", 0, duration_ms=90),
            ],
            errors=[
                Diagnostic(
                    "test_failure",
                    f"AssertionError: assert {n} == {n + 1}",
                    file="src/mod/parser.py",
                    line=10 + n,
                    severity="error",
                    rule=f"tests/test_mod.py::test_case_{n}",
                )
                for n in range(3)
            ],
            reward_signal=0.5,
            metrics=Metrics(tests_passed=8, tests_failed=3, tests_total=11, type_errors=0),
        ),
        self_reflection=SelfReflection(
            reflection_text="I handled the separated form only; the compact form has no '-' to "
            "split on, so the unpacking fails before a date is built.",
            credit_assignment=CreditAssignment(
                [0], "Handled only the separated form", "logic_error"
            ),
            causal_reasoning="split('-') returns one element for the compact input.",
            actionable_insights=["Match the compact form first", "List every input shape"],
            lessons_learned=["Enumerate the input shapes from the tests first"],
            confidence=0.8,
            related_reflections=[],
        ),
        memory_metadata=MemoryMetadata(3, 1, [], "recency", 1),
        task_description="make the parser tests pass",
        context_injected=True,
        previous_reflections_used=[],
        performance_delta=PerformanceDelta(0.1, -1, True),
        ralph=RalphExtension(
            reflection_source="llm",
            usage=Usage(19000, 1200, 2400, 400, 0.07),
            duration_ms={"actor": 41000, "evaluate": 2300, "reflect": 5800},
            prompt_sha256="0" * 64,
            git_commit="1" * 40,
            error_fingerprint="5f0b2e91c4d7a368",
        ),
    )
    data = record.to_json()
    problems = schemas.errors(schemas.RECORD, data)
    assert not problems, problems
    return data


def generate(root: Path, loops: int, iterations: int, seed: int = 7) -> None:
    """Write the loops directly (no fsync per file: this is test data, not memory)."""
    rnd = random.Random(seed)
    base = template()
    store_dir = root / ".aiwg" / "ralph"
    for n in range(loops):
        loop_id = f"ralph-bench-loop-{n:08x}"
        folder = store_dir / "reflections" / loop_id
        folder.mkdir(parents=True)
        # every loop runs the full ITERATIONS; half of them pass on their last one
        green_at = iterations if rnd.random() < 0.5 else iterations + 1
        reward = rnd.uniform(0.1, 0.5)
        last = iterations
        for i in range(1, last + 1):
            reward = 1.0 if i == green_at else min(0.99, max(0.0, reward + rnd.gauss(0.05, 0.1)))
            data = json.loads(json.dumps(base))
            data["loop_id"] = loop_id
            data["iteration"] = i
            data["timestamp"] = f"2026-01-{1 + n % 28:02d}T00:{i:02d}:00Z"
            data["evaluator_output"]["passed"] = i == green_at
            data["evaluator_output"]["reward_signal"] = round(reward, 4)
            credit = data["self_reflection"]["credit_assignment"]
            credit["failure_category"] = rnd.choice(CATEGORIES)
            # most root causes are one-off sentences; one in ten is a common, recurring one
            common = rnd.random() < 0.1
            credit["root_cause"] = (
                f"Common mistake number {rnd.randint(1, 20)}"
                if common
                else f"Loop {n} iteration {i}: the parser missed input shape {rnd.randint(1, 9)}"
            )
            data["memory_metadata"]["reflections_in_context"] = list(range(max(1, i - 3), i))
            data["memory_metadata"]["current_memory_size"] = min(3, i - 1)
            text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
            (folder / f"{i:03d}.json").write_text(text, encoding="utf-8")
        state = {
            "loop_id": loop_id,
            "task": f"bench task {n}",
            "status": "completed" if green_at <= iterations else "failed",
            "created_at": f"2026-01-{1 + n % 28:02d}T00:00:00Z",
            "updated_at": f"2026-01-{1 + n % 28:02d}T01:00:00Z",
            "iteration": last,
            "baseline": {"passed": False, "reward": 0.2, "error_count": 5},
            "usage": {"tokens_in": 1000, "tokens_out": 100, "cost_usd": 0.1, "wall_seconds": 60},
            "stop_reason": "success" if green_at <= iterations else "max_iterations",
            "schema_version": "1.0",
        }
        loop_dir = store_dir / "loops" / loop_id
        loop_dir.mkdir(parents=True)
        (loop_dir / "state.json").write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")


def timed(command: list[str], cwd: Path) -> tuple[float, bytes]:
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{done.stderr.decode(errors='replace')}")
    return elapsed, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", type=int, default=1000)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dir", type=Path, help="keep the generated project here")
    args = parser.parse_args()
    compile_bytecode()

    root = args.dir or Path(tempfile.mkdtemp(prefix="ralph-bench-analyze-"))
    try:
        if not (root / ".aiwg").exists():
            start = time.perf_counter()
            generate(root, args.loops, args.iterations)
            print(f"generated {args.loops} loops in {time.perf_counter() - start:.1f}s at {root}")
        index = root / ".aiwg" / "ralph" / "index.sqlite"
        plain = [sys.executable, "-c", PLAIN_SCRIPT, str(root)]
        ours = [sys.executable, "-m", "ralph", "analyze", "--json"]
        timed(ours, root)  # bytecode of everything analyze imports
        before = load()
        baseline, cold, warm = [], [], []
        out = b"{}"
        for _ in range(args.repeat):
            baseline.append(timed(plain, root)[0])
            for name in ("index.sqlite", "index.sqlite-journal", "index.sqlite-wal"):
                (index.parent / name).unlink(missing_ok=True)
            cold.append(timed(ours, root)[0])
            elapsed, out = timed(ours, root)
            warm.append(elapsed)
        summary = json.loads(out)["summary"]
        print(f"records: {summary['iterations']}, loops: {summary['loops']}, {args.repeat} rounds")
        print(machine(before, load()))
        print(ratio_line("floor: plain json.loads of every record", baseline, baseline))
        print(ratio_line("analyze --json, cold (builds its cache)", cold, baseline, goal=1.5))
        print(ratio_line("analyze --json, warm (cache up to date)", warm, baseline, goal=1.0))
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    os.environ.pop("RALPH_DEBUG", None)
    main()
