"""Benchmark: `ralph reflections search` and per-iteration lesson retrieval on a large memory.

    python bench/memory.py [--loops 5000] [--iterations 10] [--queries 30] [--dir DIR]

Generates LOOPS loops of ITERATIONS records each (50,000 by default; varied reflections, error
messages, files, tests and lint rules; some records name the lessons they were given), then,
in this process:

- cold:    builds `.aiwg/ralph/search.sqlite` from the JSON files (once, the first search);
- search:  opens the index, checks it is fresh, runs one query (as `ralph reflections search`
           does, minus interpreter start-up); targets: under 200 ms;
- lessons: `retrieve_lessons` for a failure copied from a random record, after the current loop
           wrote a new record (what every iteration of `ralph run` does); target: under 100 ms.

Prints median, 95th percentile and maximum of each, and each as a ratio to its floor measured in
the same run: for the cold build, a plain `json.loads` of every record; for a search or a
retrieval, the bare SQLite FTS5 query over the same index (open, one MATCH ranked by bm25,
close) with no ralph around it. Targets are reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: see common.py

from common import load, machine, ratio_line

CATEGORIES = ["edge_case_miss", "logic_error", "incorrect_assumption", "incomplete_implementation"]
SYLLABLES = ["ka", "lo", "mi", "ne", "po", "ru", "sa", "ti", "vu", "ze", "do", "fa", "gi", "hu"]
COMMON = ["the", "test", "failed", "because", "value", "was", "not", "handled", "when", "input"]


def vocabulary(rnd: random.Random, n: int) -> list[str]:
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rnd.choice(SYLLABLES) for _ in range(rnd.randint(2, 4))))
    return sorted(words)


def sentence(rnd: random.Random, vocab: list[str], n: int) -> str:
    words = [rnd.choice(vocab) if rnd.random() < 0.6 else rnd.choice(COMMON) for _ in range(n)]
    return " ".join(words).capitalize() + "."


def record(rnd: random.Random, vocab: list[str], pools: dict[str, list[str]], **at: Any) -> dict:
    """One schema-valid record as a dict, shaped like the ones `ralph run` writes."""
    loop_id, iteration, passed = at["loop_id"], at["iteration"], at["passed"]
    errors: list[dict[str, Any]] = []
    if not passed:
        for _ in range(rnd.randint(1, 5)):
            kind = rnd.choice(["test_failure", "type_error", "lint_error"])
            error: dict[str, Any] = {
                "type": kind,
                "message": sentence(rnd, vocab, rnd.randint(4, 12)),
                "file": rnd.choice(pools["files"]),
                "line": rnd.randint(1, 400),
                "severity": "error",
            }
            error["rule"] = rnd.choice(pools["tests" if kind == "test_failure" else "rules"])
            errors.append(error)
    lessons = rnd.sample(pools["lessons"], rnd.randint(0, 2))
    used = at.get("used") or []
    return {
        "loop_id": loop_id,
        "iteration": iteration,
        "timestamp": at["timestamp"],
        "task_description": sentence(rnd, vocab, 6),
        "actor_output": {"actions": [], "rationale": sentence(rnd, vocab, 10)},
        "evaluator_output": {
            "passed": passed,
            "verification_type": "combined",
            "errors": errors,
            "reward_signal": 1.0 if passed else round(rnd.uniform(0, 0.9), 3),
        },
        "self_reflection": {
            "reflection_text": " ".join(sentence(rnd, vocab, 12) for _ in range(3)),
            "credit_assignment": {
                "failing_action_indices": [],
                "root_cause": sentence(rnd, vocab, 10),
                "failure_category": rnd.choice(CATEGORIES),
            },
            "causal_reasoning": sentence(rnd, vocab, 15),
            "actionable_insights": [sentence(rnd, vocab, 8) for _ in range(2)],
            "lessons_learned": lessons,
            "confidence": round(rnd.uniform(0.3, 1.0), 2),
        },
        "memory_metadata": {"omega_capacity": 3, "current_memory_size": 0},
        "performance_delta": {"is_improvement": rnd.random() < 0.5},
        "ralph": {
            "schema_version": "1.0",
            "reflection_source": "success" if passed else "llm",
            "lessons_used": used,
            "error_fingerprint": f"{rnd.getrandbits(64):016x}",
        },
    }


def generate(root: Path, loops: int, iterations: int, seed: int = 11) -> None:
    """Write the records directly (no fsync per file: this is test data, not memory)."""
    rnd = random.Random(seed)
    vocab = vocabulary(rnd, 3000)
    pools = {
        "files": [f"src/{rnd.choice(vocab)}/{rnd.choice(vocab)}.py" for _ in range(400)],
        "tests": [
            f"tests/test_{rnd.choice(vocab)}.py::test_{rnd.choice(vocab)}" for _ in range(3000)
        ],
        "rules": [f"{rnd.choice('EFBW')}{rnd.randint(100, 999)}" for _ in range(60)]
        + ["arg-type", "attr-defined", "return-value", "union-attr"],
        "lessons": [sentence(rnd, vocab, rnd.randint(6, 14)) for _ in range(800)],
    }
    reflections = root / ".aiwg" / "ralph" / "reflections"
    for n in range(loops):
        loop_id = f"ralph-bench-{n:08x}"
        folder = reflections / loop_id
        folder.mkdir(parents=True)
        for i in range(1, iterations + 1):
            used = []
            if n and rnd.random() < 0.3:
                source = f"ralph-bench-{rnd.randrange(n):08x}"
                used = [f"{source}#{rnd.randint(1, iterations)}.0"]
            data = record(
                rnd, vocab, pools, loop_id=loop_id, iteration=i, passed=i == iterations,
                timestamp=f"2026-{1 + n % 12:02d}-{1 + n % 28:02d}T00:{i % 60:02d}:00Z", used=used,
            )  # fmt: skip
            (folder / f"{i:03d}.json").write_text(json.dumps(data, indent=2) + "\n", "utf-8")
    (root / ".aiwg" / "ralph" / "loops").mkdir(parents=True, exist_ok=True)


def timings(
    fn: Callable[[int], Any], n: int, setup: Callable[[int], Any] | None = None
) -> list[float]:
    out = []
    for k in range(n):
        if setup is not None:
            setup(k)
        start = time.perf_counter()
        fn(k)
        out.append((time.perf_counter() - start) * 1000)
    return out


def report(name: str, ms: list[float], target: float) -> None:
    ms = sorted(ms)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    verdict = "met" if p95 < target else "NOT met"
    print(
        f"{name:<34} median {statistics.median(ms):7.1f} ms   p95 {p95:7.1f} ms   "
        f"max {ms[-1]:7.1f} ms   (target < {target:.0f} ms at p95: {verdict})"
    )


def plain_read(root: Path) -> float:
    """Seconds to `json.loads` every record: the floor of a first index build."""
    start = time.perf_counter()
    for loop in os.scandir(root / ".aiwg" / "ralph" / "reflections"):
        for entry in os.scandir(loop.path):
            with open(entry.path, encoding="utf-8") as handle:
                json.loads(handle.read())
    return time.perf_counter() - start


def bare_query(path: Path, table: str, words: list[str]) -> None:
    """What a search is without ralph: open the index, one bm25-ranked MATCH, close."""
    db = sqlite3.connect(path)
    try:
        match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
        db.execute(
            f"SELECT rowid FROM {table} WHERE {table} MATCH ? ORDER BY bm25({table}) LIMIT 10",
            (match,),
        ).fetchall()
    finally:
        db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--loops", type=int, default=5000)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--dir", type=Path, help="keep the generated project here")
    args = parser.parse_args()

    from ralph.memory.retrieval import retrieve_lessons
    from ralph.memory.search import INDEX_NAME, SearchIndex
    from ralph.memory.store import MemoryStore
    from ralph.records import Diagnostic

    root = args.dir or Path(tempfile.mkdtemp(prefix="ralph-bench-memory-"))
    try:
        store = MemoryStore(root)
        if not store.base.exists():
            start = time.perf_counter()
            generate(root, args.loops, args.iterations)
            total = args.loops * args.iterations
            print(f"generated {total} records in {time.perf_counter() - start:.1f}s at {root}")
        shutil.rmtree(store.base / "reflections" / "ralph-bench-current-loop", ignore_errors=True)
        for suffix in ("", "-wal", "-shm"):
            (store.base / (INDEX_NAME + suffix)).unlink(missing_ok=True)
        before = load()
        floor_build = plain_read(root)
        start = time.perf_counter()
        with SearchIndex(store) as index:
            index.sync()
            count = index.db.execute("SELECT COUNT(*) FROM docs WHERE valid = 1").fetchone()[0]
        build = time.perf_counter() - start
        print(f"cold index build over {count} records:")
        print(ratio_line("  index build / plain json.loads", [build], [floor_build]))

        rnd = random.Random(3)
        folders = sorted(p for p in (store.base / "reflections").iterdir())
        samples = []
        for folder in rnd.sample(folders, args.queries):
            data = json.loads((folder / "001.json").read_text("utf-8"))
            samples.append(data)
        queries = [" ".join(s["self_reflection"]["reflection_text"].split()[:3]) for s in samples]
        queries[:3] = ["test failed", "value was not handled", "input"]  # common: many matches
        index_path = store.base / INDEX_NAME

        def search(k: int) -> None:
            with SearchIndex(store) as index:
                index.search(queries[k], limit=10)

        def bare_search(k: int) -> None:
            bare_query(index_path, "fts", queries[k].split())

        ours = timings(search, len(queries))
        floor = timings(bare_search, len(queries))
        report("search (open, sync, query)", ours, 200)
        print(ratio_line("  search / bare FTS5 query", ours, floor, unit="ms"))
        common = timings(lambda k: search(k % 3), 9)
        report("  of which very common words", common, 200)

        current = "ralph-bench-current-loop"
        shutil.rmtree(store.base / "reflections" / current, ignore_errors=True)
        (store.base / "reflections" / current).mkdir()

        def iteration_written(k: int) -> None:
            # the running loop has just written its record: its folder changed
            data = dict(samples[k], loop_id=current, iteration=k + 1)
            path = store.base / "reflections" / current / f"{k + 1:03d}.json"
            path.write_text(json.dumps(data), "utf-8")

        def diagnostics(k: int) -> list[Diagnostic]:
            return [
                Diagnostic(e["type"], e["message"], e.get("file"), rule=e.get("rule"))
                for e in samples[k]["evaluator_output"]["errors"]
            ]

        def lessons(k: int) -> None:
            found = retrieve_lessons(
                store,
                exclude_loop=current,
                current_errors=diagnostics(k),
                fingerprint=samples[k]["ralph"]["error_fingerprint"],
            )
            hits.append(len(found))

        def bare_lessons(k: int) -> None:
            words = [w for d in diagnostics(k) for w in d.message.split()[:4]]
            bare_query(index_path, "fts", words or ["test"])

        hits: list[int] = []
        per_iteration = timings(lessons, len(samples), iteration_written)
        floor = timings(bare_lessons, len(samples))
        report("lesson retrieval per iteration", per_iteration, 100)
        print(ratio_line("  retrieval / bare FTS5 query", per_iteration, floor, unit="ms"))
        print(f"lessons found per retrieval: {hits}")
        print(machine(before, load()))
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    os.environ.pop("RALPH_DEBUG", None)
    main()
