"""How an `Analysis` is shown: rich tables and terminal charts, CSV rows, a self-contained HTML.

Kept apart from `analyze.py` so the figures stay testable without rich or matplotlib, and so
`ralph analyze --json` never imports either. The HTML charts are drawn by matplotlib (the `plot`
extra) and inlined as SVG (the reward chart's curves and legend: curves.py); the page loads
nothing from anywhere and fits a phone's width.
"""

from __future__ import annotations

import csv
import html
import io
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ralph.analyze.curves import Curve, draw, legend, with_titles
from ralph.errors import RalphError
from ralph.files import atomic_write_text
from ralph.glyphs import sparkline
from ralph.ids import short_id

if TYPE_CHECKING:
    from ralph.analyze.stats import Analysis, LoopAnalysis

EIGHTHS = " ▏▎▍▌▋▊▉█"
FIGURE_INCHES = (5.2, 3.4)  # 1:1 in a wide column; on a phone the text stays readable
FONT_PT = 11
PROSE = 24  # a longer table cell wraps (at a space or hyphen); the others keep to one line

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
    "regressions",
]


# formatting ---------------------------------------------------------------------------------
def bar(share: float, width: int) -> str:
    """A horizontal bar of `share` (0..1) of `width` cells, to the eighth of a cell."""
    eighths = round(min(1.0, max(0.0, share)) * width * 8)
    full, rest = divmod(eighths, 8)
    return ("█" * full + (EIGHTHS[rest] if rest else "")).ljust(width)


def num(value: float | None, digits: int = 2, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


UNKNOWN = "unknown"  # a figure nobody reported: the one word for it in every view


def tokens_text(value: int | None) -> str:
    return UNKNOWN if value is None else f"{value:,}"


def money(value: float | None) -> str:
    """A cost as every analyze view shows it: cards, tables and tooltips say the same."""
    return UNKNOWN if value is None else f"${value:.2f}"


def duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds / 60:.1f}m"
    return f"{seconds / 3600:.1f}h"


def series_iterations(loop: LoopAnalysis) -> list[int]:
    """The iteration of each entry of the reward series: 0 for the baseline, then the records'."""
    head = [0] if loop.baseline_reward is not None else []
    return head + [r.iteration for r in loop.records]


def green_at(loop: LoopAnalysis) -> str:
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
            writer.writerow([*head, 0, "", previous, "", "", base_errors, *blank, "", ""])
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
                    "" if r.regressions is None else r.regressions,
                ]
            )
            previous = r.reward


# terminal -----------------------------------------------------------------------------------
def effectiveness_rows(a: Analysis) -> list[list[Any]]:
    eff = a.summary.effectiveness
    rows: list[list[Any]] = [["all", eff.overall.uses, pct(eff.overall.share)]]
    for label, rates in (("source", eff.by_source), ("flag", eff.by_quality_flag)):
        rows += [[f"{label}: {k}", r.uses, pct(r.share)] for k, r in sorted(rates.items())]
    if eff.lessons.uses:
        rows.append(["lessons from other loops", eff.lessons.uses, pct(eff.lessons.share)])
    return rows


def write_html(a: Analysis, path: Path) -> None:
    """A report that stands alone: inline CSS, matplotlib charts inline as SVG, no links out."""
    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError:
        raise RalphError(
            "--html needs matplotlib, which is not installed",
            hint="pip install 'ralph-reflexion[plot]'",
        ) from None
    curves = [_curve(loop) for loop in a.loops]
    drawings: list[tuple[str, Callable[[Any], bool]]] = [
        ("Reward per iteration", lambda fig: draw(fig, curves)),
        ("success@k", lambda fig: _draw_success(fig, a)),
        ("Failure categories", lambda fig: _draw_categories(fig, a)),
    ]
    charts: list[tuple[str, str]] = []
    with matplotlib.rc_context(
        {"svg.fonttype": "none", "svg.hashsalt": "ralph", "font.size": FONT_PT}
    ):
        for n, (title, drawn) in enumerate(drawings):
            fig = Figure(figsize=FIGURE_INCHES, layout="constrained")
            if drawn(fig):
                charts.append((title, with_titles(_svg(fig, f"c{n}"), f"c{n}-series-", curves)))
    legends = {"Reward per iteration": legend(curves)}
    atomic_write_text(path, _page(a, charts, legends))


def _svg(fig: Any, prefix: str) -> str:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Creator": None, "Date": None, "Format": None})
    text = buffer.getvalue()
    text = text[text.index("<svg") :]
    # several figures share one page: their ids (clip paths, markers) must not collide
    text = re.sub(r'id="([^"]+)"', rf'id="{prefix}-\1"', text)
    return re.sub(r'(href="#|url\(#)([^")]+)', rf"\1{prefix}-\2", text)


def regressed(loop: LoopAnalysis) -> set[int]:
    """The iterations that broke what worked before the loop (their reward is below it)."""
    return {r.iteration for r in loop.records if r.regressions}


def _curve(loop: LoopAnalysis) -> Curve:
    task = " ".join((loop.task or "").split())
    key = short_id(loop.loop_id)
    rewards = " → ".join(f"{r:.2f}" for r in loop.rewards)
    tooltip = f"{key} {task}".strip() + f"\nreward {rewards}\ncost {money(loop.cost_usd)}"
    harmed = frozenset(regressed(loop))
    return Curve(series_iterations(loop), loop.rewards, harmed, key, task, tooltip)


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
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2rem}p{overflow-wrap:anywhere}
.cards{display:grid;gap:.8rem;grid-template-columns:repeat(auto-fill,minmax(9rem,1fr))}
.card{background:#f4f6f8;border-radius:6px;padding:.6rem 1rem}
.card b{display:block;font-size:1.3rem}
.row{display:flex;flex-wrap:wrap;gap:1rem 2rem;align-items:flex-start}
.row>*{flex:1 1 min(30rem,100%);min-width:0}figure{margin:0}svg{max-width:100%;height:auto}
.legend{list-style:none;margin:.6rem 0 0;padding:0;display:grid;gap:.15rem 1.2rem;
grid-template-columns:repeat(auto-fill,minmax(min(19rem,100%),1fr))}
.legend li{display:flex;align-items:center;gap:.45rem;min-width:0}.legend svg{flex:none}
.legend .task{overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.scroll{overflow-x:auto;max-width:100%}table{border-collapse:collapse;font-size:13px}
th,td{padding:.25rem .45rem;border-bottom:1px solid #e3e3e3;text-align:left;white-space:nowrap}
th,td.text{white-space:normal}td.text{min-width:9rem}
td.n{text-align:right;font-variant-numeric:tabular-nums}.spark{font-family:monospace}
@media (max-width:40rem){body{margin:1rem}.row{gap:1rem}.card{padding:.4rem .7rem}}
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
            else f"<td class='text'>{html.escape(v)}</td>"
            if len(v) > PROSE
            else f"<td>{html.escape(v)}</td>"
            for v in row
        )
        + "</tr>"
        for row in rows
    )
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    return f"<div class='scroll'>{table}</div>"  # a wide table scrolls in its box, not the page


def _page(a: Analysis, charts: list[tuple[str, str]], legends: dict[str, str]) -> str:
    s = a.summary
    cards = [
        ("loops", str(s.loops)),
        ("success rate", pct(s.success_rate)),
        *([("nothing to do", str(s.nothing_to_do))] if s.nothing_to_do else []),
        *(
            [
                (
                    "acceptance",
                    f"{pct(s.acceptance['acceptance_rate'])} of {s.acceptance['reviewed']}",
                )
            ]
            if s.acceptance.get("reviewed")
            else []
        ),
        ("mean iterations to green", num(s.mean_iterations_to_green, 1)),
        ("median iterations to green", num(s.median_iterations_to_green, 1)),
        ("iterations", str(s.iterations)),
        ("tokens", tokens_text(s.tokens)),
        ("cost", money(s.cost_usd)),
        ("wall time", duration(s.wall_seconds)),
        ("invalid files", str(len(a.invalid_files))),
    ]
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
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
        figure = f"<figure>{svg}{legends.get(title, '')}</figure>"
        parts.append(f"<h2>{html.escape(title)}</h2><div class='row'>{figure}")
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
    effect_rows = effectiveness_rows(a)
    breakthroughs = [
        [loop.loop_id, b.iteration, f"{b.reward_before:.2f} → {b.reward:.2f}", b.reflection or "-"]
        for loop in a.loops
        for b in loop.breakthroughs
    ]
    tables = {
        "Reward per iteration": _html_table(
            ["", ""],
            [
                ["mean learning rate", num(s.mean_learning_rate, 3, signed=True)],
                ["breakthroughs (≥ 0.3)", s.breakthroughs],
            ],
        ),
        "success@k": _html_table(
            ["k", "green by k"], [[k, pct(v)] for k, v in s.success_at_k.items()]
        ),
        "Failure categories": _html_table(
            ["category", "iterations", "loops", "per loop", "mean to green"],
            [
                [
                    c.category,
                    c.iterations,
                    c.loops,
                    round(c.iterations_per_loop, 2),
                    num(c.mean_iterations_to_green, 1),
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
            green_at(loop),
            ("spark", sparkline(loop.rewards)),
            num(loop.learning_rate, 3, signed=True),
            len(loop.breakthroughs),
            num(loop.error_trend, 1, signed=True),
            tokens_text(loop.tokens) if loop.tokens is None else loop.tokens,
            money(loop.cost_usd),
            duration(loop.wall_seconds),
            loop.stop_reason or "-",
        ]
        for loop in a.loops
    ]
    return _html_table(columns, rows)
