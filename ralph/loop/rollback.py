"""When the next attempt starts from an earlier tree instead of the last one.

After an attempt worse than the best tree so far (the starting point's included) the code goes
back to the best tree; an attempt that broke what worked scores below the baseline
(judging.combine), yet one that also fixed more targets than the best tree is kept, so the next
attempt repairs what it broke instead of redoing the fix; memory stays, and the
next prompt says what was reverted (prompts.reverted_view). Self-Refine's `degraded` stop keeps
the best iteration the same way. Only with commits to return to (git) and without
--no-rollback.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ralph.memory.state import LoopState
    from ralph.records import IterationRecord


@dataclass(frozen=True)
class Rollback:
    """Back to the tree of iteration `to` (0: the starting point), at `commit`."""

    to: int
    commit: str
    last: int  # the iteration that is reverted
    where: str  # `to` in words
    note: str  # what the loop tells the user


def rollback_after(
    last: IterationRecord, state: LoopState, earlier: Sequence[IterationRecord] = ()
) -> Rollback | None:
    """The rollback that should follow `last`, or None to go on from its tree; `earlier`: the
    loop's records, to tell what the best tree had fixed."""
    if state.git is None:
        return None
    best, best_reward = state.best_iteration, state.best_reward
    base_reward = state.baseline.reward if state.baseline else 0.0
    if best is None or best_reward is None or base_reward >= best_reward:
        best, best_reward = 0, base_reward
    regressed = bool(last.ralph and last.ralph.regressions)
    if regressed and _fixed(last) > _fixed(next((r for r in earlier if r.iteration == best), None)):
        return None  # progress with harm: the next attempt repairs the harm from this tree
    if best == last.iteration or not (
        last.reward < best_reward or (regressed and last.reward <= best_reward)
    ):
        return None
    commit = state.git.commit_of(best)
    if not commit:
        return None
    where = "the starting point" if best == 0 else f"iteration {best}"
    why = "broke what worked before" if regressed else f"fell to {last.reward:.2f}"
    note = f"iteration {last.iteration} {why}: restored the code of {where}"
    return Rollback(best, commit, last.iteration, where, f"{note} (reward {best_reward:.2f})")


def _fixed(record: IterationRecord | None) -> int:
    """Target failures of the baseline a tree fixed (the baseline's own: none)."""
    return (record.ralph.fixed or 0) if record is not None and record.ralph else 0


def kept_iterations(records: Sequence[IterationRecord], state: LoopState, chosen: int) -> list[int]:
    """The iterations whose work is in `chosen`'s tree, oldest first: the rollbacks the loop made
    are replayed from the records (as the runner decided them), and a reverted attempt, with
    any before it that its rollback also undid, is not one of them."""
    ordered = sorted((r for r in records if r.iteration <= chosen), key=lambda r: r.iteration)
    replay = dataclasses.replace(state, best_iteration=None, best_reward=None)
    started_from: dict[int, int] = {}  # iteration -> the iteration whose tree it started from
    for n, record in enumerate(ordered):
        started_from.setdefault(record.iteration, record.iteration - 1)
        if replay.best_reward is None or record.reward > replay.best_reward:
            replay.best_reward, replay.best_iteration = record.reward, record.iteration
        back = (
            None if state.settings.no_rollback else rollback_after(record, replay, ordered[: n + 1])
        )
        if back is not None:
            started_from[record.iteration + 1] = back.to
    kept: list[int] = []
    at = chosen
    while at > 0:
        kept.append(at)
        at = started_from.get(at, at - 1)
    return kept[::-1]
