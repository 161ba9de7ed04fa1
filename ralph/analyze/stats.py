"""`ralph analyze`: learning curves and statistics over the stored iteration records.

Every figure is computed from the records (`reflections/<loop>/NNN.json`), the source of truth;
a loop's state file only adds its status (a `running` loop whose process is gone is `crashed`),
stop reason, task and baseline. Invalid files are counted and named, never fatal; a loop that is
still running, crashed, or has one iteration is analysed like any other.

Definitions:

- **reward series**: the baseline reward (`state.baseline.reward`, when known), then the reward
  of each valid record in iteration order (a record without `reward_signal` counts 0).
- **iterations to green**: the first iteration whose `evaluator_output.passed` is true; None if
  never (0 for a loop with no records whose baseline already passed).
- **nothing to do**: a loop green at its baseline (iterations to green 0, `already_green`). It
  had no task left, so it says nothing of the loop's success: it is left out of the success
  rate, success@k and iterations to green, and counted on its own (`nothing_to_do`).
- **success@k**, for k = 1 .. the highest iteration across the analysed loops (at most
  `MAX_K`: the curve's size never follows a record's iteration number): the share of the
  loops that had something to do green by iteration k (iterations to green <= k) — the
  learning curve of the Reflexion paper. **success rate**: the share of those loops that ever
  went green. Loops still running count as not (yet) green.
- **learning rate**: the mean of reward[i] - reward[i-1] over consecutive entries of the reward
  series, the baseline step included when the baseline is known; None with fewer than two.
- **breakthrough**: an iteration whose reward is at least 0.3 above the previous entry of the
  series; it is "preceded by" the reflection of iteration i-1 (its first line and category).
- **error count trend**: the same mean step over the error counts (baseline `error_count`, then
  the number of diagnostics of each record); negative means fewer errors.
- **failure categories**: `credit_assignment.failure_category` of each failed iteration
  ("uncategorised" when absent). Per category: iterations, loops where it appeared, iterations
  per such loop, and the mean iterations to green of those loops that went green.
- **reflection effectiveness**: for each record i > 1 whose `memory_metadata.
  reflections_in_context` (or else `previous_reflections_used`) contains j, one use of
  reflection j, improved when reward_i > reward_{i-1} (both records valid). Reported as the share
  of improved uses, overall, by j's `ralph.reflection_source` and by each of j's quality flags
  ("none" when it has none; "unknown" when record j is missing or invalid).
- **lessons from other loops**: each attempt whose `ralph.lessons_used` is not empty is one use,
  improved when its `performance_delta.is_improvement` is true (as `ralph reflections show`
  counts a lesson that helped).
- **recurring root causes**: `credit_assignment.root_cause`, matched normalised (lowercase,
  whitespace collapsed, trailing `.,;:!?` stripped), found in 3 or more iterations across or
  within loops: the agent is not learning from them. Listed as first written, with their loops
  and iterations.
- **agent actions** (`agent_actions`, per loop and overall): edits, reads, commands per
  iteration from the records' `ralph.trace`, and the share of attempts in which the agent ran
  the checks itself beside how often those passed (see `ralph.analyze.trace_stats`).
- **tokens, cost, wall time**: sums over the records of `ralph.usage` tokens (None when no
  record knows them: a `cmd:` actor's tokens are unknown, never 0), of `cost_usd` by the one
  money rule (`records.sum_costs`: unknown as soon as one part is, as in `ralph status`), and
  the phase durations in `ralph.duration_ms`. A value out of range (facts.py: a phase longer
  than a year, a cost or token count beyond any bill) counts as unknown, never as itself.

`--json` prints one object: `{"summary": {...}, "loops": [...], "invalid_files": [...]}`.
`summary` holds `loops` (all analysed), `nothing_to_do`, `green_loops` (of the others),
`success_rate`, `success_at_k` (a map from k, as a
string, to the share of loops green by iteration k), `mean_iterations_to_green`,
`median_iterations_to_green`, `mean_learning_rate`, `iterations`, `breakthroughs`, `tokens`,
`cost_usd`, `wall_seconds`, `failure_categories` (a list, most iterations first),
`reflection_effectiveness` (`uses`, `improved`, `share`, `by_source`, `by_quality_flag`),
`lessons_from_other_loops` (`uses`, `improved`, `share`),
`recurring_root_causes`, `invalid_files` (a count) and `filters`. Each entry of `loops` holds
`loop_id`, `task`, `status`, `stop_reason`, `created_at`, `iterations`, `last_iteration`,
`baseline_reward`, `rewards` (the reward series: its first entry is the baseline when
`baseline_reward` is not null), `best_reward`, `iterations_to_green`, `learning_rate`,
`breakthroughs`, `baseline_error_count`, `error_counts`, `error_trend`, `failure_categories`,
`tokens`, `cost_usd`, `wall_seconds` and `invalid_files`. `invalid_files` lists `{"path",
"reason"}` with paths relative to the project root (of the analysed loops). `--csv` writes
one row per iteration, the baseline (when known) as iteration 0.

Filters: `--since` keeps loops created at or after a time, `--status` those whose effective
status matches ("unknown" with an unreadable state; a loop without a state file, such as an
imported one, is "completed" when its last record passed, else "failed": see
`ralph.memory.transfer.status_from_records`), `--task` those whose task contains the
text (case-insensitive). Loops are listed oldest first.
"""

from __future__ import annotations

import sqlite3
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ralph.analyze.cache import FactsReader
from ralph.analyze.facts import LoopFiles, StateFacts
from ralph.analyze.facts import normalise_root_cause as normalise_root_cause  # its figure's rule
from ralph.analyze.loop_figures import LoopAnalysis as LoopAnalysis  # the type of its loops
from ralph.analyze.loop_figures import analyse_loop, loop_created, loop_json, loop_task
from ralph.analyze.trace_stats import action_stats
from ralph.errors import RalphError, StoreError
from ralph.ids import validate_loop_id
from ralph.memory.feedback import acceptance
from ralph.memory.merit import RETIRE_AFTER
from ralph.memory.store import STATUSES, MemoryStore
from ralph.records import known_sum, sum_costs

MAX_K = 100  # success@k up to this k: a loop that ran longer is still counted by its green
RECURRING = 3


@dataclass
class Rate:
    uses: int = 0
    improved: int = 0

    @property
    def share(self) -> float | None:
        return self.improved / self.uses if self.uses else None


@dataclass
class Effectiveness:
    overall: Rate = field(default_factory=Rate)
    by_source: dict[str, Rate] = field(default_factory=dict)
    by_quality_flag: dict[str, Rate] = field(default_factory=dict)
    lessons: Rate = field(default_factory=Rate)  # attempts given lessons from other loops


@dataclass
class CategoryStat:
    category: str
    iterations: int
    loops: int
    mean_iterations_to_green: float | None

    @property
    def iterations_per_loop(self) -> float:
        return self.iterations / self.loops


@dataclass
class RecurringCause:
    root_cause: str
    occurrences: list[tuple[str, int]]

    @property
    def loops(self) -> list[str]:
        return sorted({loop_id for loop_id, _ in self.occurrences})


@dataclass
class InvalidFile:
    path: str
    reason: str


@dataclass
class Summary:
    loops: int
    nothing_to_do: int  # green at the baseline: out of the success figures
    green_loops: int
    success_rate: float | None
    success_at_k: dict[int, float]
    mean_iterations_to_green: float | None
    median_iterations_to_green: float | None
    mean_learning_rate: float | None
    iterations: int
    breakthroughs: int
    tokens: int | None
    cost_usd: float | None
    wall_seconds: float
    failure_categories: list[CategoryStat]
    effectiveness: Effectiveness
    recurring_root_causes: list[RecurringCause]
    # people's verdicts (feedback.py): reviewed, accepted, rejected, not_taken, acceptance_rate
    acceptance: dict[str, Any] = field(default_factory=dict)
    # what the memory teaches (memory/taught.lesson_figures): added, merged, retired, helped_share
    lessons: dict[str, Any] = field(default_factory=dict)


@dataclass
class Analysis:
    summary: Summary
    loops: list[LoopAnalysis]
    invalid_files: list[InvalidFile]
    filters: dict[str, str] = field(default_factory=dict)


def analyze(
    store: MemoryStore,
    loop_ids: list[str] | None = None,
    *,
    since: datetime | None = None,
    status: str | None = None,
    task: str | None = None,
    use_index: bool = True,
    progress: Callable[[int, int], None] | None = None,
    retire_after: int = RETIRE_AFTER,
) -> Analysis:
    """Analyse the named loops (default: every loop), keeping those that pass the filters.

    `since` keeps loops created at or after it (naive times are UTC); `status` matches the
    effective status ("unknown" for a loop without a readable state); `task` is a
    case-insensitive substring of the task. `progress(done, total)` hears of each loop read.
    """
    store.require()
    if status is not None and status not in (*STATUSES, "unknown"):
        raise RalphError(
            f"unknown status {status!r}", hint=f"use one of: {', '.join((*STATUSES, 'unknown'))}"
        )
    if since is not None and since.tzinfo is None:
        since = since.replace(tzinfo=UTC)
    ids = list(dict.fromkeys(validate_loop_id(i) for i in loop_ids)) if loop_ids else None
    loops: list[LoopAnalysis] = []
    invalid: list[InvalidFile] = []
    reader = FactsReader(store, use_index=use_index)
    running = store.running_loops()
    try:
        todo = ids if ids is not None else store.loop_ids()
        reader.prefetch(todo)
        for done, loop_id in enumerate(todo):
            if progress is not None:
                progress(done, len(todo))
            state, problem = reader.state(loop_id)
            if (
                state is None
                and problem is None
                and ids
                and not store.reflections_dir(loop_id).is_dir()
            ):
                raise StoreError(
                    f"unknown loop {loop_id!r}", hint="`ralph reflections list` shows the loops"
                )
            loop_status = _status(state, loop_id in running)
            stateless = state is None and problem is None  # e.g. imported: status from records
            if status is not None and loop_status != status and not stateless:
                continue
            files = reader.records(loop_id)
            if state is None and problem is None and not files.records and not files.invalid:
                continue  # a folder of logs without a state or a record: nothing to analyse
            if stateless:
                from ralph.memory.transfer import status_from_records  # rare: not imported up front

                loop_status = status_from_records([r.passed for r in files.records])
                if status is not None and loop_status != status:
                    continue
            if not _wanted(state, files, since, task):
                continue
            loops.append(analyse_loop(loop_id, state, loop_status, files))
            if problem is not None:
                invalid.append(InvalidFile(_relative(store, store.state_path(loop_id)), problem))
            invalid.extend(InvalidFile(_relative(store, Path(p)), r) for p, r in files.invalid)
    finally:
        full_scan = ids is None and since is None and status is None and task is None
        reader.close(forget_unseen=full_scan)
    loops.sort(key=lambda loop: (loop.created_at or "", loop.loop_id))
    filters = {"since": since.isoformat() if since else "", "status": status or "", "task": task}
    summary = _summarise(loops)
    summary.acceptance = acceptance(store, [loop.loop_id for loop in loops])
    from ralph.memory.taught import lesson_figures  # the search index: only once summed up

    try:  # the figures of the lessons are a bonus: an index it cannot build costs only them
        summary.lessons = lesson_figures(
            store, [loop.loop_id for loop in loops], retire_after=retire_after
        )
    except (RalphError, OSError, UnicodeError, sqlite3.Error):
        summary.lessons = {}
    return Analysis(summary, loops, invalid, {k: v for k, v in filters.items() if v})


def _relative(store: MemoryStore, path: Path) -> str:
    try:
        return path.relative_to(store.root).as_posix()
    except ValueError:
        return str(path)


def _status(state: StateFacts | None, locked: bool) -> str:
    """`running` only while the loop's lock is held (MemoryStore.running_loops)."""
    if state is None:
        return "unknown"
    if state.status == "running" and not locked:
        return "crashed"
    return state.status


def _parse_time(text: str | None) -> datetime | None:
    try:
        parsed = datetime.fromisoformat(text or "")
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _wanted(
    state: StateFacts | None, files: LoopFiles, since: datetime | None, task: str | None
) -> bool:
    if task is not None and task.lower() not in (loop_task(state, files) or "").lower():
        return False
    if since is not None:
        created = _parse_time(loop_created(state, files))
        if created is not None and created < since:
            return False
    return True


def _summarise(loops: list[LoopAnalysis]) -> Summary:
    tried = [loop for loop in loops if not loop.nothing_to_do]
    greens = [loop.iterations_to_green for loop in tried if loop.iterations_to_green is not None]
    top = min(max((loop.last_iteration for loop in loops), default=0), MAX_K)
    rates = [loop.learning_rate for loop in loops if loop.learning_rate is not None]
    return Summary(
        loops=len(loops),
        nothing_to_do=len(loops) - len(tried),
        green_loops=len(greens),
        success_rate=len(greens) / len(tried) if tried else None,
        success_at_k={k: sum(g <= k for g in greens) / len(tried) for k in range(1, top + 1)},
        mean_iterations_to_green=statistics.fmean(greens) if greens else None,
        median_iterations_to_green=float(statistics.median(greens)) if greens else None,
        mean_learning_rate=statistics.fmean(rates) if rates else None,
        iterations=sum(len(loop.records) for loop in loops),
        breakthroughs=sum(len(loop.breakthroughs) for loop in loops),
        tokens=known_sum([loop.tokens for loop in loops]),
        cost_usd=sum_costs(*(loop.cost_usd for loop in loops)) if loops else None,
        wall_seconds=float(sum(loop.wall_seconds for loop in loops)),
        failure_categories=_categories(loops),
        effectiveness=_effectiveness(loops),
        recurring_root_causes=recurring_root_causes(loops),
    )


def _categories(loops: list[LoopAnalysis]) -> list[CategoryStat]:
    iterations: Counter[str] = Counter()
    seen_in: defaultdict[str, list[LoopAnalysis]] = defaultdict(list)
    for loop in loops:
        for category, count in loop.failure_categories.items():
            iterations[category] += count
            seen_in[category].append(loop)
    stats = []
    for category, count in iterations.items():
        greens = [
            g.iterations_to_green for g in seen_in[category] if g.iterations_to_green is not None
        ]
        mean = statistics.fmean(greens) if greens else None
        stats.append(CategoryStat(category, count, len(seen_in[category]), mean))
    return sorted(stats, key=lambda s: (-s.iterations, s.category))


def _effectiveness(loops: list[LoopAnalysis]) -> Effectiveness:
    # tally uses by (source, flags, improved) first: tens of thousands of uses, a few keys
    tally: Counter[tuple[str, tuple[str, ...], bool]] = Counter()
    lessons = Rate()
    for loop in loops:
        by_iteration = {r.iteration: r for r in loop.records}
        # what a use of each reflection is tallied under, worked out once per reflection
        kinds = {
            r.iteration: (r.source or "unknown", tuple(dict.fromkeys(r.quality_flags)) or ("none",))
            for r in loop.records
        }
        for record in loop.records:
            if record.lessons_used:
                lessons.uses += 1
                lessons.improved += bool(record.improved)
            previous = by_iteration.get(record.iteration - 1)
            if record.iteration <= 1 or previous is None:
                continue
            improved = record.reward > previous.reward
            for j in set(record.in_context):
                source, flags = kinds.get(j, ("unknown", ("unknown",)))
                tally[source, flags, improved] += 1
    result = Effectiveness(lessons=lessons)
    for (source, flags, improved), n in tally.items():
        rates = [result.overall, result.by_source.setdefault(source, Rate())]
        rates += [result.by_quality_flag.setdefault(f, Rate()) for f in flags]
        for rate in rates:
            rate.uses += n
            rate.improved += n if improved else 0
    return result


def recurring_root_causes(loops: list[LoopAnalysis]) -> list[RecurringCause]:
    """Causes said in several attempts, matched normalised, shown as first written (the
    case of an error's text is part of it: `AssertionError: 25 != None`)."""
    found: defaultdict[str, list[tuple[str, int]]] = defaultdict(list)
    written: dict[str, str] = {}
    for loop in loops:
        for record in loop.records:
            if record.cause:
                found[record.cause].append((loop.loop_id, record.iteration))
                said = " ".join((record.root_cause or record.cause).split())
                written.setdefault(record.cause, said.rstrip(".,;:!? ") or record.cause)
    causes = [RecurringCause(written[k], v) for k, v in found.items() if len(v) >= RECURRING]
    return sorted(causes, key=lambda c: (-len(c.occurrences), c.root_cause))


def _rate_json(rate: Rate) -> dict[str, Any]:
    return {"uses": rate.uses, "improved": rate.improved, "share": rate.share}


def analysis_json(a: Analysis) -> dict[str, Any]:
    """The documented `--json` object (see the module docstring)."""
    s = a.summary
    total = sum(c.iterations for c in s.failure_categories)
    eff = s.effectiveness
    return {
        "summary": {
            "loops": s.loops,
            "nothing_to_do": s.nothing_to_do,
            "green_loops": s.green_loops,
            "success_rate": s.success_rate,
            "acceptance": s.acceptance,
            "lessons": s.lessons,
            "success_at_k": {str(k): v for k, v in s.success_at_k.items()},
            "mean_iterations_to_green": s.mean_iterations_to_green,
            "median_iterations_to_green": s.median_iterations_to_green,
            "mean_learning_rate": s.mean_learning_rate,
            "iterations": s.iterations,
            "breakthroughs": s.breakthroughs,
            "tokens": s.tokens,
            "cost_usd": s.cost_usd,
            "wall_seconds": s.wall_seconds,
            "failure_categories": [
                {
                    "category": c.category,
                    "iterations": c.iterations,
                    "share": c.iterations / total,
                    "loops": c.loops,
                    "iterations_per_loop": c.iterations_per_loop,
                    "mean_iterations_to_green": c.mean_iterations_to_green,
                }
                for c in s.failure_categories
            ],
            "reflection_effectiveness": {
                **_rate_json(eff.overall),
                "by_source": {k: _rate_json(v) for k, v in sorted(eff.by_source.items())},
                "by_quality_flag": {
                    k: _rate_json(v) for k, v in sorted(eff.by_quality_flag.items())
                },
            },
            "lessons_from_other_loops": _rate_json(eff.lessons),
            "agent_actions": action_stats([r for loop in a.loops for r in loop.records]),
            "recurring_root_causes": [
                {
                    "root_cause": c.root_cause,
                    "count": len(c.occurrences),
                    "loops": c.loops,
                    "occurrences": [
                        {"loop_id": loop_id, "iteration": i} for loop_id, i in c.occurrences
                    ],
                }
                for c in s.recurring_root_causes
            ],
            "invalid_files": len(a.invalid_files),
            "filters": a.filters,
        },
        "loops": [loop_json(loop) for loop in a.loops],
        "invalid_files": [{"path": f.path, "reason": f.reason} for f in a.invalid_files],
    }
