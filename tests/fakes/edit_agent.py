"""A `cmd:` agent for tests of many loops: applies the `FAKE-EDIT: path :: old => new` lines of
its prompt (the task text carries them), after saying it started and, when asked, waiting.

- $AGENT_STARTED (a folder): the agent writes `<loop id>` there with its pid when it starts;
- $AGENT_GATE (a file): the agent waits (up to two minutes) until that file exists;
- $AGENT_PROMPTS (a folder): the agent keeps its prompt there as `<loop id>-<iteration>.md`.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "agents"))
from _fake import apply_edits


def main() -> None:
    prompt = Path(os.environ["RALPH_PROMPT_FILE"]).read_text()
    prompts = os.environ.get("AGENT_PROMPTS")
    if prompts:
        name = f"{os.environ['RALPH_LOOP_ID']}-{os.environ['RALPH_ITERATION']}.md"
        Path(prompts, name).write_text(prompt)
    started = os.environ.get("AGENT_STARTED")
    if started:
        Path(started, os.environ["RALPH_LOOP_ID"]).write_text(str(os.getpid()))
    gate = os.environ.get("AGENT_GATE")
    deadline = time.monotonic() + 120
    while gate and not Path(gate).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    for path, old, new in apply_edits(prompt):
        print(f"edited {path}: {old!r} -> {new!r}")


if __name__ == "__main__":
    main()
