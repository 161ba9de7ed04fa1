"""Fakes of the seams that need no project: a ChatClient answering from a queue (`FakeChat`),
a Reflector saying given texts (`FakeReflector`), an Evaluator from a function
(`MockEvaluator`), a Workspace with git in memory (`FakeWorkspace`) and a Reporter that keeps
every event (`RecordingReporter`)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ralph.errors import PreflightError, RalphError
from ralph.evaluators.base import Evaluation, EvaluationRequest
from ralph.loop.policy import Decision
from ralph.loop.result import LoopResult
from ralph.memory.state import LoopState
from ralph.providers.base import ChatResponse, Message
from ralph.records import (
    ActorOutput,
    IterationRecord,
    ReflectionSource,
    SelfReflection,
)
from ralph.reflection.base import ReflectionOutcome
from ralph.workspace.base import GitState
from ralph.workspace.snapshot import SnapshotWorkspace

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


# -- Reflector --------------------------------------------------------------------------------


class FakeReflector:
    """A Reflector that says `texts` in turn (the last one again once they run out); keeps
    each call's arguments."""

    def __init__(self, *texts: str, source: ReflectionSource = "llm") -> None:
        self.texts = list(texts) or ["I changed f without reading the failing test first."]
        self.source: ReflectionSource = source
        self.calls: list[dict[str, Any]] = []

    def reflect(
        self,
        *,
        task: str,
        iteration: int,
        actor_output: ActorOutput,
        evaluation: Evaluation,
        earlier: list[IterationRecord],
        diff_summary: str = "",
        trajectory: str = "",
        protected_edits: Sequence[str] = (),
    ) -> ReflectionOutcome:
        self.calls.append(
            {
                "task": task,
                "iteration": iteration,
                "actor_output": actor_output,
                "evaluation": evaluation,
                "earlier": earlier,
                "diff_summary": diff_summary,
                "trajectory": trajectory,
                "protected_edits": list(protected_edits),
            }
        )
        text = self.texts[min(len(self.calls), len(self.texts)) - 1]
        return ReflectionOutcome(SelfReflection(text), self.source)


# -- Evaluator -------------------------------------------------------------------------------------


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
        self.waits: list[tuple[float, str]] = []  # usage limits waited out: until, the limit
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

    def waiting(self, state: LoopState, until: float, limit: str) -> None:
        self.waits.append((until, limit))

    def loop_finished(self, result: LoopResult) -> None:
        self.result = result

    def noted(self, text: str) -> bool:
        return any(text in note for note in self.notes)
