"""A loop told in markdown, for GitHub: a job's step summary and a pull request's body.

Read from the loop's state (when there is one) and its records: what happened, the reward
curve, and what each failed attempt's reflection found (root cause, category, lessons).
"""

from __future__ import annotations

from ralph.errors import StoreError
from ralph.glyphs import clip, plural, sparkline
from ralph.ids import validate_loop_id
from ralph.loop.result import git_outcome
from ralph.memory.store import LoopState, MemoryStore


def _cell(text: str | None, width: int = 160) -> str:
    """Safe inside a markdown table cell: one line, pipes escaped."""
    flat = " ".join((text or "").split())
    return clip(flat, width).replace("|", "\\|") or "-"


def _branch(state: LoopState) -> str:
    """` · branch `ralph/…` from `main`, best commit `abc…``: where the work is."""
    git = git_outcome(state)
    if not git["branch"]:
        return ""
    base = f" from `{git['base_branch']}`" if git["base_branch"] else ""
    best = f", best commit `{git['best_commit'][:12]}`" if git["best_commit"] else ""
    return f" · branch `{git['branch']}`{base}{best}"


def loop_markdown(store: MemoryStore, loop_id: str) -> str:
    validate_loop_id(loop_id)
    records = store.valid_records(loop_id)
    try:
        state: LoopState | None = store.read_state(loop_id)
    except StoreError:
        state = None
    if state is None and not records:
        raise StoreError(f"unknown loop {loop_id!r}", hint="`ralph reflections list` shows loops")
    task = state.task if state else next((r.task_description for r in records), None)
    rewards = [r.evaluator_output.reward_signal or 0.0 for r in records]
    baseline = state.baseline.reward if state and state.baseline else None
    curve = ([baseline] if baseline is not None else []) + rewards
    if state is not None:
        status, stop = store.effective_status(state), state.stop_reason
    else:
        from ralph.memory.transfer import status_from_records

        status, stop = status_from_records([r.evaluator_output.passed for r in records]), None
    best = max(rewards, default=None)
    branch = _branch(state) if state else ""
    lines = [
        f"### ralph: {_cell(task, 200)}",
        "",
        f"**{status}**{f' ({stop})' if stop else ''} after "
        f"{plural(len(records), 'iteration')}, best reward "
        f"{'-' if best is None else f'{best:.2f}'} · loop `{loop_id}`" + branch,
        "",
        f"Reward curve: `{sparkline(curve)}` "
        + " → ".join(
            ([f"baseline {baseline:.2f}"] if baseline is not None else [])
            + [f"{r:.2f}" for r in rewards]
        ),
        "",
        "| iteration | reward | checks | root cause |",
        "| --- | --- | --- | --- |",
    ]
    for record in records:
        ev, credit = record.evaluator_output, record.self_reflection.credit_assignment
        cause = credit.root_cause if credit and credit.root_cause else None
        if not ev.passed and cause is None:
            cause = record.self_reflection.reflection_text
        lines.append(
            f"| {record.iteration} | {ev.reward_signal or 0.0:.2f} | "
            f"{'pass' if ev.passed else 'fail'} | {_cell(None if ev.passed else cause)} |"
        )
    found = [
        (r.iteration, r.self_reflection)
        for r in records
        if not r.evaluator_output.passed and r.self_reflection.credit_assignment
    ]
    if found:
        lines += ["", "**What the reflections found**", ""]
        for iteration, sr in found:
            credit = sr.credit_assignment
            assert credit is not None
            category = credit.failure_category or "uncategorised"
            lines.append(f"- iteration {iteration} ({category}): {_cell(credit.root_cause, 300)}")
            lines += [f"  - lesson: {_cell(lesson, 300)}" for lesson in sr.lessons_learned or []]
    return "\n".join(lines) + "\n"
