"""`ralph bench TASKS.yaml`: does the memory help? The Reflexion paper's ablation, on your tasks.

Every (task, arm, repeat) is one loop in its own worktree from the same commit, run by the
batch machinery (`ralph.loop.batch.Batch`: at most `--jobs` at once, Ctrl-C saves them all); the
runs are queued task by task with the arms interleaved, so drift in a remote model's behaviour
does not favour one arm. An arm is a name and run flags: `reflexion` (the configured Ω and
lessons) and `no-memory` (`--omega 0 --lessons 0`, the paper's "no reflection" baseline) by
default; `--arm NAME=omega=1,reflector=heuristic` adds any other.

What is kept, under `.aiwg/ralph/bench/<bench-id>/bench.json`: the tasks file, the exact flags
of every arm, the starting commit and the loop of every run, so `--resume` continues paused or
crashed runs and starts the ones that never started, without rerunning finished ones.

The table (report.py): per arm success@1..k (the share of runs whose targets were green by
iteration k: `evaluator_output.passed`), mean iterations to green, tokens (summed over the runs
that reported any; unknown when none did), cost (by the one rule for money, `sum_costs`: unknown
when one run's is), wall time; and each arm's difference from the
first arm in final success with a 95 % interval from a paired bootstrap over tasks (2000
resamples of the tasks, seed 0; each task's repeats averaged first).
"""

from __future__ import annotations

import hashlib
import random
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ralph.errors import ConfigError, PreflightError, StoreError
from ralph.files import atomic_write_json, read_json
from ralph.ids import new_loop_id
from ralph.loop.batch import BatchView, Entry
from ralph.loop.tasks_file import BatchTask, load_tasks, slug
from ralph.memory.state import Totals
from ralph.memory.store import MemoryStore, parse_state
from ralph.records import known_sum, sum_costs, utc_now

DEFAULT_ARMS = {"reflexion": {}, "no-memory": {"omega": "0", "lessons": "0"}}
ARM_KEYS: tuple[str, ...] = ("omega", "lessons", "reflector", "actor", "window_policy")
ARM_KEYS += ("memory_tokens", "max_iterations", "patience", "test", "check")
BOOTSTRAP_SAMPLES = 2000
MIN_INTERVAL_TASKS = 10  # fewer, and the table says the interval means little


@dataclass
class BenchEntry(Entry):
    """A batch entry that is one run of one arm: the arm's flags go after the task's."""

    arm: str = ""
    repeat: int = 1
    flags: tuple[str, ...] = ()
    lessons_before: str | None = None  # the bench's start: no run learns from another run

    def env(self) -> dict[str, str]:
        return {"RALPH_LESSONS_BEFORE": self.lessons_before} if self.lessons_before else {}

    def run_flags(self) -> list[str]:
        return list(self.flags)


def parse_arm(text: str) -> tuple[str, dict[str, str]]:
    """`NAME=key=value,key=value` (or a bare NAME of a default arm)."""
    name, _, rest = text.partition("=")
    name = name.strip()
    if not name or slug(name) != name:
        raise ConfigError(
            f"--arm {text!r}: the arm needs a name of lowercase letters, digits and dashes",
            hint="--arm one-reflection=omega=1,lessons=0",
        )
    if not rest:
        if name in DEFAULT_ARMS:
            return name, dict(DEFAULT_ARMS[name])
        raise ConfigError(f"--arm {text!r}: no flags", hint=f"--arm {name}=omega=1")
    flags: dict[str, str] = {}
    for item in rest.split(","):
        key, sep, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or key not in ARM_KEYS or not value.strip():
            raise ConfigError(
                f"--arm {text!r}: cannot read {item!r}",
                hint=f"flags are KEY=VALUE with KEY one of: {', '.join(ARM_KEYS)}",
            )
        flags[key] = value.strip()
    return name, flags


NUMBER_KEYS = ("omega", "lessons", "memory_tokens", "max_iterations", "patience")


def check_arm(name: str, flags: dict[str, str]) -> None:
    """An arm's settings through the one validation of `ralph run`'s (config `_validate`): a
    value every run of the arm would refuse (`omega=abc`, `omega=11`) stops the bench before
    anything runs, instead of failing each run and reading as a difference."""
    from ralph.config import _validate

    settings: dict[str, Any] = {}
    for key, value in flags.items():
        if key == "check":
            settings["checks"] = [value]
        elif key in NUMBER_KEYS:
            settings[key] = int(value) if re.fullmatch(r"[+-]?[0-9]+", value) else value
        else:
            settings[key] = value
    _validate(f"--arm {name}", settings)


def arm_argv(flags: dict[str, str]) -> tuple[str, ...]:
    return tuple(a for k, v in flags.items() for a in (f"--{k.replace('_', '-')}", v))


def bench_id(tasks_path: Path, arms: dict[str, dict[str, str]], repeats: int) -> str:
    digest = hashlib.sha256(repr((str(tasks_path.resolve()), arms, repeats)).encode())
    return f"{slug(tasks_path.stem)}-{digest.hexdigest()[:8]}"


def bench_dir(store: MemoryStore, ident: str) -> Path:
    return store.base / "bench" / ident


def plan(
    store: MemoryStore,
    tasks: list[BatchTask],
    arms: dict[str, dict[str, str]],
    repeats: int,
    *,
    ident: str,
    commit: str,
    tasks_path: Path,
    resume: bool,
) -> list[BenchEntry]:
    """The runs, task by task with the arms interleaved; with `resume`, the earlier loops."""
    path = bench_dir(store, ident) / "bench.json"
    earlier: dict[str, str] = {}
    started = utc_now()
    if resume:
        if not path.exists():
            raise StoreError(
                f"no earlier bench {ident} to resume",
                hint="start it without --resume (same tasks file, arms and --repeats)",
            )
        data = read_json(path)
        earlier = dict(data.get("runs") or {}) if isinstance(data, dict) else {}
        started = str(data.get("started_at") or started) if isinstance(data, dict) else started
    entries = []
    for task in tasks:
        for repeat in range(1, repeats + 1):
            for arm, flags in arms.items():
                key = f"{task.name}/{arm}/{repeat}"
                loop_id = earlier.get(key) or new_loop_id(f"{task.name}-{arm}")
                entry = BenchEntry(
                    task,
                    loop_id,
                    arm=arm,
                    repeat=repeat,
                    flags=arm_argv(flags),
                    lessons_before=started,
                )
                if key in earlier and store.state_path(loop_id).exists():
                    entry.refresh(store)
                    if entry.status in ("paused", "crashed"):
                        entry.resume, entry.status = True, "queued"
                    else:
                        entry.phase = "done"
                elif key in earlier:
                    entry.loop_id = new_loop_id(f"{task.name}-{arm}")
                entries.append(entry)
    store.ensure()
    atomic_write_json(
        path,
        {
            "bench_id": ident,
            "tasks_file": str(tasks_path.resolve()),
            "commit": commit,
            "started_at": started,  # lessons come only from records older than the bench
            "repeats": repeats,
            "arms": {
                name: {"flags": flags, "argv": list(arm_argv(flags))}
                for name, flags in arms.items()
            },
            "runs": {f"{e.task.name}/{e.arm}/{e.repeat}": e.loop_id for e in entries},
        },
    )
    return entries


# --- results -----------------------------------------------------------------------------------


@dataclass
class Run:
    task: str
    arm: str
    repeat: int
    loop_id: str
    green_at: int | None  # the first iteration whose targets were green (0: already green)
    iterations: int
    tokens: int | None  # None: nobody reported any (a `cmd:` actor, a heuristic reflector)
    cost_usd: float | None
    wall_seconds: float
    status: str
    # the state counted an iteration or a model call; a run that counted nothing (already
    # green, never started) used nothing: no part of its arm's tokens or cost
    counted: bool = True
    # why the run could not run (its loop exited with an error): no measurement of its arm
    error: str | None = None


@dataclass
class ArmResult:
    name: str
    flags: dict[str, str]
    runs: list[Run] = field(default_factory=list)

    @property
    def failed_runs(self) -> int:
        """Runs that could not run: the arm's figures measure nothing."""
        return sum(r.error is not None for r in self.runs)

    def success_at(self, k: int) -> float:
        done = [r for r in self.runs if r.green_at is not None and r.green_at <= k]
        return len(done) / len(self.runs) if self.runs else 0.0


def read_run(store: MemoryStore, entry: BenchEntry) -> Run:
    try:
        state = parse_state(store.state_path(entry.loop_id))
    except StoreError:
        state = None
    green_at = None
    if state is not None and state.stop_reason == "already_green":
        green_at = 0
    else:
        for record in store.valid_records(entry.loop_id):
            if record.evaluator_output.passed:
                green_at = record.iteration
                break
    usage = state.usage if state else Totals()
    return Run(
        task=entry.task.name,
        arm=entry.arm,
        repeat=entry.repeat,
        loop_id=entry.loop_id,
        green_at=green_at,
        iterations=state.iteration if state else 0,
        tokens=known_sum((usage.tokens_in, usage.tokens_out)),
        cost_usd=usage.cost_usd,
        wall_seconds=usage.wall_seconds,
        status=store.effective_status(state) if state else entry.status,
        counted=state is not None and (state.iteration > 0 or usage.unrecorded_calls > 0),
        error=entry.error or ("could not start" if entry.status == "error" else None),
    )


def paired_difference(
    arm: ArmResult, base: ArmResult, k: int, samples: int = BOOTSTRAP_SAMPLES
) -> dict[str, float | None]:
    """Mean over tasks of (arm's success@k - base's), and its 95 % paired-bootstrap interval."""
    tasks = sorted({r.task for r in base.runs} & {r.task for r in arm.runs})
    if not tasks:
        return {"difference": None, "low": None, "high": None}

    def rate(result: ArmResult, task: str) -> float:
        runs = [r for r in result.runs if r.task == task]
        return sum(r.green_at is not None and r.green_at <= k for r in runs) / len(runs)

    diffs = [rate(arm, t) - rate(base, t) for t in tasks]
    rng = random.Random(0)
    means = sorted(statistics.fmean(rng.choices(diffs, k=len(diffs))) for _ in range(samples))
    return {
        "difference": round(statistics.fmean(diffs), 4),
        "low": round(means[int(0.025 * samples)], 4),
        "high": round(means[int(0.975 * samples) - 1], 4),
    }


def compared(arm: ArmResult, base: ArmResult, k: int) -> dict[str, Any]:
    """The arm's difference from the base, or why there is none: a run of either that could
    not run makes a difference of nothing (every run failing reads as -100 %)."""
    failed = [a.name for a in (arm, base) if a.failed_runs]
    if failed:
        return {"difference": None, "low": None, "high": None, "could_not_run": failed}
    return paired_difference(arm, base, k)


def summarise(arms: list[ArmResult], max_k: int) -> dict[str, Any]:
    """The table's figures, the form `--json` prints."""
    base = arms[0]
    tasks = len({r.task for a in arms for r in a.runs})
    out = []
    for arm in arms:
        greens = [r.green_at for r in arm.runs if r.green_at is not None]
        parts = [r for r in arm.runs if r.counted]
        tokens = [r.tokens for r in parts if r.tokens is not None]  # how many reported any
        costs = [r.cost_usd for r in parts]
        out.append(
            {
                "arm": arm.name,
                "flags": arm.flags,
                "runs": len(arm.runs),
                "failed_runs": arm.failed_runs,
                "success_at_k": {str(k): round(arm.success_at(k), 4) for k in range(1, max_k + 1)},
                "mean_iterations_to_green": round(statistics.fmean(greens), 3) if greens else None,
                # the sum over the runs that reported tokens, and how many did (report.py
                # marks a partial sum); None when none did, never 0
                "tokens": known_sum(tokens),
                "tokens_known_runs": len(tokens),
                # money by its one rule, as in each loop's state: unknown when one run's cost
                # is (report.py says how many reported one); None when no run used anything
                "cost_usd": sum_costs(*costs) if costs else None,
                "cost_known_runs": sum(c is not None for c in costs),
                "counted_runs": len(parts),  # the runs that used anything: the marks' "of"
                "wall_seconds": round(sum(r.wall_seconds for r in arm.runs), 3),
                "vs_" + base.name: compared(arm, base, max_k) if arm is not base else None,
                "loops": [r.__dict__ for r in arm.runs],
            }
        )
    return {
        "max_k": max_k,
        "interval": "95% paired bootstrap over tasks (2000 resamples, seed 0) of success@max_k",
        "tasks": tasks,
        # a bootstrap over a handful of tasks is about those tasks only: its interval is narrow
        # because there is little to resample, not because the difference is known
        "too_few_tasks": tasks < MIN_INTERVAL_TASKS,
        "could_not_run": [a.name for a in arms if a.failed_runs],
        "arms": out,
    }


def run_bench(
    tasks_path: Path,
    *,
    arm_specs: list[str],
    repeats: int,
    jobs: int | None,
    resume: bool,
    view: BatchView,
    cwd: Path | None = None,
) -> tuple[str, dict[str, Any], bool]:
    """Run (or continue) the bench; (bench id, the summary, interrupted)."""
    import os

    from ralph.loop.batch import Batch, check_parity_once
    from ralph.workspace.git import GitWorkspace
    from ralph.workspace.locate import find_repo_root

    if repeats < 1:
        raise ConfigError("--repeats must be at least 1")
    tasks = load_tasks(tasks_path)
    arms = dict(parse_arm(a) for a in arm_specs) if arm_specs else dict(DEFAULT_ARMS)
    if len(arms) < 2:
        raise ConfigError("a bench compares at least two arms", hint="--arm a=... --arm b=...")
    for name, flags in arms.items():
        check_arm(name, flags)
    top = find_repo_root((cwd or Path.cwd()).resolve())
    if top is None:
        raise PreflightError(
            "ralph bench needs a git repository: each run works in a git worktree of its own",
            hint="run it inside the repository the tasks are about",
        )
    root = MemoryStore.discover(top).root
    store = MemoryStore(root)
    if not resume:
        check_parity_once(root, tasks, view)
    commit = GitWorkspace(root).current_commit() or ""
    ident = bench_id(tasks_path, arms, repeats)
    entries = plan(
        store, tasks, arms, repeats, ident=ident, commit=commit, tasks_path=tasks_path,
        resume=resume,
    )  # fmt: skip
    batch_entries: list[Entry] = list(entries)
    interrupted = Batch(root, store, batch_entries, view).run(jobs or os.cpu_count() or 1)
    results = [ArmResult(name, flags) for name, flags in arms.items()]
    by_name = {a.name: a for a in results}
    for entry in entries:
        by_name[entry.arm].runs.append(read_run(store, entry))
    max_k = max([r.iterations for a in results for r in a.runs] + [1])
    summary = {"bench_id": ident, "commit": commit, "repeats": repeats}
    summary |= summarise(results, max_k)
    summary["interrupted"] = interrupted
    atomic_write_json(bench_dir(store, ident) / "results.json", summary)
    return ident, summary, interrupted
