"""One owner per rule and helper: the source says each rule once, so a fix lands everywhere."""

from __future__ import annotations

import ast
import functools
import re
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


def _declared_only(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A protocol's method: `...` (after a docstring or not), no body of its own."""
    body = [
        s
        for s in node.body
        if not (
            isinstance(s, ast.Expr)
            and isinstance(s.value, ast.Constant)
            and isinstance(s.value.value, str)
        )
    ]
    return (
        len(body) == 1
        and isinstance(body[0], ast.Expr)
        and getattr(body[0].value, "value", None) is Ellipsis
    )


@functools.cache
def _definitions() -> dict[str, list[str]]:
    """Function and method name -> where it is defined (not where a protocol declares it),
    as `module:line`."""
    found: dict[str, list[str]] = {}
    for module, tree in _modules():
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if not _declared_only(node):
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


def _one_branch(node: ast.IfExp) -> tuple[str, str] | None:
    """The string an `a if n == 1 else b` says for one thing, and the other; None when the
    test is not a comparison with 1 or a branch is not a string."""
    test = node.test
    if not (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == 1
        and all(isinstance(side, ast.Constant) for side in (node.body, node.orelse))
    ):
        return None
    body, orelse = node.body.value, node.orelse.value  # type: ignore[attr-defined]
    if not (isinstance(body, str) and isinstance(orelse, str)):
        return None
    if isinstance(test.ops[0], ast.Eq):
        return body, orelse
    if isinstance(test.ops[0], ast.NotEq | ast.Gt):
        return orelse, body
    return None


# Words after a count that end in s but are no plural: verbs, and units said as symbols.
NOT_PLURALS = frozenset(
    [
        "is",
        "was",
        "has",
        "does",
        "needs",
        "names",
        "passes",
        "fails",
        "differs",
        "exists",
        "prints",
        "stays",
        "ms",
    ]
)
# A count said as an f-string: `{n} files`, `{n} new failures`.
COUNTED = re.compile(r" (?:(?:new|more|failing|older|invalid) )?([a-z]+)\b")


def _counted_nouns(node: ast.JoinedStr) -> list[str]:
    """The plural nouns an f-string puts after a counted value: `{n} files` says `1 files`
    when n is 1. A name in capitals is a constant and keeps its plural."""
    found = []
    for before, value, after in zip(
        [None, *node.values[:-1]], node.values, [*node.values[1:], None], strict=True
    ):
        if not (
            isinstance(value, ast.FormattedValue)
            and value.format_spec is None
            and isinstance(after, ast.Constant)
            and isinstance(after.value, str)
        ):
            continue
        if isinstance(value.value, ast.Name) and value.value.id.isupper():
            continue  # a constant, never 1
        if isinstance(before, ast.Constant) and str(before.value).endswith("iteration "):
            continue  # an ordinal: `iteration 3 leftovers`
        word = COUNTED.match(after.value)
        plural_form = word is not None and word[1].endswith("s") and not word[1].endswith("ss")
        if word is not None and plural_form and word[1] not in NOT_PLURALS:
            found.append(word[1])
    return found


def _hand_plurals(module: str, tree: ast.Module) -> list[str]:
    """Plurals said by hand instead of `glyphs.plural`: `'' if n == 1 else 's'`,
    `'file' if n == 1 else 'files'`, `file(s)` and `{n} files`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.IfExp) and (pair := _one_branch(node)) is not None:
            one, many = pair
            if many in (one + "s", one + "es"):
                found.append(f"{module}:{node.lineno}: {one!r}/{many!r}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if re.search(r"\w\(s\)", node.value):
                found.append(f"{module}:{node.lineno}: {node.value!r}")
        elif isinstance(node, ast.JoinedStr):
            found += [f"{module}:{node.lineno}: {{n}} {word}" for word in _counted_nouns(node)]
    return found


def test_plurals_are_said_by_plural_only() -> None:
    """Outside glyphs.py no sentence builds a plural itself, so none says `1 iterations`."""
    places = [
        place
        for module, tree in _modules()
        if module != "glyphs.py"
        for place in _hand_plurals(module, tree)
    ]
    assert places == [], places


def test_the_plural_finder_finds_each_hand_written_form() -> None:
    """Each form the test above refuses is found; verbs that agree with a count, a constant
    count, a unit and an ordinal are not."""
    source = """
a = f"{n} file{'s' if n != 1 else ''}"
b = f"{n} {'file' if n == 1 else 'files'}"
c = f"{n} loop(s)"
d = f"{len(xs)} iterations, best {best}"
e = f"{n} new failures"
ok = f"{name} fails; {x} is {y}; {'has' if n == 1 else 'have'}; {LIMIT} bytes; {n} ms"
verb = "fails" if len(names) == 1 else "fail"
ordinal = f"iteration {n} leftovers; {spec} names no model"
"""
    found = sorted(place.split(": ", 1)[1] for place in _hand_plurals("m.py", ast.parse(source)))
    assert found == ["' loop(s)'", "''/'s'", "'file'/'files'", "{n} failures", "{n} iterations"]


def test_a_count_of_one_is_said_in_the_singular() -> None:
    """What ralph said when one thing was counted: `1 iterations`, `1 files changed`."""
    import io

    from ralph.cli.live import PlainReporter
    from ralph.loop.result import LoopResult
    from ralph.templates import cap
    from ralph.workspace.base import ChangeSet, FileChange

    out = io.StringIO()
    reporter = PlainReporter(out)
    reporter.next_steps = False
    reporter.loop_finished(
        LoopResult("ralph-1", "completed", "success", 0, 1, 1, 1.0, [1.0], {}, "")
    )
    assert "success): 1 iteration, best reward 1.00" in out.getvalue()
    one = ChangeSet([FileChange("a.py", "modified", 1, 0, "")])
    assert one.summary() == "1 file changed, +1 -0: a.py"
    assert "[... 1 character elided ...]" in cap("x" * 11, 10)


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
