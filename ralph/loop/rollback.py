"""When the next attempt starts from an earlier tree instead of the last one.

After an attempt worse than the best tree so far (the starting point's included) the code goes
back to the best tree; an attempt that broke what worked scores below the baseline
(judging.combine), yet one that also fixed more targets than the best tree is kept, so the next
attempt repairs what it broke instead of redoing the fix; memory stays, and the
next prompt says what was reverted (prompts.reverted_view). Self-Refine's `degraded` stop keeps
the best iteration the same way. Only with commits to return to (git) and without
--no-rollback. Either way an attempt that made something worse is never silent: its line
says kept or rolled back, and why (`judge` -> `Worse`); `ralph status` replays it (`verdicts`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ralph.glyphs import plural

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


@dataclass(frozen=True)
class Worse:
    """What became of an attempt that made something worse: kept or rolled back, and why."""

    iteration: int
    rollback: Rollback | None  # None: its code is kept, the next attempt starts from it
    reason: str  # a few words

    @property
    def text(self) -> str:
        """`iteration 3: kept: ...` or `iteration 3: rolled back: ...`: the iteration's line."""
        verdict = "kept" if self.rollback is None else "rolled back"
        return f"iteration {self.iteration}: {verdict}: {self.reason}"


def judge(
    last: IterationRecord,
    state: LoopState,
    earlier: Sequence[IterationRecord] = (),
    *,
    no_rollback: bool,
) -> Worse | None:
    """Whether `last` made something worse than the best tree so far (the starting point's
    included) and, if so, whether its code is kept or rolled back (the module's rule); None
    when it made nothing worse."""
    best, best_reward = state.best_iteration, state.best_reward
    base_reward = state.baseline.reward if state.baseline else 0.0
    if best is None or best_reward is None or base_reward >= best_reward:
        best, best_reward = 0, base_reward
    regressed = bool(last.ralph and last.ralph.regressions)
    worse = last.reward < best_reward or (regressed and last.reward <= best_reward)
    if best == last.iteration or not (worse or regressed):
        return None
    where = "the starting point" if best == 0 else f"iteration {best}"
    why = "broke what worked before" if regressed else f"fell to {last.reward:.2f}"
    if no_rollback:
        return Worse(last.iteration, None, f"{why}; --no-rollback keeps every attempt's code")
    if state.git is None:
        return Worse(last.iteration, None, f"{why}; without git there is no code to go back to")
    fixed, best_fixed = (
        _fixed(last),
        _fixed(next((r for r in earlier if r.iteration == best), None)),
    )
    if regressed and fixed > best_fixed:  # progress with harm: repaired from this tree
        return Worse(
            last.iteration,
            None,
            f"{why}, but fixed {plural(fixed, 'target failure')}, more than {where} "
            f"({best_fixed}); the next attempt repairs what it broke from here",
        )
    commit = state.git.commit_of(best)
    if not worse or not commit:
        return None
    note = f"{why}; restored the code of {where} (reward {best_reward:.2f})"
    said = f"iteration {last.iteration}: rolled back: {note}"
    rollback = Rollback(best, commit, last.iteration, where, said)
    return Worse(last.iteration, rollback, note)


def verdicts(records: Sequence[IterationRecord], state: LoopState) -> list[Worse]:
    """What became of every attempt that made something worse, as the loop decided it: its
    rollbacks replayed from the records (`ralph status`). The attempt a loop stopped after is
    judged only by a `degraded` stop (the runner rolls back nothing else at its end)."""
    ended = state.status in ("completed", "failed") and state.stop_reason != "degraded"
    return [
        worse
        for record, _, worse in _replay(records, state)
        if worse is not None and not (ended and record.iteration == state.iteration)
    ]


def may_have_worse(state: LoopState) -> bool:
    """Whether any attempt can have made something worse, from the state alone: one whose
    reward fell below the best before it (the starting point's included). An attempt that broke
    what worked scores below the baseline (evaluators/judging.combine), so none is missed; when
    this is False, `verdicts` would find nothing and `ralph status` reads no record (200
    iterations: 0.37 -> 0.24 s, each record's schema check was most of it)."""
    best = state.baseline.reward if state.baseline else 0.0
    for reward in state.reward_history:
        if reward < best:
            return True
        best = max(best, reward)
    return False


def _fixed(record: IterationRecord | None) -> int:
    """Target failures of the baseline a tree fixed (the baseline's own: none)."""
    return (record.ralph.fixed or 0) if record is not None and record.ralph else 0


def _replay(
    records: Sequence[IterationRecord], state: LoopState
) -> list[tuple[IterationRecord, int, Worse | None]]:
    """The loop's records in order, each with the iteration whose tree it started from and what
    became of it, replayed as the runner decided them."""
    ordered = sorted(records, key=lambda r: r.iteration)
    replay = dataclasses.replace(state, best_iteration=None, best_reward=None)
    started_from: dict[int, int] = {}  # iteration -> the iteration whose tree it started from
    found: list[tuple[IterationRecord, int, Worse | None]] = []
    for n, record in enumerate(ordered):
        started_from.setdefault(record.iteration, record.iteration - 1)
        if replay.best_reward is None or record.reward > replay.best_reward:
            replay.best_reward, replay.best_iteration = record.reward, record.iteration
        worse = judge(record, replay, ordered[: n + 1], no_rollback=state.settings.no_rollback)
        if worse is not None and worse.rollback is not None:
            started_from[record.iteration + 1] = worse.rollback.to
        found.append((record, started_from[record.iteration], worse))
    return found


def kept_iterations(records: Sequence[IterationRecord], state: LoopState, chosen: int) -> list[int]:
    """The iterations whose work is in `chosen`'s tree, oldest first: the rollbacks the loop made
    are replayed from the records (as the runner decided them), and a reverted attempt, with
    any before it that its rollback also undid, is not one of them."""
    started_from = {
        record.iteration: start
        for record, start, _ in _replay([r for r in records if r.iteration <= chosen], state)
    }
    kept: list[int] = []
    at = chosen
    while at > 0:
        kept.append(at)
        at = started_from.get(at, at - 1)
    return kept[::-1]
