"""LoopRunner in process, over the fakes of ralph.testing: the loop's logic (when it stops,
what it remembers, what the next prompt says, rollback, resume, abort) without an agent
process, a pytest run or git. tests/test_loop.py keeps the end-to-end runs of `ralph run`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ralph import schemas
from ralph.config import CheckSpec
from ralph.errors import PreflightError, ProviderError
from ralph.evaluators.base import CheckOutcome, OutputCallback
from ralph.evaluators.shell import ShellCheck
from ralph.loop.result import EXIT_CODES
from ralph.memory.store import MemoryStore
from ralph.records import CheckResult
from ralph.testing import (
    VERSIONS,
    Crash,
    FakeChat,
    FakeCheck,
    FakeTests,
    Loop,
    Step,
    fake_evaluator,
    make_loop,
    write,
)

from .conftest import RunCli

REFLECTION = {
    "reflection_text": "I returned x unchanged, so f(-1) gives -1: calc.py ignores the sign. "
    "MARKER-reflection-text",
    "credit_assignment": {
        "failing_action_indices": [0],
        "root_cause": "calc.py returns x instead of its absolute value",
        "failure_category": "edge_case_miss",
    },
    "causal_reasoning": "test_negative feeds -1 and expects 1.",
    "actionable_insights": ["Return abs(x) in calc.py:2 MARKER-insight"],
    "lessons_learned": ["Check negative inputs"],
    "confidence": 0.9,
}
LOOP = "ralph-fake-1"


def records_on_disk(loop: Loop) -> list[dict[str, Any]]:
    store = MemoryStore(loop.root)
    found = []
    for _, path in store.record_paths(LOOP):
        data = json.loads(path.read_text())
        assert schemas.errors(schemas.RECORD, data) == [], path
        found.append(data)
    return found


# success and what the next prompt says ---------------------------------------------------------


def test_success_at_iteration_two_because_the_reflection_reached_the_prompt(
    tmp_path: Path,
) -> None:
    second = write("full", needs=("MARKER-reflection-text", "MARKER-insight"))
    second.otherwise = write("partial")
    loop = make_loop(
        tmp_path, {1: write("partial"), 2: second}, chat=FakeChat(json.dumps(REFLECTION))
    )
    result = loop.start()
    assert (result.status, result.stop_reason, result.exit_code) == ("completed", "success", 0)
    assert result.iterations == 2 and result.reward_history == [0.75, 1.0]
    assert "MARKER" not in loop.actor.prompts[1]
    assert REFLECTION["actionable_insights"][0] in loop.actor.prompts[2]
    records = records_on_disk(loop)
    assert [r["ralph"]["reflection_source"] for r in records] == ["llm", "success"]
    assert records[1]["memory_metadata"]["reflections_in_context"] == [1]
    assert loop.chat is not None and "test_negative" in loop.chat.requests[0][-1].content
    # committed before written: each record names its commit, the state knows them all
    messages = loop.workspace.messages
    assert messages[-1].startswith("ralph(fake-1): iteration 2 — tests pass\n")
    state = loop.state()
    assert state.git is not None and records[1]["ralph"]["git_commit"] == state.git.commit_of(2)
    assert state.status == "completed" and state.best_iteration == 2
    assert [d.action for d in loop.reporter.decisions] == ["continue", "success"]


def test_any_reflector_fits_the_loop_through_its_protocol(tmp_path: Path) -> None:
    """The loop holds a Reflector, not the model's class: a fake one's words reach the record
    and the next prompt, and it is asked once per failed attempt with its evaluation."""
    from ralph.testing import FakeReflector

    reflector = FakeReflector("MARKER-one: I ignored the sign.", "MARKER-two")
    plan = {1: write("half"), 2: write("partial"), 3: write("full")}
    loop = make_loop(tmp_path, plan, reflector=reflector)
    assert loop.start().exit_code == 0
    records = records_on_disk(loop)
    texts = [r["self_reflection"]["reflection_text"] for r in records]
    assert texts[:2] == ["MARKER-one: I ignored the sign.", "MARKER-two"]
    assert "MARKER-one" in loop.actor.prompts[2] and "MARKER-two" in loop.actor.prompts[3]
    assert [call["iteration"] for call in reflector.calls] == [1, 2]
    assert [call["evaluation"].passed for call in reflector.calls] == [False, False]
    assert "calc.py" in reflector.calls[0]["diff_summary"]


def test_the_first_prompt_names_what_the_baseline_found_failing(tmp_path: Path) -> None:
    loop = make_loop(tmp_path, {1: write("full")})
    assert loop.start().exit_code == 0
    first = loop.actor.prompts[1]
    assert "# Checks that fail right now" in first
    assert "tests/test_calc.py:" in first and "test_negative failed" in first
    assert loop.reporter.noted("targets (must end green): tests: 4 failing tests to fix")


def test_already_green_exits_0_without_calling_the_actor(tmp_path: Path) -> None:
    loop = make_loop(tmp_path, {"default": write("zero")}, calc="full")
    result = loop.start()
    assert (result.stop_reason, result.exit_code) == ("already_green", 0)
    assert result.message == (
        "every check passes already, so there is nothing for the loop to fix: "
        "name what must change with --check NAME or --test CMD, or use --strict"
    )
    assert loop.actor.prompts == {} and loop.state().status == "completed"
    assert loop.workspace.messages == []  # no branch was made


@pytest.mark.parametrize("args", [(), ("1",), ("--json",)])
def test_show_of_an_already_green_loop_says_it_ended_green_not_no_records_yet(
    ralph: RunCli, tmp_path: Path, args: tuple[str, ...]
) -> None:
    loop = make_loop(tmp_path, {"default": write("zero")}, calc="full")
    assert loop.start().stop_reason == "already_green"
    shown = ralph("reflections", "show", LOOP, *args, cwd=tmp_path)
    assert shown.code == 2
    assert shown.err.splitlines()[0] == (
        f"ralph: error: loop {LOOP} ended green before any attempt (already_green): every "
        "check passed, so there is no record to show"
    )


def test_window_policy_and_memory_tokens_reach_the_records_and_the_state(tmp_path: Path) -> None:
    plan = {1: write("half"), 2: write("partial")}
    loop = make_loop(tmp_path, plan, max_iterations=2, window_policy="fifo", memory_tokens=300)
    assert loop.start().exit_code == 1
    second = records_on_disk(loop)[1]["memory_metadata"]
    assert second["window_policy"] == "fifo" and second["reflections_in_context"] == [1]
    assert loop.state().settings.memory_tokens == 300


def test_omega_0_keeps_every_reflection_out_of_the_prompt(tmp_path: Path) -> None:
    loop = make_loop(tmp_path, {1: write("half"), 2: write("partial")}, max_iterations=2, omega=0)
    loop.start()
    assert "Reflections from your earlier attempts" not in loop.actor.prompts[2]
    assert records_on_disk(loop)[1]["memory_metadata"]["omega_capacity"] == 1


# stopping ------------------------------------------------------------------------------------


def test_max_iterations_stops_with_limit(tmp_path: Path) -> None:
    loop = make_loop(tmp_path, {1: write("half"), 2: write("partial")}, max_iterations=2)
    result = loop.start()
    assert (result.stop_reason, result.status, result.exit_code) == ("limit", "failed", 1)
    assert result.reward_history == [0.5, 0.75] and result.best_iteration == 2
    assert result.targets == ["tests"] and result.guards == []


def test_plateau_pivots_then_stops(tmp_path: Path) -> None:
    loop = make_loop(tmp_path, {"default": write("partial")}, patience=2, max_iterations=6)
    result = loop.start()
    assert (result.stop_reason, result.iterations, result.exit_code) == ("stalled", 3, 1)
    assert "Change your strategy" not in loop.actor.prompts[2]
    assert "Change your strategy" in loop.actor.prompts[3]


class FakeJudge(FakeCheck):
    """A judge-like check in process: its score (0..1) is the number in score.txt."""

    def __init__(self) -> None:
        self.spec = CheckSpec("judge", "", "judge", threshold=0.9)

    def run(
        self,
        cwd: Path,
        *,
        baseline_errors: int | None = None,
        on_output: OutputCallback | None = None,
    ) -> CheckOutcome:
        path = cwd / "score.txt"
        score = float(path.read_text()) if path.exists() else 0.1
        status = "pass" if score >= 0.9 else "fail"
        return CheckOutcome(self.spec, CheckResult(self.spec.name, status, 0), score=score)


def judged(tmp_path: Path, scores: list[str]) -> Loop:
    plan = {n: Step(write={"score.txt": s}) for n, s in enumerate(scores, 1)}
    loop = make_loop(tmp_path, plan, evaluator=fake_evaluator(FakeJudge()), max_iterations=6)
    loop.settings.checks = [FakeJudge().spec]  # the only target is a judge: Self-Refine's stops
    return loop


def test_a_judge_whose_score_falls_stops_as_degraded_and_keeps_the_best(tmp_path: Path) -> None:
    loop = judged(tmp_path, ["0.5", "0.7", "0.4"])
    result = loop.start()
    assert (result.stop_reason, result.exit_code) == ("degraded", 1)
    assert result.reward_history == [0.5, 0.7, 0.4]
    assert (tmp_path / "score.txt").read_text() == "0.7"  # the best iteration's tree
    assert loop.reporter.noted("restored the code of iteration 2")


def test_a_judge_that_hardly_improves_stops_as_diminishing(tmp_path: Path) -> None:
    result = judged(tmp_path, ["0.5", "0.51", "0.52"]).start()
    assert (result.stop_reason, result.iterations) == ("diminishing", 3)


def test_token_budget_stops_with_exit_3(tmp_path: Path) -> None:
    chat = FakeChat(default=json.dumps(REFLECTION), tokens=(900, 200))
    loop = make_loop(tmp_path, {"default": write("partial")}, chat=chat, max_tokens=1000)
    result = loop.start()
    assert (result.stop_reason, result.exit_code, result.iterations) == ("budget", 3, 1)
    assert result.usage["tokens_in"] == 900 and result.usage["tokens_out"] == 200
    assert EXIT_CODES["budget"] == 3


def test_money_budget_counts_the_actor_and_the_reflector(tmp_path: Path) -> None:
    chat = FakeChat(default=json.dumps(REFLECTION), cost_usd=0.1)
    step = write("partial", cost_usd=0.4)
    loop = make_loop(tmp_path, {"default": step}, chat=chat, budget_usd=1.0)
    result = loop.start()
    assert (result.stop_reason, result.iterations) == ("budget", 2)
    assert result.usage["cost_usd"] == 1.0
    assert [r["ralph"]["usage"]["cost_usd"] for r in records_on_disk(loop)] == [0.5, 0.5]


def test_an_unknown_part_makes_the_cost_unknown_and_says_the_budget_cannot_hold(
    tmp_path: Path,
) -> None:
    """The actor reports no cost, the reflector does: the iteration's cost is unknown, not
    the reflector's part alone (unknown stays unknown, in the record and the state)."""
    chat = FakeChat(default=json.dumps(REFLECTION), cost_usd=0.1)
    plan = {1: write("half"), 2: write("partial", cost_usd=0.2)}
    loop = make_loop(tmp_path, plan, chat=chat, max_iterations=2, budget_usd=5.0)
    result = loop.start()
    assert [r["ralph"]["usage"]["cost_usd"] for r in records_on_disk(loop)] == [None, 0.3]
    assert result.usage["cost_usd"] is None and loop.state().usage.cost_usd is None
    assert loop.reporter.noted("iteration 1: cost unknown: --budget-usd cannot hold")


def test_a_heuristic_reflection_costs_nothing_and_keeps_the_cost_known(tmp_path: Path) -> None:
    loop = make_loop(tmp_path, {"default": write("partial", cost_usd=0.25)}, max_iterations=2)
    result = loop.start()
    assert result.usage["cost_usd"] == 0.5
    assert [r["ralph"]["reflection_source"] for r in records_on_disk(loop)] == ["heuristic"] * 2


# rollback ------------------------------------------------------------------------------------


def test_a_worse_attempt_is_rolled_back_to_the_best_code(tmp_path: Path) -> None:
    loop = make_loop(tmp_path, {1: write("partial"), 2: write("half"), 3: Step()}, max_iterations=3)
    result = loop.start()
    assert result.reward_history == [0.75, 0.5, 0.75]
    assert loop.actor.before[3] == VERSIONS["partial"]
    assert loop.reporter.noted(
        "iteration 2: rolled back: fell to 0.50; restored the code of iteration 1"
    )
    assert "# Your last attempt was reverted" in loop.actor.prompts[3]
    assert "# Your last attempt was reverted" not in loop.actor.prompts[2]


def test_with_no_rollback_a_worse_attempt_is_kept_and_its_line_says_so(tmp_path: Path) -> None:
    """A worse attempt kept by --no-rollback (or by the rule) said nothing: its line now says
    kept, and why."""
    plan = {1: write("partial"), 2: write("half"), 3: Step()}
    loop = make_loop(tmp_path, plan, max_iterations=3, no_rollback=True)
    loop.start()
    assert loop.actor.before[3] == VERSIONS["half"]
    assert loop.reporter.noted("iteration 2: kept: fell to 0.50; --no-rollback keeps every")
    assert not loop.reporter.noted("rolled back")


def test_after_a_rollback_the_next_prompt_holds_the_reverted_diff(tmp_path: Path) -> None:
    """Attempt 1 breaks two passing tests and is rolled back: prompt 2 shows its change, under
    what it broke, so the agent does not make it again."""
    loop = make_loop(tmp_path, {1: write("zero"), 2: Step()}, calc="half", max_iterations=2)
    loop.start()
    assert loop.reporter.noted("iteration 1: rolled back: broke what worked before")
    assert loop.actor.before[2] == VERSIONS["half"]
    reverted = loop.actor.prompts[2].split("# Your last attempt was reverted")[1]
    caused, diff = reverted.split("The change of attempt 1 that was reverted")
    assert "test_one" in caused
    assert "-    return x if x < 3 else 0\n+    return 0" in diff.split("```")[1]


def test_no_rollback_keeps_the_regressed_code(tmp_path: Path) -> None:
    plan = {1: write("partial"), 2: write("half"), 3: Step()}
    loop = make_loop(tmp_path, plan, max_iterations=3, no_rollback=True)
    loop.start()
    assert loop.actor.before[3] == VERSIONS["half"]


def test_without_git_there_is_nothing_to_roll_back_and_no_commit(tmp_path: Path) -> None:
    plan = {1: write("partial"), 2: write("half"), 3: Step()}
    loop = make_loop(tmp_path, plan, max_iterations=3, git=False)
    loop.start()
    assert loop.actor.before[3] == VERSIONS["half"]
    assert loop.reporter.noted("not a git repository (or --no-git): no commits, no rollback")
    assert all("git_commit" not in r["ralph"] for r in records_on_disk(loop))
    assert loop.state().git is None


# interruptions -------------------------------------------------------------------------------


def test_a_crash_mid_attempt_resumes_from_the_last_saved_iteration(tmp_path: Path) -> None:
    loop = make_loop(tmp_path, {1: write("partial"), 2: write("half", raises=Crash())})
    with pytest.raises(Crash):
        loop.start()
    state = loop.state()
    assert (state.status, state.iteration) == ("running", 1)
    assert MemoryStore(tmp_path).effective_status(state) == "crashed"  # its lock is gone
    loop.actor.plan[2] = write("full")
    again = loop.again()
    result = again.runner.resume(state)
    assert (result.status, result.exit_code, result.reward_history) == ("completed", 0, [0.75, 1.0])
    assert loop.actor.before[2] == VERSIONS["partial"]  # the leftovers put aside, not kept
    assert loop.reporter.noted("leftovers of the interrupted attempt 2 put aside")
    assert loop.reporter.started == [False, True]
    assert "# Checks that fail right now" in loop.actor.prompts[2]  # re-evaluated on resume
    assert [r["iteration"] for r in records_on_disk(loop)] == [1, 2]


def test_ctrl_c_pauses_and_resume_finishes(tmp_path: Path) -> None:
    loop = make_loop(tmp_path, {1: write("partial"), 2: write("half", raises=KeyboardInterrupt())})
    paused = loop.start()
    assert (paused.status, paused.stop_reason, paused.exit_code) == ("paused", "interrupted", 130)
    assert paused.iterations == 1 and loop.state().status == "paused"
    loop.actor.plan[2] = write("full")
    resumed = loop.again().runner.resume(loop.state())
    assert resumed.exit_code == 0 and resumed.reward_history == [0.75, 1.0]


def test_abort_during_an_attempt_ends_the_loop_for_good(tmp_path: Path) -> None:
    def request_abort(workdir: Path) -> None:
        MemoryStore(workdir).abort_path(LOOP).write_text("requested by `ralph abort`\n")

    abort = Step(before=request_abort, raises=KeyboardInterrupt())  # as its SIGTERM would
    loop = make_loop(tmp_path, {1: write("partial"), 2: abort})
    result = loop.start()
    assert (result.status, result.exit_code, result.iterations) == ("aborted", 4, 1)
    assert loop.state().stop_reason == "aborted by user"
    with pytest.raises(PreflightError, match="aborted: nothing to resume"):
        loop.again().runner.resume(loop.state())


def test_abort_from_where_no_signal_reaches_ends_the_loop_before_its_next_attempt(
    tmp_path: Path,
) -> None:
    def request_abort(workdir: Path) -> None:
        MemoryStore(workdir).abort_path(LOOP).write_text("requested by `ralph abort`\n")

    loop = make_loop(tmp_path, {1: write("partial", before=request_abort)})
    result = loop.start()
    assert (result.status, result.exit_code, result.iterations) == ("aborted", 4, 1)
    assert 2 not in loop.actor.prompts


def test_abort_marks_a_stopped_loop_and_resume_refuses_it(ralph: RunCli, tmp_path: Path) -> None:
    loop = make_loop(tmp_path, {"default": write("partial")}, max_iterations=1)
    assert loop.start().exit_code == 1
    assert ralph("abort", LOOP, cwd=tmp_path).code == 0
    assert json.loads(ralph("status", "--json", cwd=tmp_path).out)["status"] == "aborted"
    again = ralph("resume", LOOP, cwd=tmp_path)
    assert again.code == 2 and "aborted" in again.err


# the reflector, the actor's side effects, refusals ---------------------------------------------


def test_malformed_reflection_is_repaired(tmp_path: Path) -> None:
    chat = FakeChat(
        "Sure! Here is my reflection: {not json at all",
        "```json\n" + json.dumps(REFLECTION) + "\n```",
    )
    loop = make_loop(tmp_path, {1: write("partial"), 2: write("full")}, chat=chat)
    assert loop.start().exit_code == 0
    first = records_on_disk(loop)[0]
    assert first["ralph"]["reflection_source"] == "repaired"
    assert first["self_reflection"]["reflection_text"] == REFLECTION["reflection_text"]
    assert first["ralph"]["usage"]["reflector_tokens_in"] == 20  # both calls counted


def test_reflector_failure_falls_back_to_heuristic(tmp_path: Path) -> None:
    chat = FakeChat(ProviderError("HTTP 401 from fake: invalid api key"))
    loop = make_loop(tmp_path, {1: write("partial"), 2: write("full")}, chat=chat)
    assert loop.start().exit_code == 0
    first = records_on_disk(loop)[0]
    assert first["ralph"]["reflection_source"] == "heuristic"
    assert "test_calc.py" in first["self_reflection"]["reflection_text"]
    assert loop.reporter.noted("used a heuristic reflection")


def test_records_the_actor_changed_are_put_back(tmp_path: Path) -> None:
    record = f".aiwg/ralph/reflections/{LOOP}/001.json"
    plan = {1: write("half"), 2: write("partial", write={record: "{}"})}
    loop = make_loop(tmp_path, plan, max_iterations=2)
    loop.start()
    assert records_on_disk(loop)[0]["iteration"] == 1
    assert loop.reporter.noted("the actor changed ralph's records (001.json): restored them")


def test_a_check_that_cannot_run_at_baseline_is_named_but_not_refused(tmp_path: Path) -> None:
    broken = ShellCheck(CheckSpec("sh", "sh -c 'exit 127'", "shell"), timeout=30)
    evaluator = fake_evaluator(FakeTests(), broken)
    plan = {1: write("full")}
    loop = make_loop(tmp_path, plan, evaluator=evaluator, max_iterations=1, named_checks=["sh"])
    result = loop.start()
    assert result.exit_code == 1 and result.iterations == 1  # never passes; the attempt ran
    warning = next(note for note in loop.reporter.notes if note.startswith("warning:"))
    assert "check 'sh' could not run on the untouched tree" in warning
    assert "exit code 127" in warning and "ralph check" in warning


def test_a_refused_tree_is_refused_before_any_check_runs(tmp_path: Path) -> None:
    tests = FakeTests()
    loop = make_loop(tmp_path, evaluator=fake_evaluator(tests))
    loop.workspace.refuse = "the working tree has uncommitted changes: calc.py"
    with pytest.raises(PreflightError, match="uncommitted changes"):
        loop.start()
    assert tests.runs == 0 and not MemoryStore(tmp_path).state_path(LOOP).exists()


def test_the_phases_come_in_the_cycles_order(tmp_path: Path) -> None:
    loop = make_loop(tmp_path, {1: write("partial"), 2: write("full")})
    loop.start()
    assert loop.reporter.phases == [
        (0, "baseline"),
        *[(1, p) for p in ("prompt", "act", "evaluate", "reflect")],
        *[(2, p) for p in ("prompt", "act", "evaluate")],  # a success needs no reflector
    ]
