"""Fakes for every seam of the loop, for tests of ralph and of its plugins (like httpx's
`MockTransport`): an Actor (`FakeActor`, playing a plan of `Step`s), a ChatClient
(`FakeChat`), a Check (`FakeTests`) judged by the real `CheckSuite` (`fake_evaluator`), an
Evaluator from a function (`MockEvaluator`), a Workspace (`FakeWorkspace`, git in memory) and
a Reporter (`RecordingReporter`); `make_loop` puts a `LoopRunner` together from them.

No agent process, no pytest run, no git: a test of the loop's logic runs in milliseconds and
sees every event. The project is a small `calc.py`: its four tests pass according to which
version of `f` the fake actor writes (0, 0.5, 0.75 or 1 as reward).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ralph.actors.base import ActorContext, ActorResult
from ralph.config import CheckSpec, Settings
from ralph.errors import PreflightError, RalphError
from ralph.evaluators.base import CheckOutcome, Evaluation, EvaluationRequest, OutputCallback
from ralph.evaluators.suite import CheckSuite
from ralph.loop.policy import Decision
from ralph.loop.result import LoopResult
from ralph.loop.runner import LoopRunner
from ralph.loop.steps import Parts
from ralph.memory.state import LoopState
from ralph.memory.store import MemoryStore
from ralph.providers.base import ChatResponse, Message
from ralph.records import (
    CheckResult,
    CheckStatus,
    Diagnostic,
    IterationRecord,
    Metrics,
)
from ralph.reflection.reflector import Reflector
from ralph.workspace.base import GitState
from ralph.workspace.snapshot import SnapshotWorkspace

__all__ = [
    "PASSING",
    "TESTS",
    "TEST_FILE",
    "TEST_TEXT",
    "VERSIONS",
    "WEAKENED",
    "Crash",
    "FakeActor",
    "FakeChat",
    "FakeCheck",
    "FakeTests",
    "FakeWorkspace",
    "Loop",
    "MockEvaluator",
    "RecordingReporter",
    "Step",
    "fake_evaluator",
    "make_loop",
    "write",
]

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


# -- ChatClient -------------------------------------------------------------------------------


class FakeChat:
    """Answers from a queue (an exception in it is raised), then `default`; keeps requests."""

    model = "fake-model"

    def __init__(
        self,
        *answers: str | BaseException,
        default: str = "{}",
        tokens: tuple[int | None, int | None] = (10, 10),
        cost_usd: float | None = 0.01,
    ) -> None:
        self.answers = list(answers)
        self.default = default
        self.tokens = tokens
        self.cost_usd = cost_usd
        self.requests: list[list[Message]] = []

    def chat(
        self, messages: list[Message], *, json_mode: bool = False, max_tokens: int | None = None
    ) -> ChatResponse:
        self.requests.append(list(messages))
        answer = self.answers.pop(0) if self.answers else self.default
        if isinstance(answer, BaseException):
            raise answer
        return ChatResponse(answer, self.model, *self.tokens, cost_usd=self.cost_usd)


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


class MockEvaluator:
    """An Evaluator from a function: `handler(request)` answers each request, which is kept
    (the seam is one call, `handle`; the whole contract is in evaluators/base.py)."""

    def __init__(self, handler: Callable[[EvaluationRequest], Evaluation]) -> None:
        self.handler = handler
        self.requests: list[EvaluationRequest] = []

    def preflight(self) -> None:
        return None

    def handle(self, request: EvaluationRequest) -> Evaluation:
        self.requests.append(request)
        return self.handler(request)


# -- Workspace --------------------------------------------------------------------------------


class FakeWorkspace(SnapshotWorkspace):
    """A git stand-in: a commit is a copy of the tree's files (memory, `.aiwg/`, left out).

    `changes()` is the snapshot workspace's; the lifecycle keeps a branch in memory."""

    def __init__(self, root: Path, *, refuse: str | None = None) -> None:
        super().__init__(root)
        self.refuse = refuse  # a preflight refusal, as for a dirty tree
        self.commits: dict[str, dict[str, bytes]] = {}
        self.messages: list[str] = []
        self.head: str | None = None
        self.restored: list[str] = []

    def _tree(self) -> dict[str, bytes]:
        return {
            path.relative_to(self.root).as_posix(): path.read_bytes()
            for path in sorted(self.root.rglob("*"))
            if path.is_file() and ".aiwg" not in path.relative_to(self.root).parts
        }

    def _commit(self, message: str) -> str:
        sha = hashlib.sha1(f"{len(self.messages)} {message}".encode()).hexdigest()
        self.commits[sha], self.head = self._tree(), sha
        self.messages.append(message)
        return sha

    def _checkout(self, commit: str) -> None:
        tree = self.commits[commit]
        for name in set(self._tree()) - set(tree):
            (self.root / name).unlink()
        for name, data in tree.items():
            (self.root / name).write_bytes(data)

    def preflight_loop(self, loop_id: str, *, allow_dirty: bool) -> None:
        if self.refuse:
            raise PreflightError(self.refuse, hint="commit or stash them first")

    def start_loop(self, loop_id: str, *, allow_dirty: bool) -> GitState | None:
        base = self._commit(f"start of {loop_id}")
        return GitState(f"ralph/{loop_id}", base, "main", base)

    def resume_loop(self, git: GitState | None, loop_id: str, iteration: int) -> list[str]:
        commit = git.commit_of(iteration) if git else None
        if commit is None or self._tree() == self.commits[commit]:
            return []
        self._checkout(commit)
        self.head = commit
        return [f"leftovers of the interrupted attempt {iteration + 1} put aside"]

    def commit_iteration(self, message: str) -> str | None:
        return self._commit(message)

    def restore(self, commit: str) -> None:
        if commit not in self.commits:
            raise RalphError(f"cannot roll back: no commit {commit}")
        self._checkout(commit)
        self.restored.append(commit)

    def current_commit(self) -> str | None:
        return self.head


# -- Reporter ---------------------------------------------------------------------------------


class RecordingReporter:
    """Keeps the loop's events."""

    def __init__(self) -> None:
        self.started: list[bool] = []  # resumed or not, per start
        self.phases: list[tuple[int, str]] = []
        self.evaluations: dict[int, Evaluation] = {}
        self.records: list[IterationRecord] = []
        self.decisions: list[Decision] = []
        self.notes: list[str] = []
        self.result: LoopResult | None = None

    def loop_started(self, state: LoopState, resumed: bool) -> None:
        self.started.append(resumed)

    def phase(self, iteration: int, name: str) -> None:
        self.phases.append((iteration, name))

    def output(self, stream: str, text: str) -> None:
        return None

    def evaluated(self, iteration: int, evaluation: Evaluation) -> None:
        self.evaluations[iteration] = evaluation

    def iteration_done(self, record: IterationRecord, decision: Decision) -> None:
        self.records.append(record)
        self.decisions.append(decision)

    def note(self, message: str) -> None:
        self.notes.append(message)

    def loop_finished(self, result: LoopResult) -> None:
        self.result = result

    def noted(self, text: str) -> bool:
        return any(text in note for note in self.notes)


# -- a loop -----------------------------------------------------------------------------------


@dataclass
class Loop:
    """A LoopRunner over fakes in `root`, and the fakes, for a test to look at."""

    root: Path
    settings: Settings
    store: MemoryStore
    actor: FakeActor
    chat: FakeChat | None
    workspace: FakeWorkspace | SnapshotWorkspace
    reporter: RecordingReporter
    runner: LoopRunner

    def start(self, loop_id: str = "ralph-fake-1", task: str = "make f pass its tests") -> Any:
        return self.runner.start(task, loop_id)

    def again(self, **settings: Any) -> Loop:
        """A fresh runner over the same project, fakes and memory (a resume in a new process)."""
        fresh = dataclasses.replace(self.settings, **settings)
        runner = LoopRunner(fresh, MemoryStore(self.root), self.runner.parts, self.reporter)
        return Loop(**{**self.__dict__, "settings": fresh, "runner": runner})

    def state(self, loop_id: str = "ralph-fake-1") -> LoopState:
        return MemoryStore(self.root).read_state(loop_id)


def make_loop(
    root: Path,
    plan: Mapping[int | str, Step] | None = None,
    *,
    chat: FakeChat | None = None,
    git: bool = True,
    calc: str = "zero",
    evaluator: Any = None,
    tests: bool = False,
    **settings: Any,
) -> Loop:
    """A project in `root` (calc.py at `calc`) and a LoopRunner over fakes to work on it;
    `chat`: the reflector's model (None: heuristic reflections); `tests`: write TEST_FILE too;
    `settings`: Settings fields."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "calc.py").write_text(VERSIONS[calc])
    if tests:
        (root / TEST_FILE).parent.mkdir(exist_ok=True)
        (root / TEST_FILE).write_text(TEST_TEXT)
    # `cmd:true`: what a `ralph resume` in the CLI would build, were it not refused first
    settings = {"actor": "cmd:true", **settings}
    config = Settings(checks=[CheckSpec("tests", "fake-tests", "pytest")], **settings)
    actor = FakeActor(plan)
    workspace = FakeWorkspace(root) if git else SnapshotWorkspace(root)
    parts = Parts(
        actor=actor,
        evaluator=evaluator or fake_evaluator(),
        reflector=Reflector(chat, project_root=root),
        workspace=workspace,
    )
    reporter = RecordingReporter()
    store = MemoryStore(root)
    runner = LoopRunner(config, store, parts, reporter)
    return Loop(root, config, store, actor, chat, workspace, reporter, runner)
