"""`ralph bench`: the offline proof that the memory helps, arms, intervals, outputs, resume.

The actor fixes a bug only when a reflection of an earlier attempt (the prompt's reflections
section, not its list of what fails) names the failing test: with reflections it is green at
iteration 2 on every task; with `--omega 0 --lessons 0` it never is."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from ralph.bench import report
from ralph.bench.runner import ArmResult, Run, paired_difference, parse_arm, summarise
from ralph.errors import ConfigError

from .conftest import RunCli
from .fakes.calc_project import git, make_calc_repo

AGENT = r"""
import json, os, sys
from pathlib import Path
prompt = Path(os.environ["RALPH_PROMPT_FILE"]).read_text()
head = "# Reflections from your earlier attempts"
memory = prompt.split(head, 1)[1].split("\n# ", 1)[0] if head in prompt else ""
for test, (path, text) in json.loads(Path(sys.argv[1]).read_text()).items():
    if test in memory:
        Path(path).write_text(text)
print("done")
"""
TESTS = """\
from calc import absolute, double


def test_negative() -> None:
    assert absolute(-3) == 3


def test_double() -> None:
    assert double(2) == 4
"""
BUGGY = "def absolute(x: int) -> int:\n    return x\n\n\ndef double(x: int) -> int:\n    return x\n"
FIX_ABS = BUGGY.replace("    return x\n\n\n", "    return -x if x < 0 else x\n\n\n")
FIX_DOUBLE = BUGGY.removesuffix("    return x\n") + "    return 2 * x\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = make_calc_repo(tmp_path / "repo", calc=BUGGY, tests=TESTS, monkeypatch=monkeypatch)
    (tmp_path / "agent.py").write_text(AGENT)
    fixes = {"test_negative": ["calc.py", FIX_ABS], "test_double": ["calc.py", FIX_DOUBLE]}
    (tmp_path / "fixes.json").write_text(json.dumps(fixes))
    actor = f"cmd:{sys.executable} {tmp_path / 'agent.py'} {tmp_path / 'fixes.json'}"
    pytest_cmd = f"{sys.executable} -m pytest -q tests/test_calc.py"
    tasks = {
        "defaults": {"actor": actor, "max_iterations": 2},  # reflexion is green at 2
        "tasks": [
            {"name": "abs", "task": "fix absolute()", "test": f"{pytest_cmd}::test_negative"},
            {"name": "dbl", "task": "fix double()", "test": f"{pytest_cmd}::test_double"},
        ],
    }
    import yaml

    (tmp_path / "tasks.yaml").write_text(yaml.safe_dump(tasks))
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("RALPH_REFLECTOR", "heuristic")
    return root


def test_reflexion_is_green_by_iteration_two_and_no_memory_never(
    ralph: RunCli, project: Path, tmp_path: Path
) -> None:
    page = tmp_path / "bench.html"
    tasks = str(tmp_path / "tasks.yaml")
    result = ralph("bench", tasks, "--jobs", "2", "--json", "--html", str(page), cwd=project)
    assert result.code == 0, result.err
    assert f"report written to {page}" in result.err
    summary = json.loads(result.out)
    reflexion, no_memory = summary["arms"]
    assert (reflexion["arm"], no_memory["arm"]) == ("reflexion", "no-memory")
    assert reflexion["success_at_k"]["1"] == 0.0 and reflexion["success_at_k"]["2"] == 1.0
    assert all(r["green_at"] == 2 for r in reflexion["loops"])
    assert all(v == 0.0 for v in no_memory["success_at_k"].values())
    assert all(r["status"] == "failed" and r["iterations"] >= 2 for r in no_memory["loops"])
    assert reflexion["mean_iterations_to_green"] == 2.0
    assert no_memory["mean_iterations_to_green"] is None
    assert no_memory["vs_reflexion"] == {"difference": -1.0, "low": -1.0, "high": -1.0}
    assert no_memory["flags"] == {"omega": "0", "lessons": "0"}
    # a `cmd:` actor and the heuristic reflector report no tokens: unknown, not 0
    assert (reflexion["tokens"], reflexion["tokens_known_runs"]) == (None, 0)
    assert all(r["tokens"] is None for r in reflexion["loops"])
    assert (reflexion["cost_usd"], reflexion["cost_known_runs"], reflexion["counted_runs"]) == (
        None,
        0,
        2,
    )
    kept = project / ".aiwg/ralph/bench" / summary["bench_id"] / "bench.json"
    record = json.loads(kept.read_text())
    assert record["arms"]["no-memory"]["argv"] == ["--omega", "0", "--lessons", "0"]
    assert len(record["runs"]) == 4 and record["commit"] == git(project, "rev-parse", "main")
    assert "<polyline" in page.read_text() and "no-memory" in page.read_text()
    # isolation: every run learns only from records older than the bench, never from another run
    started = record["started_at"]
    for loop_id in record["runs"].values():
        state = json.loads((project / ".aiwg/ralph/loops" / loop_id / "state.json").read_text())
        assert state["settings"]["lessons_before"] == started

    # resume: nothing finished runs again; the same figures come back
    again = ralph("bench", tasks, "--resume", "--json", cwd=project)
    assert again.code == 0, again.err
    resumed = json.loads(again.out)
    assert resumed["arms"][0]["loops"] == reflexion["loops"]
    assert json.loads(kept.read_text())["started_at"] == started

    table = ralph("bench", tasks, "--resume", cwd=project)
    assert "reflexion" in table.out and "100%" in table.out and "paired bootstrap" in table.out
    assert "— tokens: no run of the arm reported any" in table.out
    assert "0 of 2 runs of reflexion" in table.out  # no `cmd:` run has a price: cost unknown
    assert "-100% [-100%, -100%]†" in table.out  # the interval over 2 tasks is marked
    assert "† over 2 tasks: too few for the interval to mean much" in table.out
    csv_rows = ralph("bench", tasks, "--resume", "--csv", cwd=project).out.splitlines()
    assert csv_rows[0].startswith("arm,k,success_at_k")
    assert "reflexion,2,1.0,2.0,,,0,0,2" in csv_rows


def test_arms_are_read_strictly() -> None:
    assert parse_arm("one=omega=1,reflector=heuristic") == (
        "one",
        {"omega": "1", "reflector": "heuristic"},
    )
    assert parse_arm("no-memory") == ("no-memory", {"omega": "0", "lessons": "0"})
    for bad in ("Bad Name=omega=1", "x=colour=red", "x=omega", "custom"):
        with pytest.raises(ConfigError):
            parse_arm(bad)


def run(
    task: str,
    arm: str,
    green: int | None,
    tokens: int | None = 0,
    cost: float | None = None,
    *,
    counted: bool = True,
) -> Run:
    return Run(task, arm, 1, "l", green, 3, tokens, cost, 0.0, "completed", counted)


def test_tokens_are_unknown_when_no_run_reported_them_and_a_partial_sum_is_marked(
    tmp_path: Path,
) -> None:
    arms = [
        ArmResult("all", {}, [run("w", "all", 1, 100), run("x", "all", 1, 50)]),
        ArmResult("some", {}, [run("w", "some", 1, 100), run("x", "some", 1, None)]),
        ArmResult("none", {}, [run("w", "none", 1, None), run("x", "none", 1, None)]),
    ]
    summary = {"bench_id": "b", **summarise(arms, 1)}
    figures = {a["arm"]: (a["tokens"], a["tokens_known_runs"]) for a in summary["arms"]}
    assert figures == {"all": (150, 2), "some": (100, 1), "none": (None, 0)}
    head, body = report.rows(summary)
    column = head.index("tokens")
    assert [row[column] for row in body] == ["150", "100*", "—"]
    assert report.footnotes(summary) == [
        "* tokens: the sum over the runs that reported them (1 of 2 runs of some); the others' "
        "are unknown (a `cmd:` actor, a heuristic reflector), not 0",
        "— tokens: no run of the arm reported any",
        "— cost: unknown as soon as one run's is (0 of 2 runs of all, 0 of 2 runs of some, 0 of 2"
        " runs of none reported one). Money adds up by one rule, as in each loop's state: a sum"
        " with an unknown part is unknown, since the known part alone would make the arm look"
        " cheaper than it was; tokens, which the state sums where reported, show that part"
        " marked *",
        "† over 2 tasks: too few for the interval to mean much (a bootstrap over a handful of"
        " tasks is narrow because there is little to resample); it needs 10 or more",
    ]
    out = io.StringIO()
    report.write_csv(summary, out)
    csv_rows = ["all,1,1.0,1.0,150,,2,0,2", "some,1,1.0,1.0,100,,1,0,2", "none,1,1.0,1.0,,,0,0,2"]
    assert out.getvalue().splitlines()[1:] == csv_rows
    report.write_html(summary, tmp_path / "b.html")
    page = (tmp_path / "b.html").read_text()
    assert "100*" in page and "1 of 2 runs of some" in page
    priced = ArmResult("p", {}, [run("w", "p", 1, 100, 0.25), run("x", "p", 1, 50, 0.5)])
    whole = {"bench_id": "b", **summarise([priced], 1)}
    assert report.footnotes(whole) == []  # every run reported: nothing to explain


def test_cost_is_unknown_when_one_runs_is_and_runs_that_used_nothing_are_no_part() -> None:
    """Money by `records.sum_costs`: one unpriced run makes the arm's cost unknown (not the
    known part, not marked like tokens); an already-green or unstarted run spent nothing."""
    arms = [
        ArmResult("all", {}, [run("w", "all", 1, 100, 0.25), run("x", "all", 1, 50, 0.5)]),
        ArmResult("some", {}, [run("w", "some", 1, 100, 0.25), run("x", "some", 1, 50, None)]),
        ArmResult(
            "green",  # one task already green: no iteration, no call counted
            {},
            [run("w", "green", 1, 100, 0.25), run("x", "green", 0, None, counted=False)],
        ),
        ArmResult("idle", {}, [run("w", "idle", None, None, counted=False)]),
    ]
    summary = {"bench_id": "b", **summarise(arms, 1)}
    figures = {
        a["arm"]: (a["cost_usd"], a["cost_known_runs"], a["counted_runs"], a["tokens"])
        for a in summary["arms"]
    }
    assert figures == {
        "all": (0.75, 2, 2, 150),
        "some": (None, 1, 2, 150),
        "green": (0.25, 1, 1, 100),
        "idle": (None, 0, 0, None),
    }
    head, body = report.rows(summary)
    cost, tokens = head.index("cost"), head.index("tokens")
    assert [row[cost] for row in body] == ["$0.7500", "—", "$0.2500", "—"]
    assert [row[tokens] for row in body] == ["150", "150", "100", "—"]  # green's run: no part
    notes = report.footnotes(summary)
    assert len(notes) == 3 and notes[2].startswith("† over 2 tasks: too few")
    assert notes[0].startswith("— cost: unknown as soon as one run's is (1 of 2 runs of some ")
    assert "a sum with an unknown part is unknown" in notes[0]
    assert notes[1] == (
        "— tokens and cost: no run of the arm used anything (already green, or not started)"
    )


def test_the_paired_interval_is_a_bootstrap_over_tasks() -> None:
    base = ArmResult("a", {}, [run(t, "a", None) for t in "wxyz"])
    mixed = ArmResult(
        "b", {}, [run("w", "b", 1), run("x", "b", 1), run("y", "b", None), run("z", "b", None)]
    )
    figures: dict[str, Any] = paired_difference(mixed, base, 3)
    assert figures["difference"] == 0.5
    assert 0.0 <= figures["low"] < 0.5 < figures["high"] <= 1.0


def test_a_run_counts_as_a_part_only_when_its_state_counted_something(tmp_path: Path) -> None:
    from ralph.bench.runner import BenchEntry, read_run
    from ralph.loop.tasks_file import BatchTask
    from ralph.memory.state import LoopState, Totals
    from ralph.memory.store import MemoryStore

    store = MemoryStore(tmp_path)
    store.ensure()
    task = BatchTask("t", "fix t")
    states = {
        "ralph-green-00000001": LoopState("ralph-green-00000001", "t", status="completed"),
        "ralph-judged-00000002": LoopState(
            "ralph-judged-00000002", "t", status="completed", usage=Totals(unrecorded_calls=1)
        ),
        "ralph-ran-00000003": LoopState("ralph-ran-00000003", "t", status="failed", iteration=2),
    }
    for state in states.values():
        state.stop_reason = "already_green" if state.iteration == 0 else "limit"
        store.write_state(state)
    counted = {
        loop_id: read_run(store, BenchEntry(task, loop_id, arm="a")).counted
        for loop_id in [*states, "ralph-never-00000004"]
    }
    assert counted == {
        "ralph-green-00000001": False,
        "ralph-judged-00000002": True,  # a judge's calls at the baseline cost something
        "ralph-ran-00000003": True,
        "ralph-never-00000004": False,  # not started
    }
