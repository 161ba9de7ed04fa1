"""The small project the fakes play: `calc.py` in four versions (`VERSIONS`), its four tests
(`TESTS`, passing by version: `PASSING`), the actor that writes a version per iteration
(`FakeActor`, playing a plan of `Step`s) and the check that runs the tests in process
(`FakeTests`, on `FakeCheck`, judged by the real suite: `fake_evaluator`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ralph.actors.base import ActorContext, ActorResult
from ralph.config import CheckSpec
from ralph.evaluators.base import CheckOutcome, OutputCallback
from ralph.evaluators.suite import CheckSuite
from ralph.records import (
    CheckResult,
    CheckStatus,
    Diagnostic,
    Metrics,
)
from ralph.usage_limits import UsageLimit, UsageLimited

VERSIONS = {
    "zero": "def f(x: int) -> int:\n    return 0\n",
    "half": "def f(x: int) -> int:\n    return x if x < 3 else 0\n",
    "partial": "def f(x: int) -> int:\n    return x\n",
    "full": "def f(x: int) -> int:\n    return abs(x)\n",
}
TESTS = ("test_one", "test_two", "test_three", "test_negative")
TEST_FILE = "tests/test_calc.py"  # where FakeTests says its tests live
TEST_TEXT = "from calc import f\n\n\ndef test_one():\n    assert f(1) == 1\n"
WEAKENED = "pytest.skip"  # in TEST_FILE, every test of FakeTests passes: a test edit that cheats
PASSING = {  # which of TESTS each version of calc.py passes
    "zero": (),
    "half": ("test_one", "test_two"),
    "partial": ("test_one", "test_two", "test_three"),
    "full": TESTS,
}


# -- Actor ------------------------------------------------------------------------------------


@dataclass
class Step:
    """What the fake actor does in one iteration."""

    version: str | None = None  # the calc.py to write (a key of VERSIONS)
    write: Mapping[str, str] = field(default_factory=dict)  # more files: path -> text
    needs: tuple[str, ...] = ()  # texts the prompt must hold, else it does `otherwise`
    otherwise: Step | None = None
    summary: str = "done"
    tokens: tuple[int | None, int | None] = (None, None)
    cost_usd: float | None = None
    raises: BaseException | None = None  # after writing: Ctrl-C, a crash, an abort
    before: Any = None  # called with the workdir first (say, to request an abort)


def write(version: str, **more: Any) -> Step:
    return Step(version=version, **more)


class Crash(BaseException):
    """Stands in for kill -9: nothing in the loop catches it, nothing is saved after it."""


class FakeActor:
    """Plays `plan` (iteration number or "default" -> Step) and keeps every prompt it got."""

    name = "fake"

    def __init__(self, plan: Mapping[int | str, Step] | None = None) -> None:
        self.plan = dict(plan or {})
        # usage limits an iteration's attempts meet, one per attempt, after writing its files
        self.limits: dict[int, list[UsageLimit]] = {}
        self.prompts: dict[int, str] = {}
        self.before: dict[int, str] = {}  # calc.py as each attempt found it

    def preflight(self) -> None:
        return None

    def chat_client(self) -> None:
        return None

    def act(self, prompt: str, ctx: ActorContext) -> ActorResult:
        self.prompts[ctx.iteration] = prompt
        calc = ctx.workdir / "calc.py"
        self.before[ctx.iteration] = calc.read_text() if calc.exists() else ""
        step = self.plan.get(ctx.iteration) or self.plan.get("default") or Step()
        if step.needs and not all(text in prompt for text in step.needs):
            step = step.otherwise or Step()
        if step.before is not None:
            step.before(ctx.workdir)
        files = dict(step.write)
        if step.version is not None:
            files["calc.py"] = VERSIONS[step.version]
        for name, text in files.items():
            path = ctx.workdir / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        if self.limits.get(ctx.iteration):
            raise UsageLimited(self.limits[ctx.iteration].pop(0))
        if step.raises is not None:
            raise step.raises
        return ActorResult(
            output=step.summary,
            exit_code=0,
            duration_ms=1,
            tokens_in=step.tokens[0],
            tokens_out=step.tokens[1],
            cost_usd=step.cost_usd,
            summary=step.summary,
        )


# -- Evaluator --------------------------------------------------------------------------------


class FakeCheck:
    """A check run in process: subclass it and write `run`. Nothing to install (`tool` is the
    shell) and nothing to verify before a loop (`preflight`)."""

    def __init__(self, name: str = "tests", parser: str = "pytest") -> None:
        self.spec = CheckSpec(name, f"fake-{name}", parser)

    def tool(self) -> str:
        return "sh"

    def preflight(self) -> None:
        return None

    def run(
        self,
        cwd: Path,
        *,
        baseline_errors: int | None = None,
        on_output: OutputCallback | None = None,
    ) -> CheckOutcome:
        raise NotImplementedError


class FakeTests(FakeCheck):
    """A pytest-like check of calc.py, in process: each test passes or fails by its version."""

    def __init__(self, name: str = "tests") -> None:
        super().__init__(name)
        self.spec = CheckSpec(name, "fake-tests", "pytest")
        self.runs = 0

    def run(
        self,
        cwd: Path,
        *,
        baseline_errors: int | None = None,
        on_output: OutputCallback | None = None,
    ) -> CheckOutcome:
        self.runs += 1
        calc = cwd / "calc.py"
        text = calc.read_text() if calc.exists() else ""
        version = next((v for v, t in VERSIONS.items() if t == text), None)
        passing = set(PASSING.get(version or "", ()))
        tests = cwd / TEST_FILE
        if tests.exists() and WEAKENED in tests.read_text():  # an agent "fixed" the tests
            passing = set(TESTS)
        errors = [
            Diagnostic(
                type="test_failure",
                message=f"assert f(...) == ...: {test} failed",
                file=TEST_FILE,
                line=4 + 4 * n,
                rule=f"{TEST_FILE}::{test}",
            )
            for n, test in enumerate(TESTS)
            if test not in passing
        ]
        status: CheckStatus = "fail" if errors else "pass"
        return CheckOutcome(
            spec=self.spec,
            result=CheckResult(self.spec.name, status, 1 if errors else 0, duration_ms=1),
            errors=errors,
            metrics=Metrics(len(passing), len(errors), len(TESTS)),
            score=len(passing) / len(TESTS),
            passed_tests={f"{TEST_FILE}::{t}" for t in passing},
        )


def fake_evaluator(*checks: Any) -> CheckSuite:
    """The real suite (judging, reward, roles) over in-process checks."""
    return CheckSuite.from_checks(list(checks) or [FakeTests()])
