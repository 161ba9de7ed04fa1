"""One owner per rule and helper: the source says each rule once, so a fix lands everywhere."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from ralph.glyphs import plural
from ralph.records import BEST_FAILING_REWARD, MAX_TOKENS, shown_reward

PACKAGE = Path(__file__).resolve().parent.parent / "ralph"


@functools.cache
def _modules() -> list[tuple[str, ast.Module]]:
    """Every module of ralph, parsed once for all the tests here."""
    return [
        (path.relative_to(PACKAGE).as_posix(), ast.parse(path.read_text("utf-8")))
        for path in sorted(PACKAGE.rglob("*.py"))
    ]


@functools.cache
def _definitions() -> dict[str, list[str]]:
    """Function and method name -> where it is defined, as `module:line`."""
    found: dict[str, list[str]] = {}
    for module, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                found.setdefault(node.name, []).append(f"{module}:{node.lineno}")
    return found


def _defined(name: str) -> list[str]:
    return _definitions().get(name, [])


def test_each_helper_is_defined_once() -> None:
    owners = {
        "known_sum": "records.py",
        "sum_costs": "records.py",
        "shown_reward": "records.py",
        "plural": "glyphs.py",
        "current_branch": "workspace/git.py",
    }
    for name, owner in owners.items():
        places = _defined(name)
        assert len(places) == 1 and places[0].startswith(owner + ":"), (name, places)
    for copy in ("_plural", "_current_branch", "_rev", "_known_sum"):
        assert _defined(copy) == [], copy


def _is_none_test(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Compare)
        and isinstance(node.ops[0], ast.IsNot)
        and isinstance(node.comparators[0], ast.Constant)
        and node.comparators[0].value is None
    )


def test_no_inline_sum_of_known_values() -> None:
    """`sum(n for n in xs if n is not None)` is `records.known_sum` (unknown stays unknown,
    the sum saturates); an inline copy forgets one of the two."""
    copies = []
    for module, tree in _modules():
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "sum"):
                continue
            arg = node.args[0] if node.args else None
            if not isinstance(arg, ast.GeneratorExp | ast.ListComp):
                continue
            gen = arg.generators[0]
            element = ast.dump(arg.elt)
            # summing the values themselves (not counting them) over a filter on None
            if any(_is_none_test(cond) and ast.dump(cond.left) == element for cond in gen.ifs):
                copies.append(f"{module}:{node.lineno}")
    assert copies == []


def test_the_reward_cap_is_said_once() -> None:
    """0.99 appears as a number only as `records.BEST_FAILING_REWARD`."""
    places = [
        f"{module}:{node.lineno}"
        for module, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value == BEST_FAILING_REWARD
    ]
    assert [place.split(":")[0] for place in places] == ["records.py"], places


def test_the_reward_cap_is_applied_by_its_owner() -> None:
    """Only records.py says `min(..., BEST_FAILING_REWARD)`; the others call `shown_reward`."""
    places = [
        f"{module}:{node.lineno}"
        for module, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.Name) and node.id == "BEST_FAILING_REWARD"
        if module != "records.py"
    ]
    assert places == [], places


def _inline_plurals(module: str, tree: ast.Module) -> list[str]:
    """`'' if n == 1 else 's'` and its mirror: a plural said by hand instead of `plural`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.IfExp) and isinstance(node.test, ast.Compare):
            ends = (
                {node.body.value, node.orelse.value}
                if all(isinstance(side, ast.Constant) for side in (node.body, node.orelse))
                else set()
            )
            if ends == {"", "s"}:
                found.append(f"{module}:{node.lineno}")
    return found


def test_the_command_line_says_plurals_with_plural() -> None:
    places = [
        place
        for module, tree in _modules()
        if module.startswith("cli/") or module == "loop/batch.py"
        for place in _inline_plurals(module, tree)
    ]
    assert places == [], places


def test_the_helpers_say_what_their_copies_said() -> None:
    assert (plural(1, "error"), plural(0, "error"), plural(2, "loop")) == (
        "1 error",
        "0 errors",
        "2 loops",
    )
    assert shown_reward(1.0, False) == BEST_FAILING_REWARD and shown_reward(1.0, True) == 1.0
    assert shown_reward(0.5, False) == 0.5


def test_analyze_takes_a_saturated_token_sum_as_unknown() -> None:
    from ralph.analyze.facts import TOKEN_FIELDS, record_facts

    data = {
        "loop_id": "ralph-a",
        "iteration": 1,
        "timestamp": "2026-01-01T00:00:00Z",
        "actor_output": {},
        "evaluator_output": {"passed": False, "reward_signal": 1.0},
        "self_reflection": {"reflection_text": "x"},
        "memory_metadata": {},
        "ralph": {"usage": {TOKEN_FIELDS[0]: MAX_TOKENS, TOKEN_FIELDS[1]: 5}},
    }
    facts = record_facts(data, "ralph-a", 1)
    assert facts.tokens is None and facts.reward == BEST_FAILING_REWARD
    data["ralph"] = {"usage": {TOKEN_FIELDS[0]: 7, TOKEN_FIELDS[1]: None}}
    assert record_facts(data, "ralph-a", 1).tokens == 7


def test_only_process_imports_subprocess() -> None:
    """Every program ralph starts goes through `ralph.process` (groups, timeouts, redaction)."""
    importers = []
    for module, tree in _modules():
        for node in ast.walk(tree):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(name.split(".")[0] == "subprocess" for name in names):
                importers.append(module)
    assert importers == ["process.py"]


def test_capture_keeps_bytes_exact_and_says_none_when_it_cannot_run(tmp_path: Path) -> None:
    from ralph.process import capture

    secret = "sk-" + "a" * 40  # shaped like a key: git's answers are kept exactly as they are
    done = capture(["sh", "-c", f"printf 'caf\\351 {secret}'"], cwd=tmp_path)
    assert done is not None and (done.exit_code, done.stdout) == (0, b"caf\xe9 " + secret.encode())
    assert capture(["sh", "-c", "exit 3"]) == type(done)(3, b"", b"")
    assert capture([str(tmp_path / "no-such-program")]) is None
    assert capture(["sleep", "5"], timeout=0.2) is None
