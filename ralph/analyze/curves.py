"""The HTML report's reward chart: one curve per loop, its look, its legend and its tooltip.

Up to `DISTINCT` loops share one chart: each gets a colour, a marker shape and a dash pattern of
its own (so loops are told apart without colour vision too) and a small sideways offset, so
loops whose curves are identical sit side by side instead of hiding one another. The legend is
HTML under the chart rather than matplotlib's: it wraps to the page's width, keeps the body's
font size and holds a task whole in its tooltip.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

from ralph.glyphs import clip, plural

# tab10 without its red (red marks a regression), then three darker colours: twelve in all
COLOURS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
    "#0b3d6b",
    "#b8860b",
    "#222222",
)
MARKERS = "osD^vP*h<>pX"  # filled, with a white edge: a marker over another keeps its outline
# (name, matplotlib on-off in line widths, the same in the swatch's pixels)
DASHES = (
    ("solid", None, ""),
    ("dashed", (4.0, 2.0), "6 3"),
    ("dotted", (1.0, 1.5), "2 2.5"),
    ("dashdot", (4.0, 1.5, 1.0, 1.5), "6 2 2 2"),
)
DISTINCT = min(len(COLOURS), len(MARKERS))  # more loops than this: a cloud under the mean
LINE_WIDTH = 1.5
SPREAD = 0.5  # iterations the dodged points of one iteration span at most
TASK_CHARS = 60  # a task in the legend; CSS cuts it shorter on a narrow screen
HARM = "#d62728"  # matplotlib's tab:red, spelt so the legend's SVG knows it too


@dataclass(frozen=True)
class SeriesStyle:
    """One curve's look; `marker` "" for none, `line` False for markers only."""

    colour: str
    marker: str = ""
    dash: str = "solid"
    width: float = LINE_WIDTH
    line: bool = True

    def plot_kwargs(self) -> dict[str, object]:
        """The keywords of matplotlib's `plot` that draw this style."""
        on_off = next(pattern for name, pattern, _ in DASHES if name == self.dash)
        return {
            "color": self.colour,
            "marker": self.marker or None,
            "markersize": 7,
            "markeredgecolor": "white",  # stacked markers keep an outline apart
            "markeredgewidth": 0.6,
            "linewidth": self.width,
            "linestyle": "-" if on_off is None else (0, on_off),
        }

    def swatch(self) -> str:
        """A small inline SVG of the line and its marker, as the chart draws them."""
        dash = next(svg for name, _, svg in DASHES if name == self.dash)
        parts = [
            "<svg class='swatch' width='34' height='14' viewBox='0 0 34 14' aria-hidden='true'>"
        ]
        if self.line:
            dashes = f" stroke-dasharray='{dash}'" if dash else ""
            parts.append(
                f"<line x1='1' y1='7' x2='33' y2='7' stroke='{self.colour}'"
                f" stroke-width='{self.width + 0.5:g}'{dashes}/>"
            )
        if self.marker:
            parts.append(_marker_path(self.marker, self.colour))
        return "".join(parts) + "</svg>"


def style_of(index: int) -> SeriesStyle:
    """The `index`th loop's style: colour, marker and dash each cycle on their own, so the
    first `DISTINCT` loops differ in colour and in marker alike."""
    dash = DASHES[index % len(DASHES)][0]
    return SeriesStyle(COLOURS[index % len(COLOURS)], MARKERS[index % len(MARKERS)], dash)


def offsets(count: int) -> list[float]:
    """Sideways shifts (in iterations) of `count` curves, centred on the true iteration and
    at most `SPREAD` apart end to end: identical curves show every marker."""
    if count <= 1:
        return [0.0] * count
    step = min(0.06, SPREAD / (count - 1))
    middle = (count - 1) / 2
    return [round((n - middle) * step, 4) for n in range(count)]


@dataclass(frozen=True)
class LegendEntry:
    """One line of the legend: its swatch, a key (a loop's short id), a text that may be cut
    and the whole text for the tooltip."""

    style: SeriesStyle
    key: str
    text: str
    title: str


def _legend_html(entries: list[LegendEntry]) -> str:
    items = "".join(
        f"<li title='{html.escape(e.title, quote=True)}'>{e.style.swatch()}"
        + (f"<code>{html.escape(e.key)}</code>" if e.key else "")
        + f"<span class='task'>{html.escape(e.text)}</span></li>"
        for e in entries
    )
    return f"<ul class='legend'>{items}</ul>" if items else ""


HARM_STYLE = SeriesStyle(HARM, "x", line=False)
MANY_STYLE = SeriesStyle("#1f77b440", width=0.8)  # a quarter opaque: the cloud
MEAN_STYLE = SeriesStyle(HARM, width=2.2)


@dataclass(frozen=True)
class Curve:
    """One loop as the chart needs it: iterations (0 the baseline), their rewards, those that
    broke what worked, its short id, its whole task and its tooltip."""

    xs: list[int]
    rewards: list[float]
    harmed: frozenset[int]
    key: str
    task: str
    tooltip: str


def draw(fig: Any, curves: list[Curve]) -> bool:
    """Every curve in its own style, shifted a little sideways so equal curves show side by
    side; more than `DISTINCT` of them are a thin cloud under their mean. The legend is the
    page's (`legend`); each curve's SVG group is `series-N`, for its tooltip."""
    from matplotlib.ticker import MaxNLocator

    ax = fig.subplots()
    many = len(curves) > DISTINCT
    shifts = [0.0] * len(curves) if many else offsets(len(curves))
    longest: list[list[float]] = []
    for n, (curve, shift) in enumerate(zip(curves, shifts, strict=True)):
        if not curve.xs:
            continue
        shown = [x + shift for x in curve.xs]
        style = MANY_STYLE if many else style_of(n)
        ax.plot(shown, curve.rewards, gid=f"series-{n}", **style.plot_kwargs())
        points = zip(curve.xs, shown, curve.rewards, strict=True)
        broke = [(s, v) for x, s, v in points if x in curve.harmed]
        if broke:  # harm stands out, even when the dip is small
            ax.scatter(*zip(*broke, strict=True), marker="x", color=HARM, s=60, zorder=3)
        for x, value in zip(curve.xs, curve.rewards, strict=True):
            while len(longest) <= x:
                longest.append([])
            longest[x].append(value)
    if not longest:
        return False
    if many:
        means = [(x, sum(v) / len(v)) for x, v in enumerate(longest) if v]
        ax.plot(*zip(*means, strict=True), **MEAN_STYLE.plot_kwargs())
    ax.set(xlabel="iteration (0 = baseline)", ylabel="reward", ylim=(-0.02, 1.05))
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
    return True


def legend(curves: list[Curve]) -> str:
    """Under the chart: each loop's swatch, short id and task (cut with an ellipsis, whole in
    the tooltip), or the cloud and its mean; the regression mark when one shows. Nothing for
    a single curve, which the heading names."""
    if len(curves) > DISTINCT:
        entries = [
            LegendEntry(MANY_STYLE, "", "each loop", plural(len(curves), "loop")),
            LegendEntry(MEAN_STYLE, "", "mean", "the mean reward of the loops at each iteration"),
        ]
    else:
        entries = [
            LegendEntry(style_of(n), c.key, clip(c.task, TASK_CHARS), f"{c.key} {c.task}".strip())
            for n, c in enumerate(curves)
            if c.xs
        ]
    if any(c.harmed for c in curves):
        harm = "an attempt that broke what worked before the loop"
        entries.append(LegendEntry(HARM_STYLE, "", "broke what worked", harm))
    return _legend_html(entries) if len(entries) > 1 else ""


def with_titles(svg: str, prefix: str, curves: list[Curve]) -> str:
    """Each curve's tooltip as the `<title>` of its group `prefix + N` in the drawn SVG."""
    for n, curve in enumerate(curves):
        group = f'<g id="{prefix}{n}">'
        svg = svg.replace(group, f"{group}<title>{html.escape(curve.tooltip)}</title>", 1)
    return svg


def _marker_path(marker: str, colour: str) -> str:
    from matplotlib.markers import MarkerStyle

    shape = MarkerStyle(marker)
    path = shape.get_path().transformed(shape.get_transform())
    scale = 9.0  # the swatch's marker, in pixels across
    close = " Z" if shape.is_filled() else ""
    raw: Any = path.to_polygons(closed_only=False)  # arrays of (x, y), curves made straight
    polygons: list[list[list[float]]] = [p.tolist() for p in raw]
    d = " ".join(
        "M" + " L".join(f"{17 + x * scale:.2f},{7 - y * scale:.2f}" for x, y in polygon) + close
        for polygon in polygons
    )
    paint = (
        f"fill='{colour}' stroke='white' stroke-width='0.6'"
        if shape.is_filled()
        else f"fill='none' stroke='{colour}' stroke-width='2'"
    )
    return f"<path data-marker='{html.escape(marker)}' d='{d}' {paint}/>"
