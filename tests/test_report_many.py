"""`ralph analyze --html` with many loops: every curve told apart, a legend that names each
loop, one word for an unknown cost, and a page that fits a phone. What a browser would show is
asserted on the HTML text; no browser runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ralph.analyze.report import write_html
from ralph.analyze.stats import analyze
from ralph.ids import short_id
from ralph.memory.store import MemoryStore

from .test_analyze import make_loop, record

LONG_TASK = "retry the provider on 429 with backoff and a jittered delay capped at thirty seconds"


def loop_id(n: int) -> str:
    return f"ralph-task-{n:02d}-{n:08x}"  # listed in this order


def many(store: MemoryStore, count: int, tmp_path: Path, **overrides: object) -> str:
    """`count` loops with the very same rewards (the curves a batch of repeats draws), the
    first with a long task; the report's text."""
    for n in range(count):
        task = LONG_TASK if n == 0 else f"task number {n}"
        make_loop(store, loop_id(n), [0.1, 0.55, 1.0], green_at=3, task=task, **overrides)  # type: ignore[arg-type]
    target = tmp_path / "report.html"
    write_html(analyze(store), target)
    return target.read_text(encoding="utf-8")


def series(page: str) -> dict[int, str]:
    """Each loop's group in the reward chart, by its index."""
    groups = re.findall(r'<g id="c0-series-(\d+)">(.*?)\n   </g>', page, flags=re.S)
    return {int(n): body for n, body in groups}


def look(group: str) -> tuple[str, str, str]:
    """A curve's (line colour, dash pattern, marker shape) as matplotlib drew them."""
    line = re.search(r'<path d="M [^"]*" clip-path="[^"]*" style="([^"]*)"', group)
    marker = re.search(r'<defs>\s*<path id="[^"]+" d="([^"]+)"', group, flags=re.S)
    assert line and marker, group[:300]
    style = dict(part.split(": ") for part in line.group(1).split("; "))
    shape = " ".join(marker.group(1).split())
    return style["stroke"], style.get("stroke-dasharray", "solid"), shape


def legend(page: str) -> list[str]:
    (items,) = re.findall(r"<ul class='legend'>(.*?)</ul>", page)
    return re.findall(r"<li .*?</li>", items)


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    s = MemoryStore(tmp_path / "project")
    s.ensure()
    return s


@pytest.mark.parametrize("count", [7, 12])
def test_every_curve_has_its_own_colour_marker_and_place(
    store: MemoryStore, tmp_path: Path, count: int
) -> None:
    page = many(store, count, tmp_path)
    groups = series(page)
    assert sorted(groups) == list(range(count))
    looks = [look(groups[n]) for n in range(count)]
    assert len({colour for colour, _, _ in looks}) == count
    assert len({marker for _, _, marker in looks}) == count
    assert len(set(looks)) == count
    # equal rewards, yet no two curves on top of each other: each starts at its own x
    starts = {re.search(r'<path d="M ([0-9.]+) ', groups[n]).group(1) for n in range(count)}  # type: ignore[union-attr]
    assert len(starts) == count


def test_the_legend_names_every_loop_and_holds_its_whole_task(
    store: MemoryStore, tmp_path: Path
) -> None:
    page = many(store, 12, tmp_path)
    items = legend(page)
    assert len(items) == 12
    swatches = set()
    for n, item in enumerate(items):
        task = LONG_TASK if n == 0 else f"task number {n}"
        assert f"<code>{short_id(loop_id(n))}</code>" in item
        assert f"title='{short_id(loop_id(n))} {task}'" in item  # whole, in the tooltip
        stroke = re.search(r"<line [^>]*stroke='(#[0-9a-f]{6})'", item)
        marker = re.search(r"data-marker='([^']+)'", item)
        assert stroke and marker
        swatches.add((stroke.group(1), marker.group(1)))
    assert len(swatches) == 12  # the swatches tell the loops apart as the curves do
    shown = re.search(r"<span class='task'>([^<]*)</span>", items[0])
    assert shown and shown.group(1).endswith("…") and len(shown.group(1)) < len(LONG_TASK)
    # below the chart, never over it, at the body's size
    chart = page.index("<h2>Reward per iteration</h2>")
    assert page.index("</svg>", chart) < page.index("<ul class='legend'>")
    assert '<g id="c0-legend' not in page and 'id="c0-legend_1"' not in page
    (rule,) = re.findall(r"\.legend\{[^}]*\}", page)
    assert "font-size" not in rule


def test_more_loops_than_styles_are_a_cloud_under_their_mean(
    store: MemoryStore, tmp_path: Path
) -> None:
    page = many(store, 13, tmp_path)
    items = legend(page)
    assert [re.search(r"<span class='task'>([^<]*)<", i).group(1) for i in items] == [  # type: ignore[union-attr]
        "each loop",
        "mean",
    ]
    assert "title='13 loops'" in items[0]


def test_an_unknown_cost_is_one_word_in_cards_table_and_tooltips(
    store: MemoryStore, tmp_path: Path
) -> None:
    page = many(store, 2, tmp_path, cost=[0.25, None, 0.5])
    assert "<div class='card'>cost<b>unknown</b></div>" in page
    loops = page[page.index("<h2>Loops</h2>") :]
    header = re.findall(r"<th>([^<]*)</th>", loops[: loops.index("</thead>")])
    rows = re.findall(r"<tr>(.*?)</tr>", loops[loops.index("<tbody>") : loops.index("</tbody>")])
    cells = [re.findall(r"<td[^>]*>([^<]*)</td>", row) for row in rows]
    assert [row[header.index("cost")] for row in cells] == ["unknown", "unknown"]
    tooltips = re.findall(r'<g id="c0-series-\d+"><title>([^<]*)</title>', page)
    assert len(tooltips) == 2
    assert all(t.endswith("\ncost unknown") and "reward 0.25 → 0.10 → 0.55 → 1.00" in t
               for t in tooltips)  # fmt: skip


def test_a_known_cost_reads_the_same_in_the_table_and_the_tooltip(
    store: MemoryStore, tmp_path: Path
) -> None:
    page = many(store, 1, tmp_path, cost=[0.25, 0.5, 0.5])
    assert "<div class='card'>cost<b>$1.25</b></div>" in page
    assert "<td>$1.25</td>" in page and "cost $1.25</title>" in page


def test_the_page_fits_a_phone(store: MemoryStore, tmp_path: Path) -> None:
    page = many(store, 12, tmp_path)
    assert "<meta name='viewport' content='width=device-width, initial-scale=1'>" in page
    (css,) = re.findall(r"<style>(.*?)</style>", page, flags=re.S)
    # a fixed length wider than 400 px makes the page scroll sideways on a phone; a maximum
    # and a min(..., 100%) never do
    capped = re.sub(r"max-width:[^;}]+|min\([^)]*\)", "", css)
    for number, unit in re.findall(r"([0-9.]+)(px|rem|em|pt)\b", capped):
        assert float(number) * {"px": 1, "rem": 16, "em": 16, "pt": 4 / 3}[unit] <= 400, css
    assert "svg{max-width:100%" in css  # a chart shrinks to the screen
    # a wide table scrolls in its own box, not the page
    assert page.count("<table>") == page.count("<div class='scroll'><table>") > 0


def test_the_legend_names_the_harm_mark_when_an_attempt_broke_something(
    store: MemoryStore, tmp_path: Path
) -> None:
    page = many(store, 3, tmp_path)
    assert "broke what worked" not in page
    harmed = record(loop_id(1), 2, 0.05)
    assert harmed.ralph is not None
    harmed.ralph.regressions = 2
    store.write_record(harmed)  # the second attempt of the second loop broke two tests
    write_html(analyze(store), tmp_path / "harm.html")
    items = legend((tmp_path / "harm.html").read_text(encoding="utf-8"))
    assert len(items) == 4 and "<span class='task'>broke what worked</span>" in items[-1]
    assert "data-marker='x'" in items[-1] and "<line" not in items[-1]  # a mark, no line
    assert "stroke='#d62728'" in items[-1]  # the chart's red, as SVG spells it
