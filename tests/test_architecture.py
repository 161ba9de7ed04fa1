"""The shape of the package (docs/architecture.md): layers and no import cycles."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ralph"


def _cycles(*, annotations: bool = False) -> list[list[str]]:
    """Strongly connected components of the import graph: at run time, or with the
    TYPE_CHECKING imports too (`annotations`: a module its own annotations need is a
    dependency of its meaning, if not of its start)."""
    graph = grimp.build_graph("ralph", exclude_type_checking_imports=not annotations)
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


def test_no_cycle_either_through_annotation_only_imports() -> None:
    assert _cycles(annotations=True) == []


SEAMS = {"parts", "evaluator", "reflector", "actor", "workspace", "reporter", "check", "suite"}


def _seam_getattrs(source: str) -> list[int]:
    """Lines that reach past a seam: `getattr`/`hasattr` on an object named for one."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr")
            and node.args
        ):
            continue
        names = {n.id for n in ast.walk(node.args[0]) if isinstance(n, ast.Name)}
        names |= {n.attr for n in ast.walk(node.args[0]) if isinstance(n, ast.Attribute)}
        if names & SEAMS:
            found.append(node.lineno)
    return found


def test_the_seam_check_sees_a_side_door() -> None:
    source = """
getattr(self.parts.evaluator, "bind_loop", None)
hasattr(parts.reflector, "client")
getattr(signal, "SIGHUP", None)
"""
    assert _seam_getattrs(source) == [2, 3]


def test_the_loop_reaches_its_collaborators_only_through_their_protocols() -> None:
    """Actor, Evaluator, Check, ChatClient, Workspace and Reporter are whole protocols: the
    loop and the suite call what they declare, never probe them for more."""
    doors = [
        f"{path.relative_to(ROOT)}:{n}"
        for package in ("loop", "evaluators")
        for path in sorted((PACKAGE / package).glob("*.py"))
        for n in _seam_getattrs(path.read_text("utf-8"))
    ]
    assert doors == []


def test_the_loops_collaborators_are_protocols() -> None:
    """`Parts` holds each collaborator by its protocol (Actor, Evaluator, Reflector,
    Workspace), never a concrete class: any reflector, or a test's fake, fits the loop."""
    import importlib

    tree = ast.parse((PACKAGE / "loop" / "steps.py").read_text("utf-8"))
    imported = {
        alias.asname or alias.name: (node.module or "", alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    parts = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Parts")
    fields = {
        node.target.id: ast.unparse(node.annotation)
        for node in parts.body
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
    }
    seams = {name: kind for name, kind in fields.items() if kind in imported}
    assert set(seams) == {"actor", "evaluator", "reflector", "workspace"}
    for name, kind in seams.items():
        module, real_name = imported[kind]
        cls = getattr(importlib.import_module(module), real_name)
        assert getattr(cls, "_is_protocol", False), (name, module, real_name)


def _method_calls(source: str, method: str) -> list[int]:
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == method
    ]


def test_one_writer_of_the_state_file() -> None:
    """Every save of state.json goes through loop/lifecycle.save_state (the StateWriter hook
    and `ralph abort`), so what is written and when is decided in one place."""
    writers = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).as_posix() != "loop/lifecycle.py"
        for n in _method_calls(path.read_text("utf-8"), "write_state")
    ]
    assert writers == []


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


STREAMS = {"stdout", "stderr", "__stdout__", "__stderr__"}
PRINTING_METHODS = {"print", "log", "print_json", "rule", "out"}


def _printing_calls(source: str) -> list[int]:
    """Lines of `source` that print: `print(...)`, a write to `sys.stdout`/`sys.stderr`,
    `os.write` to fd 1 or 2, a rich console's printing methods, or a `Console(...)` made."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name):
            printing = func.id in ("print", "Console")
        elif isinstance(func, ast.Attribute):
            owner = func.value
            printing = (
                func.attr in ("write", "writelines")
                and isinstance(owner, ast.Attribute)
                and owner.attr in STREAMS
            ) or func.attr == "Console"
            printing |= func.attr in PRINTING_METHODS and not (
                isinstance(owner, ast.Name) and owner.id in ("self", "cls")
            )
            printing |= (
                func.attr == "write"
                and isinstance(owner, ast.Name)
                and owner.id == "os"
                and bool(node.args)
                and isinstance(node.args[0], ast.Constant)
                and node.args[0].value in (1, 2)
            )
        else:
            printing = False
        if printing:
            found.append(node.lineno)
    return sorted(found)


def test_the_printing_check_sees_every_way_to_print() -> None:
    source = """
print("a")
sys.stdout.write("b")
sys.stderr.write("c")
sys.__stdout__.writelines(["d"])
console.print("e")
out.log("f")
Console(file=handle)
rich.console.Console()
os.write(1, b"g")
handle.write("not stdout")
os.write(fd, b"a pipe")
self.print_lines()
"""
    assert _printing_calls(source) == [2, 3, 4, 5, 6, 7, 8, 9, 10]


def test_only_the_cli_prints() -> None:
    """Screens are drawn by the CLI package; the rest returns values, lines or renderables
    (read from the syntax tree, so neither an alias nor a line break hides a call)."""
    printing = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if "cli" not in path.relative_to(PACKAGE).parts
        for n in _printing_calls(path.read_text("utf-8"))
    ]
    assert printing == []


def test_the_evaluator_seam_starts_without_the_memory() -> None:
    """`ralph check` imports the suite before its first check starts: the seam's types
    (evaluators/verdicts.py) load the loop state only when a baseline is summarised."""
    probe = "import sys, ralph.evaluators.suite; print(sorted(m for m in sys.modules))"
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert "ralph.memory.state" not in proc.stdout
    assert "'ralph.evaluators.suite'" in proc.stdout
