"""A judge's model calls count like the actor's and the reflector's: in each record's usage and
cost, in state.json's totals, and against --max-tokens and --budget-usd. Calls outside an
iteration (the baseline's, a resume's re-evaluation) count in the totals only. In process, over
the fakes of ralph.testing, with a judge-like check that reports its calls on its outcome
(the seam the real JudgeCheck uses: `CheckOutcome.calls`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ralph import schemas
from ralph.analyze.stats import analysis_json, analyze
from ralph.config import CheckSpec
from ralph.evaluators.base import CheckOutcome, OutputCallback
from ralph.memory.state import LoopState
from ralph.records import CheckResult, ModelCall
from ralph.testing import Crash, FakeChat, FakeCheck, Loop, Step, fake_evaluator, make_loop

REFLECTION = json.dumps(
    {
        "reflection_text": "I wrote a weak README: the judge wants a usage example.",
        "credit_assignment": {"root_cause": "no example", "failure_category": "other"},
    }
)


class CallingJudge(FakeCheck):
    """A judge-like check: its score is the number in score.txt; judging a tree that has one
    asks "the model" once, at the tokens and cost of the next of `calls` (the last one again
    when they run out); without the file there is nothing to judge and no call."""

    def __init__(self, *calls: ModelCall) -> None:
        self.spec = CheckSpec("judge", "", "judge", threshold=0.9)
        self.queue = list(calls)
        self.calls = 0

    def run(
        self,
        cwd: Path,
        *,
        baseline_errors: int | None = None,
        on_output: OutputCallback | None = None,
    ) -> CheckOutcome:
        path = cwd / "score.txt"
        if not path.exists():
            return CheckOutcome(self.spec, CheckResult(self.spec.name, "fail", 1))
        score = float(path.read_text())
        status = "pass" if score >= 0.9 else "fail"
        outcome = CheckOutcome(self.spec, CheckResult(self.spec.name, status, 0), score=score)
        outcome.calls = [self.queue.pop(0) if len(self.queue) > 1 else self.queue[0]]
        self.calls += 1
        return outcome


def judged(
    root: Path,
    scores: dict[int, str],
    call: ModelCall | list[ModelCall],
    *,
    actor: tuple[tuple[int | None, int | None], float | None] = ((1000, 200), 0.4),
    chat: FakeChat | None = None,
    **settings: Any,
) -> tuple[Loop, CallingJudge]:
    tokens, cost = actor
    plan = {
        n: Step(write={"score.txt": v}, tokens=tokens, cost_usd=cost) for n, v in scores.items()
    }
    judge = CallingJudge(*(call if isinstance(call, list) else [call]))
    loop = make_loop(root, plan, chat=chat, evaluator=fake_evaluator(judge), **settings)
    loop.settings.checks = [judge.spec]
    return loop, judge


def usages(loop: Loop) -> list[dict[str, Any]]:
    found = []
    for _, path in loop.store.record_paths("ralph-fake-1"):
        data = json.loads(path.read_text())
        assert schemas.errors(schemas.RECORD, data) == [], path
        found.append(data["ralph"]["usage"])
    return found


def saved(loop: Loop) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(loop.store.state_path("ralph-fake-1").read_text())
    assert schemas.errors(schemas.LOOP_STATE, data) == []
    return data


def test_every_record_and_the_totals_count_the_judge_with_the_actor_and_the_reflector(
    tmp_path: Path,
) -> None:
    chat = FakeChat(default=REFLECTION, tokens=(10, 10), cost_usd=0.01)
    loop, _ = judged(tmp_path, {1: "0.5", 2: "0.95"}, ModelCall(100, 20, 0.05), chat=chat)
    result = loop.start()
    assert (result.stop_reason, result.iterations) == ("success", 2)
    first, second = usages(loop)
    assert (first["evaluator_tokens_in"], first["evaluator_tokens_out"]) == (100, 20)
    assert first["cost_usd"] == 0.46  # actor 0.4 + judge 0.05 + reflector 0.01
    assert (second["evaluator_tokens_in"], second["cost_usd"]) == (100, 0.45)  # no reflection
    totals = {"tokens_in": 2210, "tokens_out": 450, "cost_usd": 0.91}
    assert {k: saved(loop)["usage"][k] for k in totals} == totals
    assert {k: result.usage[k] for k in totals} == totals
    assert "unrecorded_calls" not in saved(loop)["usage"]  # every call is in a record
    (summary,) = analysis_json(analyze(loop.store))["loops"]  # `ralph analyze`: the records
    assert (summary["tokens"], summary["cost_usd"]) == (2660, 0.91)


def test_a_judge_call_of_unknown_cost_makes_the_cost_unknown_and_no_tokens_stay_unknown(
    tmp_path: Path,
) -> None:
    calls = ModelCall(None, None, None)
    loop, _ = judged(tmp_path, {1: "0.5", 2: "0.95"}, calls, budget_usd=10.0)
    assert loop.start().stop_reason == "success"
    for usage in usages(loop):
        assert usage["cost_usd"] is None  # the actor's 0.4 is known, the judge's part is not
        assert "evaluator_tokens_in" not in usage and "evaluator_tokens_out" not in usage
    assert saved(loop)["usage"]["tokens_in"] == 2000  # the actor's alone, never a made-up 0
    assert saved(loop)["usage"]["cost_usd"] is None
    assert loop.reporter.noted("iteration 1: cost unknown: --budget-usd cannot hold")


def test_a_token_budget_smaller_than_the_judges_spending_stops_the_loop(tmp_path: Path) -> None:
    """The actor reports no tokens and the reflector is the heuristic: only the judge spends."""
    scores = {n: "0.5" for n in range(1, 6)}
    loop, _ = judged(
        tmp_path, scores, ModelCall(1000, 600, None), actor=((None, None), None), max_tokens=1500
    )
    result = loop.start()
    assert (result.stop_reason, result.exit_code, result.iterations) == ("budget", 3, 1)
    assert "1,600" in result.message or "1600" in result.message
    assert (result.usage["tokens_in"], result.usage["tokens_out"]) == (1000, 600)


def test_a_money_budget_counts_the_judges_cost(tmp_path: Path) -> None:
    scores = {n: "0.5" for n in range(1, 6)}
    loop, _ = judged(tmp_path, scores, ModelCall(10, 10, 0.3), actor=((1, 1), 0.0), budget_usd=0.5)
    result = loop.start()
    assert (result.stop_reason, result.iterations, result.usage["cost_usd"]) == ("budget", 2, 0.6)


def test_the_baseline_judges_calls_count_in_the_totals_in_no_record(tmp_path: Path) -> None:
    """A tree that has something to judge at the start (a dirty tree): the baseline asks the
    judge, its tokens and cost count in state.json's usage, not in record 1."""
    loop, judge = judged(tmp_path, {1: "0.95"}, ModelCall(100, 20, 0.05))
    (tmp_path / "score.txt").write_text("0.5")
    result = loop.start()
    assert (result.stop_reason, result.iterations, judge.calls) == ("success", 1, 2)
    (record,) = usages(loop)
    assert (record["evaluator_tokens_in"], record["cost_usd"]) == (100, 0.45)
    usage = saved(loop)["usage"]
    assert (usage["tokens_in"], usage["tokens_out"]) == (1200, 240)
    assert usage["cost_usd"] == 0.5  # the baseline's 0.05 is kept, not replaced by record 1's
    assert usage["unrecorded_calls"] == 1


def test_a_baseline_call_that_reports_nothing_keeps_the_loops_cost_unknown(
    tmp_path: Path,
) -> None:
    """Totals with nothing known look like totals before anything was counted: the first
    record's known cost must not become the loop's (`unrecorded_calls` tells them apart)."""
    calls = [ModelCall(None, None, None), ModelCall(100, 20, 0.05)]
    loop, _ = judged(tmp_path, {1: "0.95"}, calls)
    (tmp_path / "score.txt").write_text("0.5")
    assert loop.start().stop_reason == "success"
    assert usages(loop)[0]["cost_usd"] == 0.45  # record 1's cost is known
    state = loop.state()
    assert state.usage.unrecorded_calls == 1 and state.usage.cost_usd is None
    assert LoopState.from_json(state.to_json()).usage == state.usage  # read back the same


def test_already_green_at_the_baseline_still_counts_the_judges_calls(tmp_path: Path) -> None:
    loop, _ = judged(tmp_path, {}, ModelCall(100, 20, 0.05))
    (tmp_path / "score.txt").write_text("0.95")
    result = loop.start()
    assert (result.stop_reason, result.iterations) == ("already_green", 0)
    assert (result.usage["tokens_in"], result.usage["cost_usd"]) == (100, 0.05)


def test_a_resumes_re_evaluation_counts_in_the_totals(tmp_path: Path) -> None:
    plan = {1: "0.5", 2: "0.6"}
    loop, judge = judged(tmp_path, plan, ModelCall(100, 20, 0.05))
    loop.actor.plan[2] = Step(write={"score.txt": "0.6"}, raises=Crash())
    with pytest.raises(Crash):
        loop.start()
    assert loop.state().usage.cost_usd == 0.45  # iteration 1 (its reflection: the heuristic)
    loop.actor.plan[2] = Step(write={"score.txt": "0.95"}, tokens=(1000, 200), cost_usd=0.4)
    result = loop.again().runner.resume(loop.state())
    assert (result.stop_reason, judge.calls) == ("success", 3)  # 1, the resume's, 2
    usage = saved(loop)["usage"]
    assert (usage["tokens_in"], usage["cost_usd"], usage["unrecorded_calls"]) == (2300, 0.95, 1)
    assert sum(u["evaluator_tokens_in"] for u in usages(loop)) == 200  # the records: 1 and 2
