"""What an iteration costs must not grow with the iteration number (benchmarks: bench/loop.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ralph.loop import guard as guard_module
from ralph.loop.guard import MemoryGuard
from ralph.memory.store import LoopState, MemoryStore
from ralph.records import (
    ActorOutput,
    EvaluatorOutput,
    IterationRecord,
    MemoryMetadata,
    RalphExtension,
    SelfReflection,
)

LOOP = "ralph-costs-1"


def record(iteration: int) -> IterationRecord:
    return IterationRecord(
        loop_id=LOOP,
        iteration=iteration,
        timestamp="2026-01-01T00:00:00Z",
        actor_output=ActorOutput(actions=[], rationale="nothing"),
        evaluator_output=EvaluatorOutput(passed=False, verification_type="combined"),
        self_reflection=SelfReflection(reflection_text=f"I failed in iteration {iteration}."),
        memory_metadata=MemoryMetadata(omega_capacity=3, current_memory_size=0),
        ralph=RalphExtension(error_fingerprint="fp"),
    )


def test_a_resumed_loop_reads_its_intact_records_once_not_every_iteration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first_run = MemoryStore(tmp_path)
    records = [record(i) for i in range(1, 6)]
    for r in records:
        first_run.write_record(r)
    state = LoopState(loop_id=LOOP, task="t", iteration=5)
    first_run.write_state(state)
    # A resumed run: its store wrote none of these files, so it must look at them once.
    guard = MemoryGuard(MemoryStore(tmp_path))
    reads: list[str] = []
    real = guard_module.read_json_bounded

    def counting(path: Path, *args: Any, **kwargs: Any) -> Any:
        reads.append(Path(path).name)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(guard_module, "read_json_bounded", counting)
    guard.restore(records)
    assert sorted(reads) == [f"00{i}.json" for i in range(1, 6)]
    reads.clear()
    for _ in range(3):  # the following iterations: a stat each, no read
        guard.restore(records)
    assert reads == []
    (tmp_path / ".aiwg/ralph/reflections" / LOOP / "003.json").write_text("{}")
    assert guard.restore(records) == ["003.json"]  # an actor's edit is still seen and undone
    assert reads == ["003.json"]
    assert MemoryStore(tmp_path).read_record(LOOP, 3).to_json() == records[2].to_json()
