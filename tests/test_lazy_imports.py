"""Imports inside functions only where they keep a measured start-up figure
(docs/architecture.md, "Start-up"): a function-level import must defer a HEAVY module, keep a
measured path (`ralph --help`, `ralph check`, `status`, `reflections list`, `analyze`, `run`)
loading no more than it does, or break a cycle."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ralph"
DOC = ROOT / "docs" / "architecture.md"


def heavy_modules() -> dict[str, str]:
    """The HEAVY table of docs/architecture.md: a top-level module name and its measured cost."""
    text = DOC.read_text("utf-8").split("## Start-up", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([\w.]+)` \| ([^|]+?) \|", text, flags=re.MULTILINE)
    return dict(rows)


def is_heavy(module: str, heavy: set[str]) -> bool:
    return module.split(".")[0] in heavy


@dataclass(frozen=True)
class LazyImport:
    module: str  # the module the import sits in
    line: int
    targets: tuple[str, ...]  # the modules it loads
    cycle: bool  # says `# cycle: ...` on its line or the line above


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_package(name: str) -> bool:
    return (ROOT / name.replace(".", "/") / "__init__.py").exists()


def _exists(name: str) -> bool:
    return _is_package(name) or (ROOT / (name.replace(".", "/") + ".py")).exists()


def targets_of(node: ast.Import | ast.ImportFrom, module: str) -> tuple[str, ...]:
    """The modules an import statement loads (a `from X import y` loads X.y when it is one)."""
    if isinstance(node, ast.Import):
        return tuple(alias.name for alias in node.names)
    base = node.module or ""
    if node.level:
        anchor = module if _is_package(module) else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            anchor = anchor.rpartition(".")[0]
        base = f"{anchor}.{base}" if base else anchor
    found = [base]
    if base.startswith("ralph"):
        found += [f"{base}.{a.name}" for a in node.names if _exists(f"{base}.{a.name}")]
    return tuple(found)


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.Module) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import of a module and whether it runs inside a function (TYPE_CHECKING ones left
    out: they never run)."""

    def walk(node: ast.AST, inside: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, inside
            elif isinstance(child, ast.If) and _type_checking(child):
                for other in child.orelse:
                    yield from walk(ast.Module(body=[other], type_ignores=[]), inside)
            else:
                functions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
                yield from walk(child, inside or isinstance(child, functions))

    yield from walk(tree, False)


@cache
def parsed() -> dict[str, tuple[tuple[str, ...], tuple[LazyImport, ...]]]:
    """Each ralph module: what it imports at its top, and its imports inside functions."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = module_name(path)
        lines = path.read_text("utf-8").splitlines()
        top: list[str] = []
        lazy: list[LazyImport] = []
        for node, inside in _imports(ast.parse("\n".join(lines))):
            targets = targets_of(node, name)
            if not inside:
                top += targets
                continue
            said = lines[node.lineno - 1] + (lines[node.lineno - 2] if node.lineno > 1 else "")
            lazy.append(LazyImport(name, node.lineno, targets, "# cycle:" in said))
        found[name] = (tuple(top), tuple(lazy))
    return found


@cache
def loaded_by(module: str) -> frozenset[str]:
    """What importing `module` loads, read from the source: its packages, then its top-level
    imports, then theirs (outside ralph only the names: enough to tell a HEAVY one)."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            prefix = ".".join(parts[:i])
            if prefix in seen:
                continue
            seen.add(prefix)
            if prefix in parsed():
                todo += parsed()[prefix][0]
    return frozenset(seen)


def _run_time_modules(code: str) -> frozenset[str]:
    probe = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return frozenset(json.loads(proc.stdout))


@cache
def help_path() -> frozenset[str]:
    """Every module `ralph --help` loads (all of ralph/cli's command modules)."""
    return _run_time_modules("import ralph.cli.app")


def imports_in(module: str, function: str) -> list[str]:
    """The import statements inside `function` of `module` (a command imports what it runs)."""
    path = ROOT / (module.replace(".", "/") + ".py")
    tree = ast.parse(path.read_text("utf-8"))
    body = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function)
    return [ast.unparse(n) for n in ast.walk(body) if isinstance(n, (ast.Import, ast.ImportFrom))]


# The measured start-up paths (docs/architecture.md, "Start-up"): what each loads before it works.
# `ralph check` to its first check: the console script, then what cli/early.start imports.
COMMANDS = {
    "ralph status": ("ralph.cli.loops", "status"),
    "ralph reflections list": ("ralph.cli.reflections", "reflections_list"),
    "ralph check": ("ralph.cli.project", "check"),
    "ralph analyze": ("ralph.cli.many", "analyze"),  # bench/analyze.py's cold read
}


@cache
def early_path() -> frozenset[str]:
    """Every module `ralph check` loads before its first check starts (cli/early.py)."""
    early = imports_in("ralph.cli.early", "start")
    return _run_time_modules("\n".join(["import ralph.cli.entry", *early]))


@cache
def run_path() -> frozenset[str]:
    """Every module `ralph run` loads up to its first attempt (a `cmd:` actor, the heuristic
    reflector, a failing check: `--dry-run` composes the first prompt and stops there)."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "app.py").write_text("VALUE = 1\n", encoding="utf-8")
        for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "start"]):
            subprocess.run(
                ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid", *args],
                cwd=root,
                check=True,
            )
        argv = ["ralph", "run", "--dry-run", "--actor", "cmd:true", "--reflector", "heuristic"]
        code = (
            "import atexit\n"
            "atexit.register(lambda: print(json.dumps(sorted(sys.modules))))\n"
            f"sys.argv = {[*argv, '--check', 'false', 'the task']!r}\n"
            "from ralph.cli.entry import main\n"
            "main()"
        )
        probe = f"import json, sys\n{code}"
        proc = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, cwd=root, check=False
        )
    assert proc.returncode == 0, proc.stderr
    return frozenset(json.loads(proc.stdout.splitlines()[-1]))


@cache
def paths() -> dict[str, frozenset[str]]:
    found = {"ralph --help": help_path(), "ralph check, to its first check": early_path()}
    for name, (module, function) in COMMANDS.items():
        code = "\n".join(["import ralph.cli.app", *imports_in(module, function)])
        found[name] = _run_time_modules(code)
    found["ralph run"] = run_path()
    return found


def reason(lazy: LazyImport, heavy: set[str]) -> str | None:
    """Why `lazy` may stay inside its function, or None when it belongs at the top."""
    if lazy.cycle:
        return "cycle"
    here = loaded_by(lazy.module)
    for target in lazy.targets:
        if any(is_heavy(m, heavy) for m in loaded_by(target) - here):
            return "heavy"
    for name, path in paths().items():
        if lazy.module in path and not set(lazy.targets) <= path:
            return name
    return None


def misplaced(heavy: set[str]) -> list[str]:
    return [
        f"{lazy.module}:{lazy.line} {', '.join(lazy.targets)}"
        for _, lazies in parsed().values()
        for lazy in lazies
        if reason(lazy, heavy) is None
    ]


def test_the_doc_lists_the_heavy_modules_with_their_cost() -> None:
    heavy = heavy_modules()
    assert {"rich", "jsonschema", "git", "httpx", "yaml"} <= set(heavy)
    assert all(re.search(r"\d+ ms", cost) for cost in heavy.values()), heavy


def test_every_import_inside_a_function_keeps_a_measured_figure() -> None:
    """Moved to the top of its module otherwise: an import that defers nothing measured is
    only a surprise for the reader."""
    assert misplaced(set(heavy_modules())) == []


def test_the_rule_tells_a_kept_import_from_a_misplaced_one() -> None:
    heavy = set(heavy_modules())
    stay = [
        LazyImport("ralph.providers.http", 1, ("httpx",), cycle=False),  # HEAVY
        LazyImport("ralph.memory.shown", 1, ("rich.text",), cycle=False),  # rich
        LazyImport("ralph.loop.runner", 1, ("ralph.ids",), cycle=True),
        LazyImport("ralph.cli.loops", 1, ("ralph.ids",), cycle=False),  # not on --help's path
        LazyImport("ralph.evaluators.suite", 1, ("hashlib",), cycle=False),  # nor the early one
    ]
    kept = ["heavy", "heavy", "cycle", "ralph --help", "ralph check, to its first check"]
    assert [reason(lazy, heavy) for lazy in stay] == kept
    move = [
        LazyImport("ralph.loop.runner", 1, ("ralph.ids",), cycle=False),  # light, no path
        LazyImport("ralph.cli.loops", 1, ("ralph.errors",), cycle=False),  # --help loads it
        LazyImport("ralph.memory.store", 1, ("shlex",), cycle=False),  # light, no path
    ]
    assert [reason(lazy, heavy) for lazy in move] == [None, None, None]


def test_ralph_help_loads_no_heavy_module() -> None:
    """`import ralph.cli.app` is what `ralph --help` costs; none of the HEAVY modules in it."""
    heavy = set(heavy_modules())
    assert "ralph.cli.app" in help_path()
    assert sorted(m for m in help_path() if is_heavy(m, heavy)) == []


def test_ralph_check_starts_its_checks_without_a_heavy_module() -> None:
    heavy = set(heavy_modules())
    assert "ralph.evaluators.suite" in early_path()
    assert sorted(m for m in early_path() if is_heavy(m, heavy)) == []
