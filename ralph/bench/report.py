"""`ralph bench`'s table: on the terminal, as CSV, and as an HTML page with every arm's
success@k curve on one chart (inline SVG, no scripts)."""

from __future__ import annotations

import csv
import html
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ralph.glyphs import plural

if TYPE_CHECKING:
    from rich.table import Table

COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
UNKNOWN = "—"  # a figure nobody reported; "-" is a figure that does not apply
PARTIAL = "*"  # tokens summed over only some of the arm's runs (footnotes); never a cost


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


FEW = "†"  # an interval over too few tasks to mean much (footnotes)


def _diff(arm: dict[str, Any], base: str, few: bool = False) -> str:
    d = arm.get(f"vs_{base}")
    if d and d.get("could_not_run"):
        return "none: " + " and ".join(d["could_not_run"]) + " could not run"
    if not d or d.get("difference") is None:
        return "-"
    return f"{d['difference']:+.0%} [{d['low']:+.0%}, {d['high']:+.0%}]{FEW if few else ''}"


def _partial_tokens(arm: dict[str, Any]) -> bool:
    """Some of the runs that used anything did not report tokens."""
    return arm["tokens"] is not None and arm["tokens_known_runs"] < arm["counted_runs"]


def _tokens(arm: dict[str, Any]) -> str:
    """The arm's tokens; unknown when no run reported any; marked when only some did."""
    tokens = arm["tokens"]
    if tokens is None:
        return UNKNOWN
    return f"{tokens:,}{PARTIAL if _partial_tokens(arm) else ''}"


def _cost(arm: dict[str, Any]) -> str:
    """The arm's cost: unknown as soon as one run's is (`records.sum_costs`), never marked."""
    cost = arm["cost_usd"]
    return UNKNOWN if cost is None else f"${cost:.4f}"


def footnotes(summary: dict[str, Any]) -> list[str]:
    """What the tokens and cost columns' marks mean, when they show them."""
    arms = summary["arms"]
    used = [a for a in arms if a["counted_runs"]]
    lines = [
        f"{a['arm']}: {a['failed_runs']} of {plural(a['runs'], 'run')} could not run"
        " (see each loop's error in --json); its figures measure nothing and no difference is given"
        for a in arms
        if a.get("failed_runs")
    ]
    partial = [
        f"{a['tokens_known_runs']} of {plural(a['counted_runs'], 'run')} of {a['arm']}"
        for a in used
        if _partial_tokens(a)
    ]
    if partial:
        lines.append(
            f"{PARTIAL} tokens: the sum over the runs that reported them ({', '.join(partial)});"
            " the others' are unknown (a `cmd:` actor, a heuristic reflector), not 0"
        )
    if any(a["tokens"] is None for a in used):
        lines.append(f"{UNKNOWN} tokens: no run of the arm reported any")
    unpriced = [
        f"{a['cost_known_runs']} of {plural(a['counted_runs'], 'run')} of {a['arm']}"
        for a in used
        if a["cost_usd"] is None
    ]
    if unpriced:
        lines.append(
            f"{UNKNOWN} cost: unknown as soon as one run's is ({', '.join(unpriced)} reported"
            " one). Money adds up by one rule, as in each loop's state: a sum with an unknown"
            " part is unknown, since the known part alone would make the arm look cheaper than"
            f" it was; tokens, which the state sums where reported, show that part marked {PARTIAL}"
        )
    if len(used) < len(arms):
        lines.append(
            f"{UNKNOWN} tokens and cost: no run of the arm used anything (already green, or"
            " not started)"
        )
    differences = [a.get(f"vs_{arms[0]['arm']}") or {} for a in arms]
    if summary.get("too_few_tasks") and any(d.get("difference") is not None for d in differences):
        lines.append(
            f"{FEW} over {plural(summary['tasks'], 'task')}: too few"
            " for the interval to mean much (a bootstrap over a handful of tasks is narrow"
            " because there is little to resample); it needs 10 or more"
        )
    return lines


def rows(summary: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    arms = summary["arms"]
    base = arms[0]["arm"]
    ks = [str(k) for k in range(1, summary["max_k"] + 1)]
    head = ["arm", "runs", *[f"success@{k}" for k in ks], "mean iters to green"]
    head += ["tokens", "cost", "wall s", f"vs {base} (95% CI)"]
    out = []
    for arm in arms:
        mean = arm["mean_iterations_to_green"]
        out.append(
            [
                arm["arm"],
                str(arm["runs"]),
                *[_pct(arm["success_at_k"][k]) for k in ks],
                "-" if mean is None else f"{mean:.2f}",
                _tokens(arm),
                _cost(arm),
                f"{arm['wall_seconds']:.1f}",
                _diff(arm, base, bool(summary.get("too_few_tasks"))),
            ]
        )
    return head, out


def table(summary: dict[str, Any]) -> tuple[Table, int]:
    """The ablation table and the width it needs (a figure cut short is a wrong figure)."""
    from rich.table import Table

    head, body = rows(summary)
    grid = Table(title=f"bench {summary['bench_id']}", show_edge=False, header_style="bold")
    for column in head:
        grid.add_column(column)
    for row in body:
        grid.add_row(*row)
    return grid, sum(len(h) for h in head) + 3 * len(head) + 30


def write_csv(summary: dict[str, Any], out: TextIO) -> None:
    """One row per arm and k: the figures without formatting (tokens and cost empty when
    unknown; `tokens_known_runs`: how many runs the tokens' sum is over; `cost_known_runs` of
    `counted_runs` reported a cost)."""
    writer = csv.writer(out)
    writer.writerow(
        [
            "arm",
            "k",
            "success_at_k",
            "mean_iterations_to_green",
            "tokens",
            "cost_usd",
            "tokens_known_runs",
            "cost_known_runs",
            "counted_runs",
        ]
    )
    for arm in summary["arms"]:
        for k, value in arm["success_at_k"].items():
            writer.writerow(
                [
                    arm["arm"],
                    k,
                    value,
                    arm["mean_iterations_to_green"],
                    arm["tokens"],
                    arm["cost_usd"],
                    arm["tokens_known_runs"],
                    arm["cost_known_runs"],
                    arm["counted_runs"],
                ]
            )


def chart(summary: dict[str, Any], width: int = 560, height: int = 300) -> str:
    """success@k of every arm, k on x, 0-100 % on y."""
    pad = 40
    max_k = max(summary["max_k"], 1)

    def x(k: int) -> float:
        return pad + (width - 2 * pad) * ((k - 1) / (max_k - 1) if max_k > 1 else 0.5)

    def y(v: float) -> float:
        return height - pad - (height - 2 * pad) * v

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">',
        f'<line x1="{pad}" y1="{y(0)}" x2="{width - pad}" y2="{y(0)}" stroke="#999"/>',
        f'<line x1="{pad}" y1="{y(0)}" x2="{pad}" y2="{y(1)}" stroke="#999"/>',
        f'<text x="4" y="{y(1) + 4}" font-size="11">100%</text>',
        f'<text x="14" y="{y(0) + 4}" font-size="11">0%</text>',
    ]
    for k in range(1, max_k + 1):
        parts.append(f'<text x="{x(k) - 4}" y="{height - 20}" font-size="11">{k}</text>')
    parts.append(f'<text x="{width / 2 - 30}" y="{height - 4}" font-size="11">iteration k</text>')
    for i, arm in enumerate(summary["arms"]):
        colour = COLOURS[i % len(COLOURS)]
        points = " ".join(f"{x(int(k)):.1f},{y(v):.1f}" for k, v in arm["success_at_k"].items())
        parts.append(
            f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="2"/>'
        )
        label = html.escape(arm["arm"])
        parts.append(
            f'<text x="{width - pad - 110}" y="{pad + 14 * i}" fill="{colour}" font-size="12">'
            f"{label}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def write_html(summary: dict[str, Any], path: Path) -> None:
    from ralph.files import atomic_write_text

    head, body = rows(summary)
    table = "<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"
    for row in body:
        table += "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
    table += "</table>"
    title = html.escape(f"ralph bench {summary['bench_id']}")
    notes = "".join(f"<p>{html.escape(line)}</p>" for line in footnotes(summary))
    page = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title>"
        "<style>body{font-family:sans-serif;margin:2em}td,th{padding:4px 10px;"
        "border-bottom:1px solid #ddd;text-align:right}</style></head><body>"
        f"<h1>{title}</h1><h2>success@k</h2>{chart(summary)}{table}"
        f"<p>{html.escape(summary['interval'])}</p>{notes}</body></html>\n"
    )
    atomic_write_text(path, page)
