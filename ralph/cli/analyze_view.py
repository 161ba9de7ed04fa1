"""How `ralph analyze` looks on a terminal: the labelled headline, rich tables, sparklines and a
plotted curve for a single loop. The figures are analyze/stats.py's; CSV and HTML are
analyze/report.py's."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ralph.analyze import trace_stats
from ralph.analyze.report import (
    bar,
    duration,
    effectiveness_rows,
    green_at,
    money,
    num,
    pct,
    series_iterations,
    tokens_text,
)
from ralph.glyphs import clip, plural, sparkline
from ralph.ids import short_id
from ralph.rendering import Rows

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult

    from ralph.analyze.stats import Analysis, LoopAnalysis

MAX_ROWS = 50  # loops shown in the terminal table; --json/--csv/--html have them all
WIDE_TERMINAL = 130  # columns needed for the full loops table


def _table(title: str, columns: list[str]) -> Rows:
    """A table as every listing is one (`rendering.Rows`): on a terminal its columns leave each
    its longest word whole (a loop id, a path, a figure), in a pipe tab-separated lines."""
    return Rows(title, columns, titled=True)


def _acceptance(acceptance: dict[str, Any]) -> str:
    """`acceptance 50% (1 of 2 reviewed)`: how much of the loops' work people took (feedback,
    apply, prune), next to the success rate."""
    rate, reviewed = acceptance.get("acceptance_rate"), acceptance.get("reviewed", 0)
    return f"acceptance {pct(rate)} ({acceptance.get('accepted', 0)} of {reviewed} reviewed)"


def headline(a: Analysis, width: int = 80) -> list[str]:
    """The figures of the whole memory, each with its label, joined by ` · ` into lines of
    at most `width` characters (a figure is never split)."""
    s = a.summary
    parts = [
        f"{plural(s.loops, 'loop')}, {plural(s.iterations, 'iteration')}",
        f"success rate {pct(s.success_rate)} "
        f"({s.green_loops} of {s.loops - s.nothing_to_do} green)",
    ]
    if s.nothing_to_do:
        parts.append(f"{plural(s.nothing_to_do, 'loop')} green at the start (nothing to do)")
    if s.acceptance.get("reviewed"):
        parts.append(_acceptance(s.acceptance))
    parts += [
        f"iterations to green: mean {num(s.mean_iterations_to_green, 1)}, "
        f"median {num(s.median_iterations_to_green, 1)}",
        f"tokens {tokens_text(s.tokens)}",
        f"cost {'unknown' if s.cost_usd is None else money(s.cost_usd)}",
        f"time {duration(s.wall_seconds)}",
    ]
    if s.lessons.get("added"):
        parts.append(_lessons(s.lessons))
    lines = [parts[0]]
    for part in parts[1:]:
        if len(lines[-1]) + 3 + len(part) <= width:
            lines[-1] += f" · {part}"
        else:
            lines.append(part)
    return lines


def _lessons(lessons: dict[str, Any]) -> str:
    """`lessons 4 added, 1 merged, 1 retired, helped 50% of 6 offers`: what the memory taught."""
    offered = lessons.get("offered", 0)
    helped = (
        f"helped {pct(lessons.get('helped_share'))} of {plural(offered, 'offer')}"
        if offered
        else "none offered yet"
    )
    return (
        f"lessons {lessons['added']} added, {lessons['merged']} merged, "
        f"{lessons['retired']} retired, {helped}"
    )


def render(a: Analysis, console: Console) -> None:
    """`ralph analyze` on `console` (tests and the command alike)."""
    console.print(AnalysisView(a), crop=False)


@dataclass
class AnalysisView:
    """The analysis on a terminal: the headline, the curve of a single loop, then a table per
    subject; a narrow terminal gets the loops table's main columns (its JSON form is
    `analyze.stats.analysis_json`, the documented object)."""

    analysis: Analysis

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from rich.text import Text

        a = self.analysis
        s = a.summary
        if not a.loops:
            yield Text("no loops match" if a.filters else "no loops yet")
        else:
            for n, line in enumerate(headline(a, max(40, options.max_width))):
                yield Text(line, style="bold" if n == 0 else "")
            if len(a.loops) == 1:
                yield curve(a.loops[0])
            yield from _loops(a, options.max_width, console.is_terminal)
            yield from _success(a)
            yield from _categories(a)
            yield from _effectiveness(a)
            yield from _breakthroughs(a)
            actions = trace_stats.summary_line([r for loop in a.loops for r in loop.records])
            if actions:
                yield Text(actions)
            if s.recurring_root_causes:
                columns = ["n", "root cause", "loops"]
                table = _table("recurring root causes (not learnt from)", columns)
                for c in s.recurring_root_causes[:20]:
                    table.rows.append([str(len(c.occurrences)), c.root_cause, str(len(c.loops))])
                yield table
        if a.invalid_files:
            yield Text(f"{plural(len(a.invalid_files), 'invalid file')}, skipped:", style="yellow")
            for f in a.invalid_files[:20]:
                yield Text(f"  {f.path}: {f.reason}")


def _loops(a: Analysis, width: int, terminal: bool) -> Iterator[Any]:
    """Narrow terminals keep the figures that matter most; --csv and --json have them all. A
    loop is named by its whole id where the table can hold it whole, else by its short id
    (which every command takes); a pipe gets every column, whole."""
    from rich.text import Text

    table = _loops_table(a, width >= WIDE_TERMINAL or not terminal, short=False)
    if terminal and not table.fits(width):
        table = _loops_table(a, width >= WIDE_TERMINAL, short=True)
    yield table
    if len(a.loops) > MAX_ROWS:
        yield Text(
            f"{plural(len(a.loops) - MAX_ROWS, 'older loop')} not shown; see --csv", style="dim"
        )


def _loops_table(a: Analysis, wide: bool, *, short: bool) -> Rows:
    columns = ["loop", "status", "iter", "green", "reward", "rate"]
    if wide:
        columns += ["jumps", "errors", "tokens", "cost", "time", "stop"]
    table = _table("loops (by short id)" if short else "loops", columns)
    for loop in a.loops[-MAX_ROWS:]:
        cells = [
            short_id(loop.loop_id) if short else loop.loop_id,
            loop.status,
            str(loop.last_iteration),
            green_at(loop),
            sparkline(loop.rewards),
            num(loop.learning_rate, 3, signed=True),
        ]
        if wide:
            cells += [
                str(len(loop.breakthroughs)),
                num(loop.error_trend, 1, signed=True),
                tokens_text(loop.tokens),
                money(loop.cost_usd),
                duration(loop.wall_seconds),
                loop.stop_reason or "-",
            ]
        table.rows.append(cells)
    return table


def _success(a: Analysis) -> Iterator[Any]:
    from rich.text import Text

    if not a.summary.success_at_k:
        return
    yield Text.from_markup("[bold]success@k[/] (share of loops green by iteration k)")
    for k, share in a.summary.success_at_k.items():
        yield Text(f"  k={k:<3} {bar(share, 40)} {pct(share):>4}")


def _categories(a: Analysis) -> Iterator[Any]:
    cats = a.summary.failure_categories
    if not cats:
        return
    total = sum(c.iterations for c in cats)
    table = _table("failure categories", ["category", "iterations", "", "loops", "per loop"])
    for c in cats:
        table.rows.append(
            [
                c.category,
                str(c.iterations),
                bar(c.iterations / total, 12),
                str(c.loops),
                num(c.iterations_per_loop, 1),
            ]
        )
    yield table


def _effectiveness(a: Analysis) -> Iterator[Any]:
    eff = a.summary.effectiveness
    if not eff.overall.uses and not eff.lessons.uses:
        return
    table = _table("reflection effectiveness", ["", "uses", "improved when in context"])
    for row in effectiveness_rows(a):
        table.rows.append([str(cell) for cell in row])
    yield table


def _breakthroughs(a: Analysis) -> Iterator[Any]:
    jumps = [(loop, b) for loop in a.loops for b in loop.breakthroughs]
    if not jumps:
        return
    jumps.sort(key=lambda pair: -pair[1].delta)
    title = (
        f"breakthroughs (reward +0.3 or more): {len(jumps)}, the largest"
        if len(jumps) > 20
        else "breakthroughs (reward +0.3 or more)"
    )
    table = _table(title, ["loop", "iter", "reward", "after the reflection of"])
    for loop, b in jumps[:20]:
        after = "-" if b.reflection_iteration is None else f"{b.reflection_iteration}: "
        after += clip(b.reflection or "", 80)
        after += f" ({b.category})" if b.category else ""
        table.rows.append(
            [
                short_id(loop.loop_id),  # the loops table above has the whole id
                str(b.iteration),
                f"{b.reward_before:.2f} → {b.reward:.2f}",
                after,
            ]
        )
    yield table


def curve(loop: LoopAnalysis, height: int = 10, width: int = 60) -> Any:
    """The reward series of one loop plotted in character cells (x: iteration, y: reward)."""
    from rich.text import Text

    series, iterations = loop.rewards, series_iterations(loop)
    if not series:
        return Text(f"{loop.loop_id}: no rewards yet")
    if len(series) > width:  # a very long loop: plot evenly spaced iterations
        picks = [round(i * (len(series) - 1) / (width - 1)) for i in range(width)]
        series, iterations = [series[i] for i in picks], [iterations[i] for i in picks]
    step = max(1, min(6, width // len(series)))
    cols = step * (len(series) - 1) + 1
    grid = [[" "] * cols for _ in range(height)]
    styles = [["" for _ in range(cols)] for _ in range(height)]
    rows = [round(v * (height - 1)) for v in series]
    passed = {r.iteration for r in loop.records if r.passed}
    broke = {r.iteration for r in loop.records if r.regressions}  # a dip, however small
    for i, row in enumerate(rows):
        if i + 1 < len(rows):
            for c in range(1, step):  # a dotted segment to the next point
                mid = round(row + (rows[i + 1] - row) * c / step)
                grid[height - 1 - mid][i * step + c] = "·"
        harm = iterations[i] in broke
        grid[height - 1 - row][i * step] = "✕" if harm else "●"
        colour = "red" if harm else "green" if iterations[i] in passed else "yellow"
        styles[height - 1 - row][i * step] = colour
    text = Text(f"reward per iteration, {loop.loop_id}\n", style="bold")
    for y in range(height):
        label = f"{1 - y / (height - 1):.1f} " if y % 3 == 0 or y == height - 1 else "    "
        text.append(label + "│")
        for x in range(cols):
            text.append(grid[y][x], style=styles[y][x] or "dim")
        text.append("\n")
    text.append("    └" + "─" * cols + "\n     ")
    labels = [" "] * (cols + 4)
    for i in range(len(series)):
        if i % max(1, 4 // step) == 0:
            label = str(iterations[i])  # a long number is cut at the axis's end
            labels[i * step : i * step + len(label)] = label[: len(labels) - i * step]
    note = "iteration; 0 is the baseline" if loop.baseline_reward is not None else "iteration"
    if broke:
        note += "; ✕ broke what worked before"
    text.append("".join(labels).rstrip() + f"  ({note})")
    return text


# HTML ---------------------------------------------------------------------------------------
