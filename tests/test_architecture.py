"""The shape of the package (docs/architecture.md): layers and no import cycles."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ralph"


def _cycles() -> list[list[str]]:
    """Strongly connected components of the runtime import graph (TYPE_CHECKING imports are
    annotations, not dependencies at run time)."""
    graph = grimp.build_graph("ralph", exclude_type_checking_imports=True)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_no_module_imports_one_that_imports_it_back() -> None:
    assert _cycles() == []


def test_packages_import_only_downward() -> None:
    """The layers contract in pyproject.toml ([tool.importlinter]): cli > bench > analyze > loop
    > reflection > actors | evaluators > memory > workspace | providers > the base modules."""
    linter = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run(
        [str(linter), "--config", str(ROOT / "pyproject.toml")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_loop_needs_no_type_ignore() -> None:
    ignored = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted((PACKAGE / "loop").glob("*.py"))
        for n, line in enumerate(path.read_text("utf-8").splitlines(), 1)
        if "type: ignore" in line
    ]
    assert ignored == []


def test_only_the_cli_prints() -> None:
    """Screens are drawn by the CLI package; the rest returns values, lines or renderables."""
    printing = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if "cli" not in path.relative_to(PACKAGE).parts
        for n, line in enumerate(path.read_text("utf-8").splitlines(), 1)
        if re.search(r"\bconsole\.print\(|\bprint\(", line)
    ]
    assert printing == []
