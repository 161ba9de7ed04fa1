"""How an `Analysis` is shown: rich tables and terminal charts, CSV rows, a self-contained HTML.

Kept apart from `analyze.py` so the figures stay testable without rich or matplotlib, and so
`ralph analyze --json` never imports either. The HTML charts are drawn by matplotlib (the `plot`
extra) and inlined as SVG; the page loads nothing from anywhere.
"""

from __future__ import annotations

import csv
import html
import io
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ralph.errors import RalphError
from ralph.files import atomic_write_text
from ralph.glyphs import clip, sparkline
from ralph.ids import short_id

if TYPE_CHECKING:
    from rich.console import Console

    from ralph.analyze.stats import Analysis, LoopAnalysis

EIGHTHS = " ▏▎▍▌▋▊▉█"
MAX_ROWS = 50  # loops shown in the terminal table; --json/--csv/--html have them all
WIDE_TERMINAL = 130  # columns needed for the full loops table

CSV_COLUMNS = [
    "loop_id",
    "task",
    "status",
    "iteration",
    "timestamp",
    "reward",
    "reward_change",
    "passed",
    "error_count",
    "failure_category",
    "root_cause",
    "reflection_source",
    "quality_flags",
    "reflections_in_context",
    "tokens",
    "cost_usd",
    "duration_s",
    "reflection",
]


# formatting ---------------------------------------------------------------------------------
def bar(share: float, width: int) -> str:
    """A horizontal bar of `share` (0..1) of `width` cells, to the eighth of a cell."""
    eighths = round(min(1.0, max(0.0, share)) * width * 8)
    full, rest = divmod(eighths, 8)
    return ("█" * full + (EIGHTHS[rest] if rest else "")).ljust(width)


def _num(value: float | None, digits: int = 2, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


def _tokens(value: int | None) -> str:
    return "unknown" if value is None else f"{value:,}"


def _money(value: float | None) -> str:
    return "-" if value is None else f"${value:.2f}"


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds / 60:.1f}m"
    return f"{seconds / 3600:.1f}h"


def series_iterations(loop: LoopAnalysis) -> list[int]:
    """The iteration of each entry of the reward series: 0 for the baseline, then the records'."""
    head = [0] if loop.baseline_reward is not None else []
    return head + [r.iteration for r in loop.records]


def _green(loop: LoopAnalysis) -> str:
    return "-" if loop.iterations_to_green is None else str(loop.iterations_to_green)


# CSV ----------------------------------------------------------------------------------------
def write_csv(a: Analysis, out: TextIO) -> None:
    """One row per iteration; the baseline, when known, is the row of iteration 0."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for loop in a.loops:
        head = [loop.loop_id, loop.task or "", loop.status]
        previous = loop.baseline_reward
        if previous is not None:
            base_errors = "" if loop.baseline_error_count is None else loop.baseline_error_count
            blank = [""] * 8
            writer.writerow([*head, 0, "", previous, "", "", base_errors, *blank, ""])
        for r in loop.records:
            change = "" if previous is None else round(r.reward - previous, 6)
            writer.writerow(
                [
                    *head,
                    r.iteration,
                    r.timestamp,
                    r.reward,
                    change,
                    str(r.passed).lower(),
                    r.error_count,
                    r.category or "",
                    r.root_cause or "",
                    r.source or "",
                    ";".join(r.quality_flags),
                    " ".join(map(str, r.in_context)),
                    "" if r.tokens is None else r.tokens,
                    "" if r.cost_usd is None else r.cost_usd,
                    r.duration_ms / 1000,
                    r.reflection,
                ]
            )
            previous = r.reward


# terminal -----------------------------------------------------------------------------------
def _table(title: str, columns: list[str], *wrap: int) -> Any:
    """A table whose columns `wrap` (default the first) hold the long texts (an id, a root
    cause) and wrap; every other column (figures, category names) keeps its width, so a narrow
    terminal never shows a number or a word one piece per line."""
    from rich import box
    from rich.table import Table

    table = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left")
    for n, column in enumerate(columns):
        flexible = n in (wrap or (0,))
        table.add_column(column, overflow="fold", no_wrap=not flexible)
    return table


def _acceptance(acceptance: dict[str, Any]) -> str:
    """`acceptance 50% (1 of 2 reviewed)`: how much of the loops' work people took (feedback,
    apply, prune), next to the success rate."""
    rate, reviewed = acceptance.get("acceptance_rate"), acceptance.get("reviewed", 0)
    return f"acceptance {_pct(rate)} ({acceptance.get('accepted', 0)} of {reviewed} reviewed)"


def headline(a: Analysis, width: int = 80) -> list[str]:
    """The figures of the whole memory, each with its label, joined by ` · ` into lines of
    at most `width` characters (a figure is never split)."""
    s = a.summary
    parts = [
        f"{s.loops} loop{'' if s.loops == 1 else 's'}, "
        f"{s.iterations} iteration{'' if s.iterations == 1 else 's'}",
        f"success rate {_pct(s.success_rate)} ({s.green_loops} of {s.loops} green)",
    ]
    if s.acceptance.get("reviewed"):
        parts.append(_acceptance(s.acceptance))
    parts += [
        f"iterations to green: mean {_num(s.mean_iterations_to_green, 1)}, "
        f"median {_num(s.median_iterations_to_green, 1)}",
        f"tokens {_tokens(s.tokens)}",
        f"cost {'unknown' if s.cost_usd is None else _money(s.cost_usd)}",
        f"time {_duration(s.wall_seconds)}",
    ]
    lines = [parts[0]]
    for part in parts[1:]:
        if len(lines[-1]) + 3 + len(part) <= width:
            lines[-1] += f" · {part}"
        else:
            lines.append(part)
    return lines


def render(a: Analysis, console: Console) -> None:
    from rich.markup import escape

    s = a.summary
    if not a.loops:
        console.print("no loops match" if a.filters else "no loops yet")
    else:
        for n, line in enumerate(headline(a, max(40, console.width))):
            console.print(f"[bold]{escape(line)}[/]" if n == 0 else escape(line))
        if len(a.loops) == 1:
            console.print(curve(a.loops[0]))
        _render_loops(a, console)
        _render_success(a, console)
        _render_categories(a, console)
        _render_effectiveness(a, console)
        _render_breakthroughs(a, console)
        from ralph.analyze import trace_stats

        actions = trace_stats.summary_line([r for loop in a.loops for r in loop.records])
        if actions:
            console.print(actions, markup=False)
        if s.recurring_root_causes:
            table = _table(
                "recurring root causes (not learnt from)", ["n", "root cause", "loops"], 1
            )
            for c in s.recurring_root_causes[:20]:
                table.add_row(str(len(c.occurrences)), escape(c.root_cause), str(len(c.loops)))
            console.print(table)
    if a.invalid_files:
        console.print(f"[yellow]{len(a.invalid_files)} invalid file(s), skipped:[/]")
        for f in a.invalid_files[:20]:
            console.print(f"  {escape(f.path)}: {escape(f.reason)}")


def _render_loops(a: Analysis, console: Console) -> None:
    from rich.markup import escape

    # Narrow terminals keep the figures that matter most; --csv and --json have them all.
    wide = console.width >= WIDE_TERMINAL
    columns = ["loop", "status", "iter", "green", "reward", "rate"]
    if wide:
        columns += ["jumps", "errors", "tokens", "cost", "time", "stop"]
    table = _table("loops", columns)
    for loop in a.loops[-MAX_ROWS:]:
        cells = [
            escape(loop.loop_id),
            loop.status,
            str(loop.last_iteration),
            _green(loop),
            sparkline(loop.rewards),
            _num(loop.learning_rate, 3, signed=True),
        ]
        if wide:
            cells += [
                str(len(loop.breakthroughs)),
                _num(loop.error_trend, 1, signed=True),
                _tokens(loop.tokens),
                _money(loop.cost_usd),
                _duration(loop.wall_seconds),
                escape(loop.stop_reason or "-"),
            ]
        table.add_row(*cells)
    console.print(table)
    if len(a.loops) > MAX_ROWS:
        console.print(f"[dim]{len(a.loops) - MAX_ROWS} older loop(s) not shown; see --csv[/]")


def _render_success(a: Analysis, console: Console) -> None:
    if not a.summary.success_at_k:
        return
    console.print("[bold]success@k[/] (share of loops green by iteration k)")
    for k, share in a.summary.success_at_k.items():
        console.print(f"  k={k:<3} {bar(share, 40)} {_pct(share):>4}", highlight=False)


def _render_categories(a: Analysis, console: Console) -> None:
    cats = a.summary.failure_categories
    if not cats:
        return
    total = sum(c.iterations for c in cats)
    table = _table("failure categories", ["category", "iterations", "", "loops", "per loop"], 2)
    for c in cats:
        table.add_row(
            c.category,
            str(c.iterations),
            bar(c.iterations / total, 12),
            str(c.loops),
            _num(c.iterations_per_loop, 1),
        )
    console.print(table)


def _render_effectiveness(a: Analysis, console: Console) -> None:
    eff = a.summary.effectiveness
    if not eff.overall.uses and not eff.lessons.uses:
        return
    table = _table("reflection effectiveness", ["", "uses", "improved when in context"])
    for row in _effectiveness_rows(a):
        table.add_row(*(str(cell) for cell in row))
    console.print(table)


def _effectiveness_rows(a: Analysis) -> list[list[Any]]:
    eff = a.summary.effectiveness
    rows: list[list[Any]] = [["all", eff.overall.uses, _pct(eff.overall.share)]]
    for label, rates in (("source", eff.by_source), ("flag", eff.by_quality_flag)):
        rows += [[f"{label}: {k}", r.uses, _pct(r.share)] for k, r in sorted(rates.items())]
    if eff.lessons.uses:
        rows.append(["lessons from other loops", eff.lessons.uses, _pct(eff.lessons.share)])
    return rows


def _render_breakthroughs(a: Analysis, console: Console) -> None:
    from rich.markup import escape

    jumps = [(loop, b) for loop in a.loops for b in loop.breakthroughs]
    if not jumps:
        return
    jumps.sort(key=lambda pair: -pair[1].delta)
    title = (
        f"breakthroughs (reward +0.3 or more): {len(jumps)}, the largest"
        if len(jumps) > 20
        else "breakthroughs (reward +0.3 or more)"
    )
    table = _table(title, ["loop", "iter", "reward", "after the reflection of"], 0, 3)
    for loop, b in jumps[:20]:
        after = "-" if b.reflection_iteration is None else f"{b.reflection_iteration}: "
        after += escape(clip(b.reflection or "", 80))
        after += f" [dim]({b.category})[/]" if b.category else ""
        table.add_row(
            escape(short_id(loop.loop_id)),  # the loops table above has the whole id
            str(b.iteration),
            f"{b.reward_before:.2f} → {b.reward:.2f}",
            after,
        )
    console.print(table)


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
    for i, row in enumerate(rows):
        if i + 1 < len(rows):
            for c in range(1, step):  # a dotted segment to the next point
                mid = round(row + (rows[i + 1] - row) * c / step)
                grid[height - 1 - mid][i * step + c] = "·"
        grid[height - 1 - row][i * step] = "●"
        styles[height - 1 - row][i * step] = "green" if iterations[i] in passed else "yellow"
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
            for n, ch in enumerate(str(iterations[i])):
                labels[i * step + n] = ch
    note = "iteration; 0 is the baseline" if loop.baseline_reward is not None else "iteration"
    text.append("".join(labels).rstrip() + f"  ({note})")
    return text


# HTML ---------------------------------------------------------------------------------------
def write_html(a: Analysis, path: Path) -> None:
    """A report that stands alone: inline CSS, matplotlib charts inline as SVG, no links out."""
    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError:
        raise RalphError(
            "--html needs matplotlib, which is not installed",
            hint="pip install 'ralph-loop[plot]'",
        ) from None
    charts: list[tuple[str, str]] = []
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "ralph"}):
        for n, (title, draw) in enumerate(
            (
                ("Reward per iteration", _draw_rewards),
                ("success@k", _draw_success),
                ("Failure categories", _draw_categories),
            )
        ):
            fig = Figure(figsize=(7, 3.6), layout="constrained")
            if draw(fig, a):
                charts.append((title, _svg(fig, f"c{n}")))
    atomic_write_text(path, _page(a, charts))


def _svg(fig: Any, prefix: str) -> str:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Creator": None, "Date": None, "Format": None})
    text = buffer.getvalue()
    text = text[text.index("<svg") :]
    # several figures share one page: their ids (clip paths, markers) must not collide
    text = re.sub(r'id="([^"]+)"', rf'id="{prefix}-\1"', text)
    return re.sub(r'(href="#|url\(#)([^")]+)', rf"\1{prefix}-\2", text)


def _draw_rewards(fig: Any, a: Analysis) -> bool:
    from matplotlib.ticker import MaxNLocator

    ax = fig.subplots()
    many = len(a.loops) > 12
    longest: list[list[float]] = []
    for loop in a.loops:
        xs = series_iterations(loop)
        if not xs:
            continue
        if many:  # a cloud of thin lines under the mean curve; no legend entry each
            ax.plot(xs, loop.rewards, color="tab:blue", alpha=0.15, linewidth=0.8)
        else:
            ax.plot(xs, loop.rewards, marker="o", label=legend_label(loop))
        for x, value in zip(xs, loop.rewards, strict=True):
            while len(longest) <= x:
                longest.append([])
            longest[x].append(value)
    if not longest:
        return False
    if many:
        means = [(x, sum(v) / len(v)) for x, v in enumerate(longest) if v]
        ax.plot(*zip(*means, strict=True), color="tab:red", linewidth=2.2, label="mean")
    if many or len(a.loops) > 1:  # under the chart, where it hides no curve, at a size to read
        rows = 1 if many else (len(a.loops) + 1) // 2
        fig.set_figheight(fig.get_figheight() + 0.28 * rows)
        fig.legend(loc="outside lower center", ncols=1 if many else 2, fontsize=9)
    ax.set(xlabel="iteration (0 = baseline)", ylabel="reward", ylim=(-0.02, 1.05))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
    return True


def legend_label(loop: LoopAnalysis, width: int = 26) -> str:
    """`b9b8d2a1 make the date parser…`: the loop's short id and its task, short enough for
    two legend entries side by side."""
    task = " ".join((loop.task or "").split())
    return f"{short_id(loop.loop_id)} {clip(task, width)}".strip()


def _draw_success(fig: Any, a: Analysis) -> bool:
    from matplotlib.ticker import MaxNLocator

    ks = a.summary.success_at_k
    if not ks:
        return False
    ax = fig.subplots()
    ax.bar(list(ks), [v * 100 for v in ks.values()], color="tab:green")
    ax.set(xlabel="k (iterations)", ylabel="% of loops green by iteration k", ylim=(0, 100))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(axis="y", alpha=0.3)
    return True


def _draw_categories(fig: Any, a: Analysis) -> bool:
    from matplotlib.ticker import MaxNLocator

    cats = a.summary.failure_categories
    if not cats:
        return False
    ax = fig.subplots()
    names = [c.category for c in reversed(cats)]
    bars = ax.barh(names, [c.iterations for c in reversed(cats)], color="tab:orange")
    ax.bar_label(bars, padding=3, fontsize=9)
    ax.set(xlabel="failed iterations")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(axis="x", alpha=0.3)
    return True


CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2rem;color:#222;max-width:1400px}
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2rem}
.cards{display:flex;flex-wrap:wrap;gap:.8rem}.card{background:#f4f6f8;border-radius:6px;
padding:.6rem 1rem}.card b{display:block;font-size:1.3rem}
.row{display:flex;flex-wrap:wrap;gap:2rem;align-items:flex-start}.row>*{flex:1 1 480px}
svg{max-width:100%;height:auto}table{border-collapse:collapse;font-size:13px}
th,td{padding:.25rem .6rem;border-bottom:1px solid #e3e3e3;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}.spark{font-family:monospace}
"""


def _html_table(columns: list[str], rows: list[list[Any]]) -> str:
    if not rows:
        return "<p>none</p>"
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>"
        + "".join(
            f"<td class='n'>{v}</td>"
            if isinstance(v, int | float)
            else f"<td class='{v[0]}'>{html.escape(v[1])}</td>"
            if isinstance(v, tuple)
            else f"<td>{html.escape(v)}</td>"
            for v in row
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _page(a: Analysis, charts: list[tuple[str, str]]) -> str:
    s = a.summary
    cards = [
        ("loops", str(s.loops)),
        ("success rate", _pct(s.success_rate)),
        *(
            [
                (
                    "acceptance",
                    f"{_pct(s.acceptance['acceptance_rate'])} of {s.acceptance['reviewed']}",
                )
            ]
            if s.acceptance.get("reviewed")
            else []
        ),
        ("mean iterations to green", _num(s.mean_iterations_to_green, 1)),
        ("median iterations to green", _num(s.median_iterations_to_green, 1)),
        ("iterations", str(s.iterations)),
        ("tokens", _tokens(s.tokens)),
        ("cost", "unknown" if s.cost_usd is None else _money(s.cost_usd)),
        ("wall time", _duration(s.wall_seconds)),
        ("invalid files", str(len(a.invalid_files))),
    ]
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<title>ralph analyze</title><style>" + CSS + "</style></head><body>",
        "<h1>ralph analyze</h1>",
        f"<p>{html.escape(_when())}"
        + "".join(f" · {html.escape(k)}: {html.escape(v)}" for k, v in a.filters.items())
        + "</p>",
        "<div class='cards'>"
        + "".join(
            f"<div class='card'>{html.escape(k)}<b>{html.escape(v)}</b></div>" for k, v in cards
        )
        + "</div>",
    ]
    tables = _side_tables(a)
    for title, svg in charts:
        parts.append(f"<h2>{html.escape(title)}</h2><div class='row'><figure>{svg}</figure>")
        parts.append(f"<div>{tables.get(title, '')}</div></div>")
    parts.append("<h2>Loops</h2>" + _loops_table(a))
    for title, table in tables.items():
        if title not in dict(charts):
            parts.append(f"<h2>{html.escape(title)}</h2>{table}")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _when() -> str:
    return "generated " + datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _side_tables(a: Analysis) -> dict[str, str]:
    """Tables keyed by the chart they sit beside; those without a chart follow the loops."""
    s = a.summary
    effect_rows = _effectiveness_rows(a)
    breakthroughs = [
        [loop.loop_id, b.iteration, f"{b.reward_before:.2f} → {b.reward:.2f}", b.reflection or "-"]
        for loop in a.loops
        for b in loop.breakthroughs
    ]
    tables = {
        "Reward per iteration": _html_table(
            ["", ""],
            [
                ["mean learning rate", _num(s.mean_learning_rate, 3, signed=True)],
                ["breakthroughs (≥ 0.3)", s.breakthroughs],
            ],
        ),
        "success@k": _html_table(
            ["k", "green by k"], [[k, _pct(v)] for k, v in s.success_at_k.items()]
        ),
        "Failure categories": _html_table(
            ["category", "iterations", "loops", "per loop", "mean to green"],
            [
                [
                    c.category,
                    c.iterations,
                    c.loops,
                    round(c.iterations_per_loop, 2),
                    _num(c.mean_iterations_to_green, 1),
                ]
                for c in s.failure_categories
            ],
        ),
        "Reflection effectiveness": _html_table(["reflections", "uses", "improved"], effect_rows),
        "Recurring root causes": _html_table(
            ["root cause", "iterations", "loops"],
            [
                [c.root_cause, len(c.occurrences), ", ".join(c.loops)]
                for c in s.recurring_root_causes
            ],
        ),
        "Breakthroughs": _html_table(["loop", "iteration", "reward", "preceded by"], breakthroughs),
    }
    if a.invalid_files:
        tables["Invalid files"] = _html_table(
            ["path", "reason"], [[f.path, f.reason] for f in a.invalid_files]
        )
    return tables


def _loops_table(a: Analysis) -> str:
    columns = ["loop", "task", "status", "iterations", "to green", "rewards", "learning rate"]
    columns += ["breakthroughs", "error trend", "tokens", "cost", "wall time", "stop reason"]
    rows = [
        [
            loop.loop_id,
            loop.task or "-",
            loop.status,
            loop.last_iteration,
            _green(loop),
            ("spark", sparkline(loop.rewards)),
            _num(loop.learning_rate, 3, signed=True),
            len(loop.breakthroughs),
            _num(loop.error_trend, 1, signed=True),
            _tokens(loop.tokens) if loop.tokens is None else loop.tokens,
            _money(loop.cost_usd),
            _duration(loop.wall_seconds),
            loop.stop_reason or "-",
        ]
        for loop in a.loops
    ]
    return _html_table(columns, rows)
