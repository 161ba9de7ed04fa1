"""The `judge` check (Self-Refine): parsing, repair once, threshold, the stop rules, and whole
loops against the loopback fake provider with a `cmd:` agent that follows a plan."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ralph.config import CheckSpec, load, parse_check
from ralph.evaluators.base import JudgeContext
from ralph.evaluators.judge import JudgeCheck, parse_verdict
from ralph.evaluators.suite import CheckSuite
from ralph.loop.policy import Attempt, Spend, StopPolicy
from ralph.providers.registry import make_client
from ralph.reflection.reflector import ModelReflector

from .conftest import RunCli
from .fakes.calc_project import git, make_calc_repo
from .fakes.provider_server import FakeProvider

AGENT = r"""
import json, os
from pathlib import Path
n = os.environ["RALPH_ITERATION"]
seen = Path(os.environ["SEEN_DIR"])
(seen / f"prompt-{n}.md").write_text(Path(os.environ["RALPH_PROMPT_FILE"]).read_text())
for path, text in json.loads(Path(os.environ["PLAN"]).read_text()).get(n, {}).items():
    Path(path).write_text(text)
print("done")
"""
TESTS = (
    "from calc import absolute\n\n\ndef test_negative() -> None:\n    assert absolute(-3) == 3\n"
)
FIXED = "def absolute(x: int) -> int:\n    return -x if x < 0 else x\n"


def verdict(overall: float, *issues: dict[str, Any], **scores: float) -> str:
    return json.dumps(
        {"scores": scores, "overall": overall, "issues": list(issues), "suggestions": ["do it"]}
    )


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProvider]:
    with FakeProvider(default_text=verdict(9)) as server:
        for name, value in server.environ().items():
            monkeypatch.setenv(name, value)
        yield server


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = make_calc_repo(tmp_path / "repo", calc=FIXED, tests=TESTS, monkeypatch=monkeypatch)
    tools = tmp_path / "tools"
    (tools / "seen").mkdir(parents=True)
    (tools / "agent.py").write_text(AGENT)
    monkeypatch.setenv("SEEN_DIR", str(tools / "seen"))
    monkeypatch.setenv("PLAN", str(tools / "plan.json"))
    monkeypatch.setenv("CI", "true")
    return root


def configure(root: Path, plan: dict[str, dict[str, str]], *checks: dict[str, Any]) -> None:
    Path(os.environ["PLAN"]).write_text(json.dumps(plan))
    import yaml

    (root / ".aiwg/ralph").mkdir(parents=True, exist_ok=True)
    (root / ".aiwg/ralph/config.yaml").write_text(yaml.safe_dump({"checks": list(checks)}))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "ralph config")


JUDGE = {"name": "review", "parser": "judge", "criteria": "a README", "model": "openai:fake-model"}


def run(ralph: RunCli, root: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    actor = f"cmd:{sys.executable} {Path(os.environ['PLAN']).parent / 'agent.py'}"
    args = ["run", "write a README for calc", "--actor", actor, "--json", "--reflector"]
    result = ralph(*args, "heuristic", *extra, cwd=root)
    assert result.out.strip(), result.err
    return result.code, json.loads(result.out)


def records(root: Path, loop_id: str) -> list[dict[str, Any]]:
    folder = root / ".aiwg/ralph/reflections" / loop_id
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


def seen(name: str) -> str:
    return (Path(os.environ["SEEN_DIR"]) / name).read_text()


# --- configuration and parsing -------------------------------------------------------------


def test_check_flag_and_config_make_judge_specs(tmp_path: Path) -> None:
    spec = parse_check("judge:the README explains every function")
    assert (spec.name, spec.parser, spec.criteria) == (
        "judge",
        "judge",
        "the README explains every function",
    )
    (tmp_path / ".aiwg/ralph").mkdir(parents=True)
    (tmp_path / ".aiwg/ralph/config.yaml").write_text(
        "checks:\n  - {name: docs, parser: judge, criteria: clear, model: 'openai:m', "
        "threshold: 7, dimensions: [clarity, accuracy]}\n"
    )
    (docs,) = load(tmp_path, environ={}).checks
    assert (docs.threshold, docs.dimensions, docs.model) == (7, ["clarity", "accuracy"], "openai:m")
    (tmp_path / ".aiwg/ralph/config.yaml").write_text(
        "checks:\n  - {name: docs, parser: judge, threshold: 11}\n"
    )
    from ralph.errors import ConfigError

    with pytest.raises(ConfigError, match="threshold"):
        load(tmp_path, environ={})


def test_parse_verdict_coerces_scores_and_issues_and_rejects_what_it_cannot_read() -> None:
    answer, problems = parse_verdict(
        'Here: {"scores": {"clarity": "7/10"}, "overall": "6", '
        '"issues": ["vague", {"file": "README.md:4", "message": "wrong name"}]}'
    )
    assert problems == [] and answer is not None
    assert answer["overall"] == 6.0 and answer["scores"] == {"clarity": 7.0}
    assert answer["issues"][1] == {"file": "README.md", "line": 4, "message": "wrong name"}
    assert parse_verdict('{"scores": {"a": 4, "b": 8}}')[0] == {
        "scores": {"a": 4, "b": 8},
        "overall": 6.0,
    }
    assert parse_verdict("no json")[1] == ["the answer contains no JSON object"]
    assert parse_verdict('{"overall": 42}')[0] is None


# --- the check on its own -----------------------------------------------------------------


def judge_check(fake: FakeProvider, **spec: Any) -> JudgeCheck:
    context = JudgeContext("write a README", make_client("openai:fake-model"))
    return JudgeCheck(
        CheckSpec("review", "", "judge", criteria="a README", **spec), context=context
    )


def test_passes_at_the_threshold_and_fails_below_with_issues_as_diagnostics(
    project: Path, fake: FakeProvider
) -> None:
    check = judge_check(fake, threshold=7)
    first = check.run(project)  # no change yet: nothing to judge, and no model call
    assert first.result.status == "fail" and "nothing to judge" in first.errors[0].message
    assert fake.chat_requests == []
    (project / "README.md").write_text("# calc\n")
    fake.answers(
        verdict(7, clarity=7), verdict(6, {"file": "README.md", "line": 1, "message": "terse"})
    )
    passed = check.run(project)
    assert passed.passed and passed.score == 0.7 and passed.errors == []
    prompt = fake.chat_requests[0].prompt
    assert "write a README" in prompt and "a README" in prompt and "+# calc" in prompt
    failed = check.run(project)
    assert failed.result.status == "fail" and failed.score == 0.6
    assert (failed.errors[0].file, failed.errors[0].line, failed.errors[0].message) == (
        "README.md",
        1,
        "terse",
    )
    assert "scored 6/10 (needs 7)" in failed.errors[-1].message


def test_a_malformed_answer_is_repaired_once_then_the_check_errors_never_passes(
    project: Path, fake: FakeProvider
) -> None:
    (project / "README.md").write_text("# calc\n")
    check = judge_check(fake)
    fake.answers("I like it", verdict(9))
    assert check.run(project).passed
    assert "could not be used as the verdict" in fake.chat_requests[1].prompt
    fake.answers("still prose", '{"overall": "great"}')
    broken = check.run(project)
    assert broken.result.status == "error" and not broken.passed
    assert "invalid after one repair" in broken.errors[0].message


def test_each_run_carries_its_model_calls_a_repair_and_a_failure_included(
    project: Path, fake: FakeProvider
) -> None:
    check = judge_check(fake)
    assert check.run(project).calls == []  # nothing to judge: no call
    (project / "README.md").write_text("# calc\n")
    fake.script(text="I like it", tokens_in=300, tokens_out=7)
    fake.script(text=verdict(9), tokens_in=320, tokens_out=40)
    repaired = check.run(project)
    assert repaired.passed and repaired.calls == [(300, 7, None), (320, 40, None)]
    fake.script(text=verdict(9), usage=False)  # tokens nobody reported stay unknown
    assert check.run(project).calls == [(None, None, None)]
    fake.script(text="prose", tokens_in=50, tokens_out=5)
    fake.script(status=400, message="bad request")
    failed = check.run(project)
    assert failed.result.status == "error" and failed.calls == [(50, 5, None)]


def test_without_a_model_the_judge_reports_an_error(project: Path) -> None:
    (project / "README.md").write_text("# calc\n")
    outcome = JudgeCheck(CheckSpec("review", "", "judge")).run(project)
    assert outcome.result.status == "error" and "no model" in outcome.errors[0].message


def test_a_judge_never_overrides_a_failing_test(project: Path, fake: FakeProvider) -> None:
    (project / "calc.py").write_text("def absolute(x: int) -> int:\n    return x\n")
    suite = CheckSuite(
        [
            CheckSpec("tests", f"{sys.executable} -m pytest -q", "pytest"),
            CheckSpec("review", "", "judge"),
        ],
        judging=JudgeContext("t", make_client("openai:fake-model"), base_commit="HEAD~0"),
    )
    evaluation = suite.evaluate(project)
    review = next(o for o in evaluation.outcomes if o.spec.name == "review")
    assert review.passed and not evaluation.passed


# --- Self-Refine's stop rules ---------------------------------------------------------------


def decide(*rewards: float) -> tuple[str, str]:
    history = [Attempt(i + 1, r, False, "f") for i, r in enumerate(rewards)]
    decision = StopPolicy(max_iterations=10, refine=True).decide(history, None, Spend())
    return decision.action, decision.reason


def test_stop_rules_diminishing_returns_and_degradation_with_their_figures() -> None:
    assert decide(0.5, 0.6)[0] == "continue"
    assert decide(0.5, 0.6, 0.7)[0] == "continue"  # +40 % over two iterations
    action, reason = decide(0.6, 0.61, 0.62)
    assert action == "diminishing" and "6.0 -> 6.2 over iterations 1-3 (+3.3%, under 5%)" in reason
    action, reason = decide(0.6, 0.7, 0.5)
    assert action == "degraded" and "fell to 5.0 at iteration 3 (best 7.0 at iteration 2" in reason
    plain = StopPolicy(max_iterations=10).decide(
        [Attempt(1, 0.6, False, "a"), Attempt(2, 0.5, False, "b")], None, Spend()
    )
    assert plain.action == "continue"  # only a loop whose only target is a judge


# --- whole loops ------------------------------------------------------------------------------


def test_loop_issues_reach_the_next_prompt_and_it_stops_at_the_threshold(
    ralph: RunCli, project: Path, fake: FakeProvider
) -> None:
    configure(
        project, {"1": {"README.md": "# calc\n"}, "2": {"README.md": "# calc\nabsolute\n"}}, JUDGE
    )
    issue = {"file": "README.md", "line": 1, "message": "MARKER-no-usage-example"}
    fake.answers(verdict(5, issue, clarity=5), verdict(8))
    code, summary = run(ralph, project)
    assert code == 0 and summary["stop_reason"] == "success" and summary["iterations"] == 2
    assert summary["targets"] == ["review"]
    prompt = seen("prompt-2.md")
    assert "MARKER-no-usage-example" in prompt and "README.md:1" in prompt
    first = records(project, summary["loop_id"])[0]
    assert first["evaluator_output"]["reward_signal"] == 0.5


def test_loop_stops_on_diminishing_returns(
    ralph: RunCli, project: Path, fake: FakeProvider
) -> None:
    steps = {str(n): {"README.md": f"# calc {n}\n"} for n in range(1, 6)}
    configure(project, steps, JUDGE)
    fake.answers(verdict(6), verdict(6.1), verdict(6.2))
    code, summary = run(ralph, project, "--max-iterations", "5")
    assert code == 1 and summary["stop_reason"] == "diminishing" and summary["iterations"] == 3


def test_loop_stops_on_degradation_and_keeps_the_best_iteration(
    ralph: RunCli, project: Path, fake: FakeProvider
) -> None:
    configure(project, {"1": {"README.md": "# good\n"}, "2": {"README.md": "# worse\n"}}, JUDGE)
    fake.answers(verdict(6), verdict(4))
    code, summary = run(ralph, project, "--max-iterations", "5")
    assert code == 1 and summary["stop_reason"] == "degraded" and summary["iterations"] == 2
    assert summary["best_iteration"] == 1
    assert (project / "README.md").read_text() == "# good\n"


def test_loop_counts_the_judges_tokens_in_every_record_and_in_the_state(
    ralph: RunCli, project: Path, fake: FakeProvider
) -> None:
    """A `cmd:` actor and the heuristic reflector report no tokens: what the records and the
    state count is the judge's, one call in iteration 1 and an answer repaired in 2."""
    configure(
        project, {"1": {"README.md": "# calc\n"}, "2": {"README.md": "# calc\nabsolute\n"}}, JUDGE
    )
    fake.script(text=verdict(5), tokens_in=300, tokens_out=40)
    fake.script(text="prose", tokens_in=320, tokens_out=7)
    fake.script(text=verdict(9), tokens_in=350, tokens_out=50)
    code, summary = run(ralph, project)
    assert code == 0 and summary["iterations"] == 2
    usages = [r["ralph"]["usage"] for r in records(project, summary["loop_id"])]
    assert [(u["evaluator_tokens_in"], u["evaluator_tokens_out"]) for u in usages] == [
        (300, 40),
        (670, 57),
    ]
    assert all(u["actor_tokens_in"] is None and u["cost_usd"] is None for u in usages)
    state = json.loads(
        (project / ".aiwg/ralph/loops" / summary["loop_id"] / "state.json").read_text()
    )
    for usage in (state["usage"], summary["usage"]):
        assert (usage["tokens_in"], usage["tokens_out"], usage["cost_usd"]) == (970, 97, None)
    status = ralph("status", summary["loop_id"], cwd=project)
    assert "970 in / 97 out tokens" in status.out


def test_a_token_budget_smaller_than_the_judges_spending_stops_the_loop(
    ralph: RunCli, project: Path, fake: FakeProvider
) -> None:
    steps = {str(n): {"README.md": f"# calc {n}\n"} for n in range(1, 6)}
    configure(project, steps, JUDGE)
    fake.script(text=verdict(5), tokens_in=800, tokens_out=300)
    code, summary = run(ralph, project, "--max-tokens", "1000", "--max-iterations", "5")
    assert (code, summary["stop_reason"], summary["iterations"]) == (3, "budget", 1)
    assert summary["usage"]["tokens_in"] + summary["usage"]["tokens_out"] == 1100


def test_a_loop_builds_its_judges_with_the_task_the_reflectors_model_and_the_base_commit(
    tmp_path: Path,
) -> None:
    """What only the loop knows is given when the judge is built (build_parts), not later."""
    from ralph.config import Settings
    from ralph.loop.assembly import build_parts

    settings = Settings(
        checks=[CheckSpec("review", "", "judge")],
        actor="cmd:true",
        reflector="openai:fake-model",
        no_git=True,
    )
    env = {"OPENAI_API_KEY": "k", "PATH": os.environ.get("PATH", "")}
    parts = build_parts(settings, tmp_path, env, task="write a README", base_commit="abc123")
    judge = parts.evaluator.checks[0]
    assert isinstance(judge, JudgeCheck)
    assert (judge.task, judge.base_commit) == ("write a README", "abc123")
    assert isinstance(parts.reflector, ModelReflector)  # the model it asks is the judge's too
    assert judge.client is parts.reflector.client and judge.client is not None


def test_a_judges_log_is_its_runs_answers_on_the_outcome(project: Path, fake: FakeProvider) -> None:
    (project / "README.md").write_text("# calc\n")
    check = judge_check(fake)  # the provider answers 9/10
    first = check.run(project)
    second = check.run(project)
    assert first.log is not None and first.log.count("--- judge answer ---") == 1
    assert second.log is not None and second.log.count("--- judge answer ---") == 1
