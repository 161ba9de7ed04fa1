"""What every benchmark prints the same way: the machine's load, medians, ratios to a floor.

A figure is only meaningful against its floor measured in the same run on the same machine
(the slowest check alone, a plain `json.load` of every record, a loop with no ralph around it),
so every benchmark prints `ratio = ours / floor` of medians over several runs, and says whether
the machine was busy: on a shared 2-core machine another process's tests move both numbers.

Every benchmark times the ralph it imports or starts with `python -m ralph`, so another checkout
is measured with `PYTHONPATH=/path/to/it python bench/NAME.py` (the before/after in README.md).
"""

from __future__ import annotations

import compileall
import os
import statistics
from collections.abc import Sequence

BUSY_LOAD = 0.7  # 1-minute load per core above which a run is reported as busy


def compile_bytecode() -> None:
    """Write ralph's bytecode, as `pip install` does for a user (and did for its dependencies).

    A warm-up run cannot be trusted to: with PYTHONDONTWRITEBYTECODE set (some CI images and
    sandboxes set it), every timed run would compile ralph's changed modules again (~50 ms)."""
    import ralph

    compileall.compile_dir(os.path.dirname(ralph.__file__), quiet=1)


def load() -> float:
    return os.getloadavg()[0]


def machine(before: float, after: float) -> str:
    """`load 0.31 -> 0.95 on 2 cores (quiet)`: busy when either reading is high per core."""
    cores = os.cpu_count() or 1
    busy = max(before, after) / cores > BUSY_LOAD
    word = "BUSY: other work shared the cores, ratios are pessimistic" if busy else "quiet"
    return f"machine: load (1 min) {before:.2f} -> {after:.2f} on {cores} cores ({word})"


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def runs(values: Sequence[float], unit: str = "s", scale: float = 1.0) -> str:
    digits = 3 if unit == "s" else 1
    return ", ".join(f"{v * scale:.{digits}f}" for v in values)


def ratio_line(
    name: str,
    ours: Sequence[float],
    floor: Sequence[float],
    *,
    goal: float | None = None,
    at_most: bool = True,
    unit: str = "s",
    scale: float = 1.0,
) -> str:
    """`name  median X  / floor Y  = ratio R  (goal <= G: met)`.

    With one floor per run (measured right before or after it), R is the median of the
    per-run ratios, which a load that changes during the benchmark moves least; otherwise
    the ratio of the medians.
    """
    ours_m, floor_m = median(ours), median(floor)
    if len(ours) == len(floor) and all(floor):
        ratio = median([o / f for o, f in zip(ours, floor, strict=True)])
    else:
        ratio = ours_m / floor_m if floor_m else float("inf")
    digits = 3 if unit == "s" else 1
    text = (
        f"{name:<44} {ours_m * scale:8.{digits}f} {unit} / floor {floor_m * scale:8.{digits}f}"
        f" {unit} = ratio {ratio:5.2f}"
    )
    if goal is not None:
        met = ratio <= goal if at_most else ratio >= goal
        text += f"   goal {'<=' if at_most else '>='} {goal:.2f}: {'met' if met else 'NOT met'}"
    return text + f"   (runs: {runs(ours, unit, scale)})"
