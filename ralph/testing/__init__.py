"""Fakes for every seam of the loop, for tests of ralph and of its plugins (like httpx's
`MockTransport`): an Actor (`FakeActor`, playing a plan of `Step`s), a ChatClient
(`FakeChat`), a Reflector (`FakeReflector`), a Check (`FakeTests`) judged by the real
`CheckSuite` (`fake_evaluator`), an Evaluator from a function (`MockEvaluator`), a Workspace
(`FakeWorkspace`, git in memory) and a Reporter (`RecordingReporter`); `make_loop` puts a
`LoopRunner` together from them.

No agent process, no pytest run, no git: a test of the loop's logic runs in milliseconds and
sees every event. The project is a small `calc.py`: its four tests pass according to which
version of `f` the fake actor writes (0, 0.5, 0.75 or 1 as reward).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ralph.config import CheckSpec, Settings
from ralph.loop.runner import LoopRunner
from ralph.loop.steps import Parts
from ralph.memory.state import LoopState
from ralph.memory.store import MemoryStore
from ralph.reflection.base import Reflector
from ralph.reflection.reflector import ModelReflector
from ralph.testing.project import (
    PASSING,
    TEST_FILE,
    TEST_TEXT,
    TESTS,
    VERSIONS,
    WEAKENED,
    Crash,
    FakeActor,
    FakeCheck,
    FakeTests,
    Step,
    fake_evaluator,
    write,
)
from ralph.testing.seams import (
    FakeChat,
    FakeReflector,
    FakeWorkspace,
    MockEvaluator,
    RecordingReporter,
)
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
    "FakeReflector",
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
    reflector: Reflector | None = None,
    tests: bool = False,
    **settings: Any,
) -> Loop:
    """A project in `root` (calc.py at `calc`) and a LoopRunner over fakes to work on it;
    `chat`: the reflector's model (None: heuristic reflections); `reflector`: another
    Reflector instead (a `FakeReflector`); `tests`: write TEST_FILE too; `settings`: Settings
    fields."""
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
        reflector=reflector or ModelReflector(chat, project_root=root),
        workspace=workspace,
    )
    reporter = RecordingReporter()
    store = MemoryStore(root)
    runner = LoopRunner(config, store, parts, reporter)
    return Loop(root, config, store, actor, chat, workspace, reporter, runner)
