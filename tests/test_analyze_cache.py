"""`ralph analyze`'s facts cache: a cold run (which builds `.aiwg/ralph/index.sqlite`), a warm
one (which reads it) and a run without it print the same JSON, on a generated memory with every
kind of record and file the reader meets; the cold read split over two processes too."""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

import pytest

from ralph.analyze import cache, prefetch
from ralph.analyze.stats import analysis_json, analyze
from ralph.errors import StoreError
from ralph.memory.state import BaselineSummary
from ralph.memory.store import LoopState, MemoryStore
from ralph.records import (
    ActorOutput,
    CreditAssignment,
    Diagnostic,
    EvaluatorOutput,
    IterationRecord,
    MemoryMetadata,
    RalphExtension,
    SelfReflection,
    TraceSummary,
    Usage,
)

from .conftest import RunCli

CAUSES = ["Off by one in the loop.", "off by one  in the loop", "Forgot the empty input"]
linux_only = pytest.mark.skipif(sys.platform != "linux", reason="the split read forks on Linux")
TEXTS = ["I missed the compact form.\nNext: match it first.", "naïve — “quoted” ✓\u2028 tab\there"]


def generated(store: MemoryStore, loops: int, seed: int = 3) -> None:
    """Loops of 1 to 8 records with varied rewards, causes, contexts, usage and traces, plus
    the odd ones: invalid records, a loop without a state, a broken state, a state alone."""
    rnd = random.Random(seed)
    for n in range(loops):
        loop_id = f"ralph-gen-{n:03d}"
        count = rnd.randint(1, 8)
        green = rnd.choice([None, count])
        for i in range(1, count + 1):
            passed = i == green
            usage = rnd.choice([Usage(1000, 100, 200, 20, 0.25), Usage(), Usage(5, 5, None, None)])
            record = IterationRecord(
                loop_id=loop_id,
                iteration=i,
                timestamp=f"2026-03-{1 + n % 28:02d}T10:{i:02d}:00Z",
                task_description=f"task {n % 5}",
                actor_output=ActorOutput(actions=[], rationale="tried"),
                evaluator_output=EvaluatorOutput(
                    passed=passed,
                    verification_type="unit_tests",
                    errors=[Diagnostic("test_failure", f"e{k}") for k in range(rnd.randint(0, 3))],
                    reward_signal=1.0 if passed else rnd.choice([None, rnd.randint(0, 16) / 16]),
                ),
                self_reflection=SelfReflection(
                    reflection_text=rnd.choice(TEXTS),
                    credit_assignment=None
                    if passed
                    else CreditAssignment(
                        root_cause=rnd.choice([*CAUSES, None]),
                        failure_category=rnd.choice(["logic_error", "edge_case_miss", None]),
                    ),
                ),
                memory_metadata=MemoryMetadata(3, 0, list(range(max(1, i - 2), i))),
                ralph=RalphExtension(
                    reflection_source="success" if passed else rnd.choice(["llm", "heuristic"]),
                    quality_flags=rnd.choice([[], ["generic"], ["generic", "no_cause"]]),
                    usage=usage,
                    duration_ms={"actor": rnd.randint(0, 9000), "evaluate": 300},
                    lessons_used=rnd.choice([[], ["ralph-gen-000:1"]]),
                    trace=rnd.choice(
                        [None, TraceSummary(actions={"Edit": 2, "Bash": 1}, ran_checks=True)]
                    ),
                ),
            )
            store.write_record(record)
        if n % 7 == 3:
            continue  # imported: no state file
        state = LoopState(loop_id, f"task {n % 5}", status=rnd.choice(["completed", "failed"]))
        state.iteration = count
        state.baseline = rnd.choice([None, BaselineSummary(reward=0.25, error_count=4)])
        state.created_at = f"2026-03-{1 + n % 28:02d}T09:00:00Z"
        store.write_state(state)
    odd = store.record_path("ralph-gen-004", 1)  # a lone surrogate, as only a hand edit makes
    odd.write_text(odd.read_text(encoding="utf-8").replace("task 4", "task 4 \\ud800"), "utf-8")
    folder = store.reflections_dir("ralph-gen-001")
    (folder / "009.json").write_text("[]", encoding="utf-8")
    (folder / "010.json").write_text("{not json", encoding="utf-8")
    (store.state_path("ralph-gen-002")).write_text('{"status": "lost"}', encoding="utf-8")
    store.write_state(LoopState("ralph-gen-zzz", "never started", status="failed"))


@pytest.fixture
def memory(tmp_path: Path) -> MemoryStore:
    store = MemoryStore(tmp_path)
    store.ensure()
    generated(store, 40)
    return store


def single_threaded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Earlier tests in this worker may leave idle threads (git's diff worker), which would make
    the prefetch decline to fork; the child only reads files, so the test may fork anyway."""
    monkeypatch.setattr(prefetch.threading, "active_count", lambda: 1)


def no_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: object) -> None:
        raise AssertionError("a file was read although it is cached")

    monkeypatch.setattr(cache, "_read_record", fail)
    monkeypatch.setattr(cache, "_read_state", fail)


def run_json(ralph: RunCli, store: MemoryStore) -> str:
    result = ralph("analyze", "--json", cwd=store.root)
    assert result.code == 0, result.err
    return result.out


def test_cold_and_warm_runs_print_the_same_json(
    memory: MemoryStore, ralph: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = memory.base / cache.INDEX_NAME
    monkeypatch.setattr(prefetch, "SPLIT_FROM", 10**9)  # one process: the plain cold read
    plain = analysis_json(analyze(memory, use_index=False))
    assert not index.exists()
    cold = run_json(ralph, memory)
    assert index.exists()
    with monkeypatch.context() as m:
        no_reading(m)
        warm = run_json(ralph, memory)
    assert warm == cold
    assert json.loads(cold) == json.loads(json.dumps(plain))
    out = json.loads(cold)
    assert out["summary"]["invalid_files"] == 3 and out["summary"]["recurring_root_causes"]


@linux_only
def test_a_cold_read_on_two_processes_gives_the_same_json(
    memory: MemoryStore, ralph: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = json.dumps(analysis_json(analyze(memory, use_index=False)))
    forks: list[int] = []
    real_fork = os.fork

    def fork() -> int:
        pid = real_fork()
        forks.append(pid)
        return pid

    read: list[str] = []  # by this process: the child counts in its own copy
    real_read = cache._read_record

    def counted(path: str, loop_id: str, iteration: int) -> object:
        read.append(path)
        return real_read(path, loop_id, iteration)

    monkeypatch.setattr(prefetch, "SPLIT_FROM", 2)
    single_threaded(monkeypatch)
    monkeypatch.setattr(os, "fork", fork)
    monkeypatch.setattr(cache, "_read_record", counted)
    cold = run_json(ralph, memory)
    assert forks, "the cold read did not use a second process"
    total = sum(len(memory.record_paths(loop_id)) for loop_id in memory.loop_ids())
    assert 0 < len(read) < total * 0.7  # the other records came from the child
    with monkeypatch.context() as m:
        no_reading(m)  # the child's rows were written to the cache
        assert run_json(ralph, memory) == cold
    assert json.loads(cold) == json.loads(plain)


@linux_only
def test_a_failing_child_leaves_the_parent_to_read_everything(
    memory: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = analysis_json(analyze(memory, use_index=False))

    def broken(self: cache.FactsReader, loop_ids: list[str]) -> list[tuple[str, str]]:
        raise OSError("disk gone")

    monkeypatch.setattr(prefetch, "SPLIT_FROM", 2)
    single_threaded(monkeypatch)
    monkeypatch.setattr(cache.FactsReader, "_read_rows", broken)
    assert analysis_json(analyze(memory)) == plain


@linux_only
def test_a_read_that_ends_early_stops_the_child(
    memory: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    children: list[prefetch.Prefetch | None] = []
    real = cache.FactsReader.prefetch

    def spy(self: cache.FactsReader, loop_ids: list[str]) -> None:
        real(self, loop_ids)
        children.append(self._prefetch)

    monkeypatch.setattr(prefetch, "SPLIT_FROM", 2)
    single_threaded(monkeypatch)
    monkeypatch.setattr(cache.FactsReader, "prefetch", spy)
    with pytest.raises(StoreError, match="unknown loop"):
        analyze(memory, ["ralph-missing-1", *memory.loop_ids()])
    (child,) = children
    assert child is not None
    with pytest.raises(ChildProcessError):
        os.waitpid(child.pid, os.WNOHANG)  # reaped: no zombie left behind


def test_a_file_replaced_by_one_of_the_same_size_and_time_is_read_again(
    memory: MemoryStore,
) -> None:
    path = memory.record_path("ralph-gen-005", 1)
    assert analyze(memory).loops
    before = path.stat()
    replacement = path.with_name("new.tmp")
    replacement.write_bytes(path.read_bytes().replace(b'"task ', b'"TASK '))
    os.utime(replacement, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.replace(replacement, path)  # the way records are written: another inode
    assert path.stat().st_size == before.st_size
    assert path.stat().st_mtime_ns == before.st_mtime_ns
    reader = cache.FactsReader(memory)
    try:
        assert reader.records("ralph-gen-005").records[0].task == "TASK 0"
    finally:
        reader.close(forget_unseen=False)
