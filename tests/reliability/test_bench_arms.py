"""`ralph bench` reports what it measured: an arm no run would accept is refused before anything
runs, an arm whose runs could not run has no difference, and the interval is the paired
bootstrap it claims to be (checked against the exact bootstrap distribution and by coverage)."""

from __future__ import annotations

import itertools
import json
import random
import statistics
from pathlib import Path

import pytest
import yaml

from ralph.bench.report import footnotes, rows
from ralph.bench.runner import ArmResult, Run, paired_difference, summarise

from ..conftest import RunCli
from ..test_bench import git, project  # noqa: F401


@pytest.mark.parametrize(
    ("arm", "message"),
    [
        ("odd=omega=abc", "--arm odd: $.omega: 'abc' is not of type 'integer'"),
        ("odd=omega=11", "--arm odd: $.omega: 11 is greater than the maximum of 10"),
        ("odd=max_iterations=-1", "--arm odd: $.max_iterations: -1 is less than the minimum"),
        ("odd=window_policy=newest", "--arm odd: $.window_policy: 'newest' is not one of"),
        ("odd=memory_tokens=5", "--arm odd: $.memory_tokens: 5 is less than the minimum of 100"),
    ],
)
def test_an_arm_no_run_would_accept_is_refused_before_anything_runs(
    ralph: RunCli,
    project: Path,  # noqa: F811
    tmp_path: Path,
    arm: str,
    message: str,
) -> None:
    tasks = str(tmp_path / "tasks.yaml")
    result = ralph("bench", tasks, "--arm", "reflexion", "--arm", arm, "--json", cwd=project)
    assert result.code == 2, result.err
    (line, *rest) = result.err.strip().splitlines()
    assert line.startswith("ralph: error: ") and message in line, line
    assert len(rest) <= 1 and "Traceback" not in result.err and result.out == ""
    assert not (project / ".aiwg").exists()
    assert git(project, "branch", "--list") == "* main"


def test_an_arm_whose_runs_could_not_run_reports_that_not_a_difference(
    ralph: RunCli,
    project: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    # one task, one iteration: the arm that runs only has to run (test_bench.py runs a bench)
    plan = yaml.safe_load((tmp_path / "tasks.yaml").read_text())
    plan["tasks"] = plan["tasks"][:1]
    plan["defaults"]["max_iterations"] = 1
    (tmp_path / "one.yaml").write_text(yaml.safe_dump(plan))
    tasks = str(tmp_path / "one.yaml")
    arms = ("--arm", "reflexion", "--arm", "broken=actor=no-such-actor")
    result = ralph("bench", tasks, *arms, "--json", cwd=project)
    assert result.code == 1, result.err
    summary = json.loads(result.out)
    reflexion, broken = summary["arms"]
    assert summary["could_not_run"] == ["broken"]
    assert broken["failed_runs"] == 1 and reflexion["failed_runs"] == 0
    assert [run["error"] for run in reflexion["loops"]] == [None]
    assert broken["vs_reflexion"] == {
        "difference": None,
        "low": None,
        "high": None,
        "could_not_run": ["broken"],
    }
    assert all("no-such-actor" in run["error"] for run in broken["loops"])
    table = ralph("bench", tasks, *arms, "--resume", cwd=project)
    assert table.code == 1
    assert "none: broken could not run" in table.out and "-100%" not in table.out
    assert "broken: 1 of 1 run could not run" in table.out


def test_the_table_says_when_there_are_too_few_tasks_for_the_interval() -> None:
    """In process, on the figures `summarise` makes (the real bench's table, over its two
    tasks, says the same: test_bench.py)."""
    arm, base = arms_with([-1, -1])
    summary = summarise([base, arm], 1)
    _, body = rows(summary)
    assert body[1][-1] == "-100% [-100%, -100%]†" and body[0][-1] == "-"
    notes = footnotes(summary)
    assert "† over 2 tasks: too few for the interval to mean much" in " ".join(notes)
    enough = summarise(list(reversed(arms_with([-1] * 10))), 1)
    assert rows(enough)[1][1][-1] == "-100% [-100%, -100%]"
    assert not any("too few" in line for line in footnotes(enough))


# -- the interval ------------------------------------------------------------------------------


def arms_with(diffs: list[int]) -> tuple[ArmResult, ArmResult]:
    """An arm and a base with one run per task whose success differs by `diffs` (-1, 0, 1)."""
    base, arm = ArmResult("base", {}), ArmResult("arm", {})
    for i, d in enumerate(diffs):
        base.runs.append(Run(f"t{i}", "base", 1, "l", 1 if d < 0 else None, 1, None, None, 0, ""))
        arm.runs.append(Run(f"t{i}", "arm", 1, "l", 1 if d > 0 else None, 1, None, None, 0, ""))
    return arm, base


def exact_interval(diffs: list[int]) -> tuple[float, float]:
    """The 2.5 % and 97.5 % points of the exact bootstrap distribution: the mean of every one
    of the n**n resamples of the tasks."""
    means = sorted(statistics.fmean(c) for c in itertools.product(diffs, repeat=len(diffs)))
    values, n = sorted(set(means)), len(means)
    low = next(m for m in values if sum(x <= m for x in means) / n >= 0.025)
    high = next(m for m in reversed(values) if sum(x >= m for x in means) / n >= 0.025)
    return round(low, 4), round(high, 4)


@pytest.mark.parametrize(
    "diffs",
    [[1, 0, 1, 0, 1, 1], [1, 1, 0, 0, 0], [0, 0, 1, -1, 1], [1, 1, 1, 1, 1]],
)
def test_the_interval_is_the_exact_bootstraps_percentiles(diffs: list[int]) -> None:
    arm, base = arms_with(diffs)
    figures = paired_difference(arm, base, 1)
    assert figures["difference"] == round(statistics.fmean(diffs), 4)
    assert (figures["low"], figures["high"]) == exact_interval(diffs)


def test_by_hand_two_tasks_one_better_spans_nothing_to_everything() -> None:
    # resamples of [0, 1]: mean 0 a quarter of the time, 1 a quarter: both within the 95 %
    arm, base = arms_with([0, 1])
    assert paired_difference(arm, base, 1) == {"difference": 0.5, "low": 0.0, "high": 1.0}


def test_the_interval_covers_the_true_difference_about_95_percent_of_the_time() -> None:
    """200 benches of 30 tasks where the arm succeeds with 0.6 and the base with 0.3: the true
    difference is 0.3."""
    rng = random.Random(7)
    covered = 0
    for _ in range(200):
        diffs = [(rng.random() < 0.6) - (rng.random() < 0.3) for _ in range(30)]
        arm, base = arms_with(diffs)
        figures = paired_difference(arm, base, 1, samples=500)
        assert figures["low"] is not None and figures["high"] is not None
        assert figures["low"] <= figures["difference"] <= figures["high"]
        covered += figures["low"] <= 0.3 <= figures["high"]
    assert 0.9 <= covered / 200 <= 0.99
