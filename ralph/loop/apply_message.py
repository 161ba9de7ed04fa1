"""The commit message `ralph apply` prepares: git's squash message lists every commit of the
loop branch, reverted attempts and bookkeeping included; this one says what a reviewer needs.

Subject: the task's first line; body: the rest of the task, the loop id, the checks that turned
green and the iterations whose work is in the applied tree, each with the agent's own summary
(never ralph's stand-in for a missing one) or the files it changed.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from ralph.loop.rollback import kept_iterations
from ralph.memory.state import LoopState
from ralph.records import IterationRecord, actor_said, gist

SUBJECT_CHARS = 72
BODY_WIDTH = 72
TASK_CHARS = 2000
SUMMARY_CHARS = 200


def apply_message(
    state: LoopState,
    records: Sequence[IterationRecord],
    chosen: int,
    baseline: Mapping[str, Any] | None,
) -> str:
    """The message for applying iteration `chosen` of `state`'s loop."""
    task = " ".join(state.task.split()) or "ralph loop"
    subject = _cut(state.task.strip().splitlines()[0] if state.task.strip() else task)
    paragraphs = []
    if subject != task:
        paragraphs.append(textwrap.fill(_cut(task, TASK_CHARS), BODY_WIDTH))
    by_number = {r.iteration: r for r in records}
    record = by_number.get(chosen)
    reward = f", reward {record.reward:.2f}" if record is not None else ""
    paragraphs.append(f"Loop: {state.loop_id}, iteration {chosen}{reward}")
    green = turned_green(record, state, baseline) if record is not None else []
    if green:
        paragraphs.append(textwrap.fill(f"Checks now green: {', '.join(green)}", BODY_WIDTH))
    kept = [by_number[n] for n in kept_iterations(records, state, chosen) if n in by_number]
    lines = [_iteration_line(r) for r in kept if r.ralph is None or r.ralph.git_commit]
    if lines:
        paragraphs.append("Iterations kept:\n" + "\n".join(lines))
    return subject + "\n\n" + "\n\n".join(paragraphs) + "\n"


def turned_green(
    record: IterationRecord, state: LoopState, baseline: Mapping[str, Any] | None
) -> list[str]:
    """The checks that failed before the loop and pass in `record`."""
    before: dict[str, bool] = {}
    if baseline is not None:
        for check in baseline.get("checks") or []:
            if isinstance(check, Mapping) and isinstance(check.get("name"), str):
                before[check["name"]] = check.get("status") == "pass"
    elif state.baseline is not None:
        before = {n: c == 0 for n, c in state.baseline.check_error_counts.items()}
    results = record.evaluator_output.results or []
    return [r.tool for r in results if r.status == "pass" and before.get(r.tool) is False]


def _iteration_line(record: IterationRecord) -> str:
    first = gist(actor_said(record.actor_output.rationale))
    if not first:
        files = [a.file_path for a in record.actor_output.actions if a.file_path]
        first = f"changed {', '.join(dict.fromkeys(files))}" if files else "changed the code"
    text = f"- iteration {record.iteration}: {_cut(first, SUMMARY_CHARS)}"
    return textwrap.fill(text, BODY_WIDTH, subsequent_indent="  ")


def _cut(text: str, limit: int = SUBJECT_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
