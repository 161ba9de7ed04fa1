"""`ralph analyze`: every figure checked exactly against loops with known reward sequences.

Rewards are binary fractions (0.25, 0.5, ...) so the expected figures are exact floats.
"""

from __future__ import annotations

import csv
import io
import json
import socket
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ralph.analyze import cache as index_module
from ralph.analyze.report import write_csv, write_html
from ralph.analyze.stats import Analysis, analysis_json, analyze, normalise_root_cause
from ralph.cli.analyze_view import headline, render
from ralph.errors import RalphError, StoreError
from ralph.ids import short_id
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
    Usage,
)

from .conftest import EXAMPLE_LOOP, RunCli


# builders -----------------------------------------------------------------------------------
def record(
    loop_id: str,
    iteration: int,
    reward: float | None,
    *,
    passed: bool = False,
    category: str | None = "logic_error",
    root_cause: str | None = None,
    in_context: list[int] | None = None,
    source: str = "llm",
    flags: list[str] | None = None,
    errors: int = 0,
    cost: float | None = 0.25,
    reflection: str | None = None,
    task: str = "make it work",
) -> IterationRecord:
    return IterationRecord(
        loop_id=loop_id,
        iteration=iteration,
        timestamp=f"2026-03-01T10:{iteration:02d}:00Z",
        task_description=task,
        actor_output=ActorOutput(actions=[], rationale="tried"),
        evaluator_output=EvaluatorOutput(
            passed=passed,
            verification_type="unit_tests",
            errors=[Diagnostic("test_failure", f"e{n}") for n in range(errors)],
            reward_signal=reward,
        ),
        self_reflection=SelfReflection(
            reflection_text=reflection or f"reflection {iteration}\nsecond line",
            credit_assignment=None
            if passed
            else CreditAssignment(root_cause=root_cause, failure_category=category),  # type: ignore[arg-type]
        ),
        memory_metadata=MemoryMetadata(3, len(in_context or []), in_context),
        ralph=RalphExtension(
            reflection_source="success" if passed else source,  # type: ignore[arg-type]
            quality_flags=flags or [],
            usage=Usage(100, 20, 10, 5, cost),
            duration_ms={"actor": 1500, "evaluate": 500},
        ),
    )


def make_loop(
    store: MemoryStore,
    loop_id: str,
    rewards: list[float],
    *,
    green_at: int | None = None,
    baseline: float | None = 0.25,
    baseline_errors: int | None = None,
    status: str = "completed",
    task: str = "make it work",
    created_at: str = "2026-03-01T10:00:00Z",
    **overrides: Any,
) -> None:
    """Iteration i gets reward rewards[i-1]; `overrides` maps a field to its value per iteration."""
    for i, reward in enumerate(rewards, start=1):
        extra = {k: v[i - 1] for k, v in overrides.items()}
        store.write_record(record(loop_id, i, reward, passed=i == green_at, task=task, **extra))
    base: BaselineSummary | None = None
    if baseline is not None:
        base = BaselineSummary(reward=baseline, error_count=baseline_errors or 0)
    state = LoopState(loop_id, task, status=status, iteration=len(rewards), baseline=base)
    state.created_at = created_at
    state.stop_reason = "success" if green_at else "max_iterations"
    store.write_state(state)


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    s = MemoryStore(tmp_path)
    s.ensure()
    return s


def only(a: Analysis) -> dict[str, Any]:
    (loop,) = analysis_json(a)["loops"]
    return loop  # type: ignore[no-any-return]


# per loop -----------------------------------------------------------------------------------
def test_reward_series_green_and_learning_rate(store: MemoryStore) -> None:
    make_loop(store, "ralph-a-1", [0.5, 0.75, 1.0], green_at=3, baseline=0.25)
    loop = only(analyze(store))
    assert loop["rewards"] == [0.25, 0.5, 0.75, 1.0]
    assert loop["baseline_reward"] == 0.25 and loop["best_reward"] == 1.0
    assert loop["iterations_to_green"] == 3
    assert loop["learning_rate"] == 0.25
    assert loop["status"] == "completed" and loop["stop_reason"] == "success"


def test_learning_rate_is_the_mean_step_and_none_for_a_single_point(store: MemoryStore) -> None:
    make_loop(store, "ralph-a-1", [0.75, 0.25, 0.5], baseline=None)
    make_loop(store, "ralph-b-1", [0.5], baseline=None)
    make_loop(store, "ralph-c-1", [0.75], baseline=0.25)
    loops = {loop["loop_id"]: loop for loop in analysis_json(analyze(store))["loops"]}
    assert loops["ralph-a-1"]["learning_rate"] == -0.125  # (-0.5 + 0.25) / 2
    assert loops["ralph-a-1"]["iterations_to_green"] is None
    assert loops["ralph-b-1"]["learning_rate"] is None  # one iteration, no baseline
    assert loops["ralph-c-1"]["learning_rate"] == 0.5  # the baseline step alone


def test_success_at_k_success_rate_and_iterations_to_green(store: MemoryStore) -> None:
    make_loop(store, "ralph-a-1", [1.0], green_at=1)
    make_loop(store, "ralph-b-1", [0.5, 0.75, 1.0], green_at=3)
    make_loop(store, "ralph-c-1", [0.5, 0.5, 0.5, 0.5])
    make_loop(store, "ralph-d-1", [0.5, 0.75], status="running")  # not green (yet)
    summary = analysis_json(analyze(store))["summary"]
    assert summary["loops"] == 4 and summary["green_loops"] == 2
    assert summary["success_rate"] == 0.5
    assert summary["success_at_k"] == {"1": 0.25, "2": 0.25, "3": 0.5, "4": 0.5}
    assert summary["mean_iterations_to_green"] == 2.0
    assert summary["median_iterations_to_green"] == 2.0
    assert summary["iterations"] == 10


def test_a_loop_green_at_its_baseline_is_left_out_of_the_success_figures(
    store: MemoryStore,
) -> None:
    make_loop(store, "ralph-a-1", [1.0], green_at=1)
    make_loop(store, "ralph-b-1", [0.5, 1.0], green_at=2)
    make_loop(store, "ralph-c-1", [0.5, 0.5])
    store.write_state(
        LoopState("ralph-ok-1", "green", baseline=BaselineSummary(passed=True, reward=1.0))
    )
    analysis = analyze(store)
    summary = analysis_json(analysis)["summary"]
    assert summary["loops"] == 4 and summary["nothing_to_do"] == 1
    assert summary["green_loops"] == 2 and summary["success_rate"] == 2 / 3
    assert summary["success_at_k"] == {"1": 1 / 3, "2": 2 / 3}
    assert summary["mean_iterations_to_green"] == 1.5  # not (0 + 1 + 2) / 3
    text = " ".join(headline(analysis, width=200))
    assert "success rate 67% (2 of 3 green)" in text
    assert "1 loop green at the start (nothing to do)" in text


def test_breakthroughs_name_the_reflection_that_preceded_them(store: MemoryStore) -> None:
    reflections = ["first idea", "use a regex\nbecause", "oops", "last"]
    make_loop(
        store,
        "ralph-a-1",
        [0.5, 0.25, 0.75, 0.5, 0.875],
        baseline=0.125,
        reflection=[*reflections, "done"],
        category=["logic_error", "edge_case_miss", "logic_error", "hallucination", None],
    )
    loop = only(analyze(store))
    # 0.125 -> 0.5 (+0.375, from the baseline), 0.25 -> 0.75 (+0.5), 0.5 -> 0.875 (+0.375)
    assert [(b["iteration"], b["delta"]) for b in loop["breakthroughs"]] == [
        (1, 0.375),
        (3, 0.5),
        (5, 0.375),
    ]
    assert loop["breakthroughs"][0]["preceded_by"] is None
    assert loop["breakthroughs"][1]["preceded_by"] == {
        "iteration": 2,
        "reflection": "use a regex",
        "category": "edge_case_miss",
    }
    assert loop["breakthroughs"][2]["preceded_by"]["category"] == "hallucination"
    assert analysis_json(analyze(store))["summary"]["breakthroughs"] == 3


def test_a_jump_of_exactly_point_three_counts_despite_binary_floats(store: MemoryStore) -> None:
    make_loop(store, "ralph-a-1", [0.4, 0.7, 0.95], baseline=None)  # 0.7 - 0.4 < 0.3 in floats
    assert [b["iteration"] for b in only(analyze(store))["breakthroughs"]] == [2]


def test_errors_categories_tokens_cost_and_time(store: MemoryStore) -> None:
    make_loop(
        store,
        "ralph-a-1",
        [0.25, 0.5, 0.75, 1.0],
        green_at=4,
        baseline_errors=6,
        errors=[4, 3, 1, 0],
        category=["logic_error", "edge_case_miss", "logic_error", None],
        cost=[0.25, None, 0.5, 0.25],
    )
    loop = only(analyze(store))
    assert loop["error_counts"] == [6, 4, 3, 1, 0]
    assert loop["error_trend"] == -1.5
    assert loop["failure_categories"] == {"logic_error": 2, "edge_case_miss": 1}
    assert loop["tokens"] == 4 * 135
    assert loop["cost_usd"] is None  # one unknown part makes the sum unknown (records.sum_costs)
    assert loop["wall_seconds"] == 8.0


def test_cost_is_unknown_when_no_record_knows_it(store: MemoryStore) -> None:
    make_loop(store, "ralph-a-1", [0.5, 0.75], cost=[None, None])
    assert only(analyze(store))["cost_usd"] is None
    assert analysis_json(analyze(store))["summary"]["cost_usd"] is None


# across loops -------------------------------------------------------------------------------
def test_failure_category_distribution_and_iterations_they_take(store: MemoryStore) -> None:
    make_loop(
        store, "ralph-a-1", [0.25, 0.5, 1.0], green_at=3, category=["logic_error"] * 2 + [None]
    )
    make_loop(store, "ralph-b-1", [0.25, 1.0], green_at=2, category=["edge_case_miss", None])
    make_loop(store, "ralph-c-1", [0.5, 0.5], category=["logic_error", None])
    cats = analysis_json(analyze(store))["summary"]["failure_categories"]
    assert cats == [
        {
            "category": "logic_error",
            "iterations": 3,
            "share": 0.6,
            "loops": 2,
            "iterations_per_loop": 1.5,
            "mean_iterations_to_green": 3.0,
        },
        {
            "category": "edge_case_miss",
            "iterations": 1,
            "share": 0.2,
            "loops": 1,
            "iterations_per_loop": 1.0,
            "mean_iterations_to_green": 2.0,
        },
        {
            "category": "uncategorised",
            "iterations": 1,
            "share": 0.2,
            "loops": 1,
            "iterations_per_loop": 1.0,
            "mean_iterations_to_green": None,
        },
    ]


def test_reflection_effectiveness_by_source_and_quality_flag(store: MemoryStore) -> None:
    # rewards 0.25, 0.5 (up), 0.25 (down), 0.75 (up); reflections 1 (llm), 2 (heuristic, flagged)
    make_loop(
        store,
        "ralph-a-1",
        [0.25, 0.5, 0.25, 0.75],
        in_context=[[], [1], [1, 2], [2, 3]],
        source=["llm", "heuristic", "llm", "llm"],
        flags=[[], ["generic", "short"], [], []],
    )
    eff = analysis_json(analyze(store))["summary"]["reflection_effectiveness"]
    # uses: (2, j=1 up), (3, j=1 down), (3, j=2 down), (4, j=2 up), (4, j=3 up)
    assert (eff["uses"], eff["improved"], eff["share"]) == (5, 3, 0.6)
    assert eff["by_source"] == {
        "heuristic": {"uses": 2, "improved": 1, "share": 0.5},
        "llm": {"uses": 3, "improved": 2, "share": 2 / 3},
    }
    assert eff["by_quality_flag"] == {
        "generic": {"uses": 2, "improved": 1, "share": 0.5},
        "none": {"uses": 3, "improved": 2, "share": 2 / 3},
        "short": {"uses": 2, "improved": 1, "share": 0.5},
    }


def test_lessons_from_other_loops_count_the_attempts_they_helped(store: MemoryStore) -> None:
    from ralph.records import PerformanceDelta

    # attempt 1 with a lesson improved, attempt 2 with one did not, attempt 3 had none
    for i, (lessons, improved) in enumerate(
        [(["ralph-old-1#2.0"], True), (["ralph-old-1#2.0", "ralph-x-1#1.0"], False), ([], True)],
        start=1,
    ):
        rec = record("ralph-a-1", i, 0.25 * i)
        assert rec.ralph is not None
        rec.ralph.lessons_used = lessons
        rec.performance_delta = PerformanceDelta(0.25, 0, improved)
        store.write_record(rec)
    store.write_state(LoopState("ralph-a-1", "make it work", status="failed", iteration=3))
    data = analysis_json(analyze(store))["summary"]["lessons_from_other_loops"]
    assert data == {"uses": 2, "improved": 1, "share": 0.5}
    from rich.console import Console

    console = Console(record=True, width=120, color_system=None)
    render(analyze(store), console)
    row = next(line for line in console.export_text().splitlines() if "other loops" in line)
    assert row.split()[-2:] == ["2", "50%"]


def test_effectiveness_falls_back_to_previous_reflections_used(store: MemoryStore) -> None:
    rec1 = record("ralph-a-1", 1, 0.25)
    rec2 = record("ralph-a-1", 2, 0.5)
    rec2.memory_metadata.reflections_in_context = None
    rec2.previous_reflections_used = [1]
    store.write_record(rec1)
    store.write_record(rec2)
    eff = analysis_json(analyze(store))["summary"]["reflection_effectiveness"]
    assert (eff["uses"], eff["improved"]) == (1, 1)


def test_recurring_root_causes_across_and_within_loops(store: MemoryStore) -> None:
    make_loop(
        store,
        "ralph-a-1",
        [0.25, 0.25, 0.5],
        root_cause=["Missing import of os.", "missing   IMPORT of os", "Other thing"],
    )
    make_loop(store, "ralph-b-1", [0.25, 0.5], root_cause=["Missing import of os!", "other thing"])
    causes = analysis_json(analyze(store))["summary"]["recurring_root_causes"]
    assert causes == [
        {
            "root_cause": "Missing import of os",  # matched normalised, shown as first written
            "count": 3,
            "loops": ["ralph-a-1", "ralph-b-1"],
            "occurrences": [
                {"loop_id": "ralph-a-1", "iteration": 1},
                {"loop_id": "ralph-a-1", "iteration": 2},
                {"loop_id": "ralph-b-1", "iteration": 1},
            ],
        }
    ]  # "other thing" appears twice only


def test_root_causes_are_normalised() -> None:
    assert normalise_root_cause("  The  Parser\tfails;. ") == "the parser fails"


# robustness ---------------------------------------------------------------------------------
def test_invalid_files_are_counted_named_and_never_fatal(store: MemoryStore) -> None:
    make_loop(store, "ralph-a-1", [0.25, 0.5, 0.75])
    folder = store.reflections_dir("ralph-a-1")
    (folder / "002.json").write_text("{not json", encoding="utf-8")
    data = json.loads((folder / "003.json").read_text())
    del data["self_reflection"]
    (folder / "003.json").write_text(json.dumps(data), encoding="utf-8")
    make_loop(store, "ralph-b-1", [0.5])
    store.state_path("ralph-b-1").write_text('{"status": "nonsense"}', encoding="utf-8")
    out = analysis_json(analyze(store))
    invalid = {f["path"]: f["reason"] for f in out["invalid_files"]}
    assert set(invalid) == {
        ".aiwg/ralph/reflections/ralph-a-1/002.json",
        ".aiwg/ralph/reflections/ralph-a-1/003.json",
        ".aiwg/ralph/loops/ralph-b-1/state.json",
    }
    assert "not JSON" in invalid[".aiwg/ralph/reflections/ralph-a-1/002.json"]
    assert "self_reflection" in invalid[".aiwg/ralph/reflections/ralph-a-1/003.json"]
    assert out["summary"]["invalid_files"] == 3
    loops = {loop["loop_id"]: loop for loop in out["loops"]}
    assert (
        loops["ralph-a-1"]["rewards"] == [0.25, 0.25] and loops["ralph-a-1"]["invalid_files"] == 2
    )
    assert loops["ralph-b-1"]["status"] == "unknown" and loops["ralph-b-1"]["rewards"] == [0.5]


def test_a_record_in_the_wrong_folder_is_invalid(store: MemoryStore) -> None:
    make_loop(store, "ralph-a-1", [0.5])
    moved = store.reflections_dir("ralph-b-1") / "001.json"
    moved.parent.mkdir(parents=True)
    moved.write_text(store.record_path("ralph-a-1", 1).read_text(), encoding="utf-8")
    out = analysis_json(analyze(store))
    assert [f["path"] for f in out["invalid_files"]] == [
        ".aiwg/ralph/reflections/ralph-b-1/001.json"
    ]
    assert "does not match" in out["invalid_files"][0]["reason"]


def test_running_crashed_and_recordless_loops(store: MemoryStore) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    make_loop(store, "ralph-dead-1", [0.5, 0.75], status="running")
    state = store.read_state("ralph-dead-1")
    state.pid, state.host = proc.pid, socket.gethostname()
    store.write_state(state)
    store.write_state(
        LoopState("ralph-new-1", "just started", baseline=BaselineSummary(reward=0.5))
    )
    store.write_state(
        LoopState("ralph-ok-1", "green", baseline=BaselineSummary(passed=True, reward=1.0))
    )
    # running: their locks are held (one working tree each); the dead one's pid decides nothing
    with store.lock("ralph-new-1", store.root), store.lock("ralph-ok-1", store.root / "wt"):
        out = analysis_json(analyze(store))
        crashed = analyze(store, status="crashed")
    loops = {loop["loop_id"]: loop for loop in out["loops"]}
    assert loops["ralph-dead-1"]["status"] == "crashed"
    assert loops["ralph-new-1"]["status"] == "running" and loops["ralph-new-1"]["rewards"] == [0.5]
    assert loops["ralph-ok-1"]["iterations_to_green"] == 0  # already green at the baseline
    # ... so it had nothing to do: out of the success figures, counted on its own
    assert out["summary"]["success_at_k"] == {"1": 0.0, "2": 0.0}
    assert out["summary"]["nothing_to_do"] == 1 and out["summary"]["loops"] == 3
    assert [loop.loop_id for loop in crashed.loops] == ["ralph-dead-1"]


def test_filters_since_status_task_and_named_loops(store: MemoryStore) -> None:
    make_loop(store, "ralph-old-1", [0.5], task="Fix the parser", created_at="2026-01-01T00:00:00Z")
    make_loop(store, "ralph-new-1", [0.5], task="fix the PARSER again", status="failed")
    make_loop(store, "ralph-other-1", [0.5], task="write docs")

    def ids(a: Analysis) -> list[str]:
        return sorted(loop.loop_id for loop in a.loops)

    assert ids(analyze(store, since=datetime(2026, 2, 1))) == ["ralph-new-1", "ralph-other-1"]
    assert ids(analyze(store, since=datetime(2026, 2, 1, tzinfo=UTC), task="parser")) == [
        "ralph-new-1"
    ]
    assert ids(analyze(store, status="failed")) == ["ralph-new-1"]
    assert ids(analyze(store, ["ralph-other-1", "ralph-old-1", "ralph-old-1"])) == [
        "ralph-old-1",
        "ralph-other-1",
    ]
    assert analysis_json(analyze(store, task="parser"))["summary"]["filters"] == {"task": "parser"}
    with pytest.raises(StoreError, match="unknown loop"):
        analyze(store, ["ralph-missing-1"])
    with pytest.raises(StoreError, match="invalid loop id"):
        analyze(store, ["../etc"])
    with pytest.raises(RalphError, match="unknown status"):
        analyze(store, status="green")


def test_no_memory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no ralph memory"):
        analyze(MemoryStore(tmp_path))


def test_the_repository_example_loop(example_project: Path) -> None:
    loop = only(analyze(MemoryStore(example_project)))
    assert loop["loop_id"] == EXAMPLE_LOOP
    assert loop["rewards"] == [0.6364, 0.8167, 0.9545, 1.0]
    assert loop["iterations_to_green"] == 3 and loop["error_counts"] == [4, 2, 1, 0]


# the index ----------------------------------------------------------------------------------
def test_index_gives_the_same_answer_and_is_used_on_the_second_run(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_loop(store, "ralph-a-1", [0.25, 0.5, 1.0], green_at=3, root_cause=["x", "x", None])
    make_loop(store, "ralph-b-1", [0.5, 0.25], in_context=[[], [1]])
    (store.reflections_dir("ralph-b-1") / "003.json").write_text("[]", encoding="utf-8")
    plain = analysis_json(analyze(store, use_index=False))
    assert not (store.base / "index.sqlite").exists()
    assert analysis_json(analyze(store)) == plain
    assert (store.base / "index.sqlite").exists()

    def no_reading(*args: object) -> None:
        raise AssertionError("a file was read although it is indexed")

    monkeypatch.setattr(index_module, "_read_record", no_reading)
    monkeypatch.setattr(index_module, "_read_state", no_reading)
    assert analysis_json(analyze(store)) == plain  # invalid files come from the index too


def test_index_rereads_changed_files_and_forgets_removed_ones(store: MemoryStore) -> None:
    make_loop(store, "ralph-a-1", [0.25, 0.5])
    make_loop(store, "ralph-b-1", [0.5])
    analyze(store)
    store.write_record(record("ralph-a-1", 2, 0.75))
    store.write_record(record("ralph-a-1", 3, 1.0, passed=True))
    store.record_path("ralph-b-1", 1).unlink()
    loops = {loop["loop_id"]: loop for loop in analysis_json(analyze(store))["loops"]}
    assert loops["ralph-a-1"]["rewards"] == [0.25, 0.25, 0.75, 1.0]
    assert loops["ralph-b-1"]["rewards"] == [0.25]


def test_a_corrupt_index_is_rebuilt(store: MemoryStore) -> None:
    make_loop(store, "ralph-a-1", [0.25, 0.5])
    (store.base / "index.sqlite").write_bytes(b"this is not a database" * 100)
    assert only(analyze(store))["rewards"] == [0.25, 0.25, 0.5]
    assert (store.base / "index.sqlite").read_bytes().startswith(b"SQLite format 3")
    assert only(analyze(store))["rewards"] == [0.25, 0.25, 0.5]
    db = sqlite3.connect(store.base / "index.sqlite")
    with db:
        db.execute("UPDATE files SET facts = '[1, 2]' WHERE facts IS NOT NULL")
    db.close()
    assert only(analyze(store))["rewards"] == [0.25, 0.25, 0.5]  # unusable rows: files read


def test_json_shape(store: MemoryStore) -> None:
    make_loop(store, "ralph-a-1", [0.5, 1.0], green_at=2)
    out = json.loads(json.dumps(analysis_json(analyze(store))))
    assert set(out) == {"summary", "loops", "invalid_files"}
    assert {
        "loops",
        "success_rate",
        "success_at_k",
        "mean_iterations_to_green",
        "median_iterations_to_green",
        "failure_categories",
        "reflection_effectiveness",
        "recurring_root_causes",
        "tokens",
        "cost_usd",
        "wall_seconds",
    } <= set(out["summary"])
    assert set(out["loops"][0]) >= {
        "loop_id",
        "task",
        "status",
        "stop_reason",
        "rewards",
        "iterations_to_green",
        "learning_rate",
        "breakthroughs",
        "error_counts",
        "failure_categories",
        "tokens",
        "cost_usd",
        "wall_seconds",
    }
    assert out["summary"]["success_at_k"] == {"1": 0.0, "2": 1.0}


def test_csv_has_one_row_per_iteration_and_the_baseline(store: MemoryStore) -> None:
    make_loop(store, "ralph-a-1", [0.5, 1.0], green_at=2, baseline_errors=3, flags=[["a", "b"], []])
    make_loop(store, "ralph-b-1", [0.75], baseline=None)
    buffer = io.StringIO()
    write_csv(analyze(store), buffer)
    rows = list(csv.DictReader(io.StringIO(buffer.getvalue())))
    assert [(r["loop_id"], r["iteration"], r["reward"]) for r in rows] == [
        ("ralph-a-1", "0", "0.25"),
        ("ralph-a-1", "1", "0.5"),
        ("ralph-a-1", "2", "1.0"),
        ("ralph-b-1", "1", "0.75"),
    ]
    assert rows[0]["error_count"] == "3" and rows[0]["passed"] == ""
    assert rows[1]["reward_change"] == "0.25" and rows[1]["quality_flags"] == "a;b"
    assert rows[2]["passed"] == "true" and rows[2]["reflection"] == "reflection 2"
    assert rows[3]["reward_change"] == "" and rows[3]["cost_usd"] == "0.25"
    assert rows[1]["tokens"] == "135" and rows[1]["duration_s"] == "2.0"


def test_csv_never_cuts_the_reflection(store: MemoryStore) -> None:
    long = "I changed typedkey but hashkey now appends the marker to every key " * 5
    make_loop(store, "ralph-a-1", [0.5], reflection=[long.strip() + "\nsecond line"])
    buffer = io.StringIO()
    write_csv(analyze(store), buffer)
    rows = list(csv.DictReader(io.StringIO(buffer.getvalue())))
    assert rows[-1]["reflection"] == long.strip()


def test_html_is_self_contained_with_charts_and_tables(store: MemoryStore, tmp_path: Path) -> None:
    make_loop(store, "ralph-a-1", [0.5, 1.0], green_at=2, task="<b>escape me</b>")
    make_loop(store, "ralph-b-1", [0.25, 0.5], category=["edge_case_miss", "logic_error"])
    target = tmp_path / "report.html"
    write_html(analyze(store), target)
    page = target.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert page.count("<figure><svg") == 3  # reward per iteration, success@k, categories
    assert page.count("<svg class='swatch'") == 2  # the two loops in the legend
    for title in ("Reward per iteration", "success@k", "Failure categories", "Loops"):
        assert f"<h2>{title}</h2>" in page
    assert "<table>" in page and "ralph-a-1" in page and "edge_case_miss" in page
    assert "&lt;b&gt;escape me&lt;/b&gt;" in page and "<b>escape me</b>" not in page
    lowered = page.lower()
    for external in ("<script", "<link", "<img", "src=", "@import", "url(http", 'href="http'):
        assert external not in lowered
    assert 'id="c0-' in page and 'id="c2-' in page  # ids made unique per chart


def test_html_without_matplotlib_says_how_to_get_it(
    store: MemoryStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_loop(store, "ralph-a-1", [0.5])
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(RalphError, match="matplotlib") as info:
        write_html(analyze(store), tmp_path / "r.html")
    assert info.value.hint == "pip install 'ralph-reflexion[plot]'"
    assert not (tmp_path / "r.html").exists()


def test_render_tables_sparklines_and_charts(store: MemoryStore) -> None:
    from rich.console import Console

    make_loop(store, "ralph-a-1", [0.5, 1.0], green_at=2, baseline=0.0)
    make_loop(store, "ralph-b-1", [0.25, 0.5], root_cause=["same", "same"])
    make_loop(store, "ralph-c-1", [0.75], root_cause=["Same."])
    console = Console(record=True, width=140, color_system=None)
    render(analyze(store), console)
    text = console.export_text()
    assert "▁▅█" in text  # ralph-a-1: 0.0, 0.5, 1.0
    assert "k=1" in text and "k=2" in text and "█" * 10 in text
    assert "recurring root causes" in text and "same" in text
    assert "success rate 33%" in text


def test_render_plots_the_curve_of_a_single_loop(store: MemoryStore) -> None:
    from rich.console import Console

    make_loop(store, "ralph-a-1", [0.5, 1.0], green_at=2, baseline=0.0)
    console = Console(record=True, width=120, color_system=None)
    render(analyze(store, ["ralph-a-1"]), console)
    lines = console.export_text().splitlines()
    plot = [line for line in lines if "│" in line and "●" in line]
    assert len(plot) == 3  # the points at 0.0, 0.5 and 1.0 sit on three different rows
    assert plot[0].startswith("1.0 │") and plot[-1].startswith("0.0 │")
    jump = next(line for line in lines if "0.50 → 1.00" in line)  # iteration 2, after 1
    assert "1: reflection 1" in jump


def test_render_names_invalid_files_and_empty_results(store: MemoryStore) -> None:
    from rich.console import Console

    make_loop(store, "ralph-a-1", [0.5])
    store.record_path("ralph-a-1", 1).write_text("nope", encoding="utf-8")
    console = Console(record=True, width=160, color_system=None)
    render(analyze(store, task="nothing matches"), console)
    assert "no loops match" in console.export_text()
    render(analyze(store), console)
    text = console.export_text()
    assert "1 invalid file, skipped" in text and "reflections/ralph-a-1/001.json: not JSON" in text


# the command --------------------------------------------------------------------------------
def test_cli_json_csv_and_filters(store: MemoryStore, ralph: RunCli) -> None:
    make_loop(store, "ralph-a-1", [0.5, 1.0], green_at=2, baseline=0.0, task="fix parser")
    make_loop(store, "ralph-b-1", [0.25, 0.5], status="failed", task="make mypy happy")
    result = ralph("analyze", "--json", cwd=store.root)
    assert result.code == 0, result.err
    data = json.loads(result.out)
    assert data["summary"]["success_rate"] == 0.5
    assert data["summary"]["success_at_k"] == {"1": 0.0, "2": 0.5}
    assert [loop["loop_id"] for loop in data["loops"]] == ["ralph-a-1", "ralph-b-1"]

    only_failed = json.loads(ralph("analyze", "--json", "--status", "failed").out)
    assert [loop["loop_id"] for loop in only_failed["loops"]] == ["ralph-b-1"]
    named = json.loads(ralph("analyze", "ralph-a-1", "--json", "--task", "parser").out)
    assert [loop["loop_id"] for loop in named["loops"]] == ["ralph-a-1"]

    rows = list(csv.DictReader(io.StringIO(ralph("analyze", "--csv").out)))
    assert [(r["loop_id"], r["iteration"]) for r in rows] == [
        ("ralph-a-1", "0"),
        ("ralph-a-1", "1"),
        ("ralph-a-1", "2"),
        ("ralph-b-1", "0"),
        ("ralph-b-1", "1"),
        ("ralph-b-1", "2"),
    ]


def test_cli_html_writes_the_report_and_tells_where(
    store: MemoryStore, ralph: RunCli, tmp_path: Path
) -> None:
    make_loop(store, "ralph-a-1", [0.5, 1.0], green_at=2, baseline=0.0)
    target = tmp_path / "out" / "report.html"
    target.parent.mkdir()
    result = ralph("analyze", "--html", str(target), cwd=store.root)
    assert result.code == 0, result.err
    assert "<svg" in target.read_text(encoding="utf-8")
    assert str(target) in result.err and result.out == ""


def test_cli_in_a_pipe_prints_tab_separated_rows_with_whole_loop_ids(
    store: MemoryStore, ralph: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README: a pipe gets tab-separated lines, never a box table cut at the width."""
    loop = "ralph-fix-the-failing-typedkey-tests-in-src-ca-50a704ae"
    make_loop(store, loop, [0.5, 1.0], green_at=2)
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.delenv("CI", raising=False)
    result = ralph("analyze", cwd=store.root)
    assert result.code == 0, result.err
    rate = json.loads(ralph("analyze", "--json").out)["loops"][0]["learning_rate"]
    row = next(line for line in result.out.splitlines() if line.startswith(loop))
    assert row.split("\t")[:3] == [loop, "completed", "2"] and f"{rate:+.3f}" in row
    assert not any(set(line.strip()) == {"─"} for line in result.out.splitlines())  # no rule


@pytest.mark.parametrize("width", [80, 60])
def test_the_terminal_view_never_splits_a_loop_id(store: MemoryStore, width: int) -> None:
    from rich.console import Console

    loops = ["ralph-fix-the-failing-typedkey-tests-in-src-ca-50a704ae", "ralph-fix-typedkey-1"]
    for loop in loops:
        make_loop(
            store, loop, [0.5, 1.0], green_at=2, root_cause=["AssertionError: 25 != None"] * 2
        )
    console = Console(record=True, width=width, color_system=None, force_terminal=True)
    render(analyze(store), console)
    lines = console.export_text().splitlines()
    assert all(len(line) <= width for line in lines), lines
    for loop in loops:  # whole, or by its short id, which every command takes
        assert any(loop in line or short_id(loop) in line.split() for line in lines), lines
    assert not any(line.strip().startswith("tests-in-src") for line in lines), lines


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--since", "last tuesday"], "--since 'last tuesday' is not a date"),
        (["--json", "--csv"], "--json and --csv both print on stdout"),
        (["--status", "green"], "unknown status 'green'"),
        (["ralph-missing-1"], "unknown loop 'ralph-missing-1'"),
        (["../etc"], "invalid loop id"),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(
    store: MemoryStore, ralph: RunCli, args: list[str], message: str
) -> None:
    make_loop(store, "ralph-a-1", [0.5])
    result = ralph("analyze", *args, cwd=store.root)
    assert result.code == 2
    assert result.err.splitlines()[0].startswith(f"ralph: error: {message}")
