"""docs/architecture.md stays true where a test can tell: its map of the packages names exactly
the modules on disk, and the sources name only modules that exist, with no tracker numbers."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "ralph"
DOC = (ROOT / "docs" / "architecture.md").read_text("utf-8")
COLUMN = 37  # where the map's module lists start


def _packages_block() -> str:
    section = DOC.split("## Packages", 1)[1]
    return section.split("```", 2)[1]


def _without_parentheses(text: str) -> str:
    out, depth = [], 0
    for char in text:
        depth += char == "("
        if depth == 0:
            out.append(char)
        depth -= char == ")" and depth > 0
    return "".join(out)


def documented_modules() -> set[str]:
    """The modules the map names: `loop/runner` for a package's, `config` for a top-level one."""
    lists: dict[str, str] = {}
    top: set[str] = set()
    package = None
    for line in _packages_block().splitlines():
        head = re.match(r"  (\w+)/ ", line)
        if head:
            package = head.group(1)
            lists[package] = line[COLUMN:]
        elif re.match(r"  \w+\.py", line):
            package = None
            top.update(re.findall(r"(\w+)\.py", line[:COLUMN]))
        elif package and line.startswith(" " * COLUMN):
            lists[package] += " " + line[COLUMN:]
    names = set(top)
    for package, text in lists.items():
        for piece in re.split(r",|\band\b", _without_parentheses(text).replace("`", "")):
            assert re.fullmatch(r"\s*\w+\s*", piece), f"{package}/: cannot read {piece!r}"
            names.add(f"{package}/{piece.strip()}")
    return names


def modules_on_disk() -> set[str]:
    return {
        path.relative_to(PACKAGE).with_suffix("").as_posix()
        for path in PACKAGE.rglob("*.py")
        if path.name not in ("__init__.py", "__main__.py")
    }


def test_the_map_names_exactly_the_modules_on_disk() -> None:
    documented, disk = documented_modules(), modules_on_disk()
    assert sorted(disk - documented) == [], "modules docs/architecture.md does not name"
    assert sorted(documented - disk) == [], "modules docs/architecture.md names that do not exist"


def test_the_readers_see_a_module_missing_from_the_map() -> None:
    """The map's reader is no rubber stamp: it reads real names and finds a missing one."""
    documented = documented_modules()
    assert {"loop/runner", "memory/search", "config", "reading"} <= documented
    assert "memory/nonexistent" not in documented
    assert "ralph" not in {name.split("/")[0] for name in documented}
    assert _exists("memory.search") and _exists("memory.transfer.status_from_records")
    assert not _exists("trace_stats") and not _exists("batch.Batch")  # names that went


def _texts() -> list[tuple[str, str]]:
    """The sources and docs whose words must name only what exists."""
    paths = [
        *PACKAGE.rglob("*.py"),
        *(ROOT / "bench").glob("*.py"),
        *(ROOT / "tests").rglob("*.py"),
    ]
    paths += [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
    return [(path.relative_to(ROOT).as_posix(), path.read_text("utf-8")) for path in paths]


def test_no_tracker_numbers() -> None:
    """The tracker is not in the repository: "issue 21" or "(#16)" tells a reader nothing."""
    pattern = re.compile(r"\b[Ii]ssues? #?\d+|\(#\d+\)")
    cited = [
        f"{name}: {match.group(0)}"
        for name, text in _texts()
        if name != "tests/test_docs_true.py"
        for match in pattern.finditer(text)
    ]
    assert cited == []


def _exists(dotted: str) -> bool:
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        base = PACKAGE.joinpath(*parts[:n])
        module = (
            base.with_suffix(".py") if base.with_suffix(".py").exists() else base / "__init__.py"
        )
        if module.exists():
            return n == len(parts) or re.search(rf"\b{parts[n]}\b", module.read_text()) is not None
    return False


def test_dotted_names_name_modules_that_exist() -> None:
    """`ralph.memory.search` in a comment names a module there is; `ralph.usage` is a record's
    field (its `ralph` key), not a module."""
    from dataclasses import fields

    from ralph.records import RalphExtension

    record_keys = {field.name for field in fields(RalphExtension)}
    stale = []
    for name, text in _texts():
        for match in re.finditer(r"(?<![\w/.-])ralph((?:\.[a-z_]+)+)", text):
            dotted = match.group(1)[1:]
            first = dotted.split(".")[0]
            if first in record_keys | {"json", "invalid"} or first.startswith("__"):
                continue  # a record field, a file name (ralph.json), a mail host, `__file__`
            if not _exists(dotted):
                stale.append(f"{name}: ralph.{dotted}")
    assert stale == []
