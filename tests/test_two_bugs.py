"""Two planted bugs in one repository, one loop per bug: a lesson learned on one bug is never
offered to the loop of the other, although each loop's guard sees both failures."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ralph.memory.store import MemoryStore

from .conftest import RunCli
from .fakes.calc_project import git, make_calc_repo
from .fakes.provider_server import FakeProvider

ACTOR = r"""
import os, sys
from pathlib import Path
fixes = {"f": ("return x  # f", "return abs(x)  # f"), "g": ("return x  # g", "return 2 * x  # g")}
task = os.environ["FIX"]
if os.environ["RALPH_ITERATION"] != "1":  # the first attempt changes nothing
    text = Path("calc.py").read_text()
    Path("calc.py").write_text(text.replace(*fixes[task]))
print("done")
"""
CALC = "def f(x: int) -> int:\n    return x  # f\n\n\ndef g(x: int) -> int:\n    return x  # g\n"
TEST_F = "from calc import f\n\n\ndef test_f_negative() -> None:\n    assert f(-1) == 1\n"
TEST_G = "\n\ndef test_g_double() -> None:\n    from calc import g\n\n    assert g(3) == 6\n"
# both tests in one file, each loop's --test naming its own
TEST_FILES = {"f": "tests/test_calc.py::test_f_negative", "g": "tests/test_calc.py::test_g_double"}
LESSON_F = "MARKER-f: negative inputs of f need abs()"


def run(ralph: RunCli, root: Path, task: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    git(root, "checkout", "-q", "main")
    monkeypatch.setenv("FIX", task)
    test = f"{sys.executable} -m pytest -q -p no:cacheprovider {TEST_FILES[task]}"
    actor = f"cmd:{sys.executable} {root.parent / 'actor.py'}"
    result = ralph("run", f"fix {task}", "--actor", actor, "--test", test, "--json", cwd=root)
    assert result.code == 0, result.err
    summary: dict[str, str] = json.loads(result.out)
    return summary


def test_a_lesson_for_one_bug_is_not_offered_for_the_other(
    ralph: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_calc_repo(
        tmp_path / "repo", calc=CALC, tests=TEST_F + TEST_G, monkeypatch=monkeypatch
    )
    suite = f"{sys.executable} -m pytest -q -p no:cacheprovider tests"
    (root / ".aiwg" / "ralph").mkdir(parents=True)
    (root / ".aiwg" / "ralph" / "config.yaml").write_text(
        f"checks:\n  - {{name: suite, command: {json.dumps(suite)}, parser: shell, role: guard}}\n"
    )
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "two bugs")
    (tmp_path / "actor.py").write_text(ACTOR)
    monkeypatch.setenv("CI", "true")
    reflection = {
        "reflection_text": "f(-1) still gives -1: I changed nothing.",
        "credit_assignment": {
            "root_cause": "f ignores the sign",
            "failure_category": "logic_error",
        },
        "lessons_learned": [LESSON_F],
        "confidence": 0.9,
    }
    with FakeProvider(default_text=json.dumps(reflection)) as fake:
        for name, value in fake.environ().items():
            monkeypatch.setenv(name, value)
        a = run(ralph, root, "f", monkeypatch)
        monkeypatch.setenv("RALPH_REFLECTOR", "heuristic")
        b = run(ralph, root, "g", monkeypatch)
    store = MemoryStore(root)
    first = store.read_record(a["loop_id"], 1).ralph
    assert first is not None and first.failures is not None
    # loop f's lesson is for test_f alone, though its guard also saw test_g failing
    assert [(s.check, s.id) for s in first.failures] == [
        ("tests", "tests/test_calc.py::test_f_negative")
    ]
    for iteration in (1, 2):
        prompt = (store.artifacts_dir(b["loop_id"], iteration) / "prompt.md").read_text()
        assert "not your task" in prompt or iteration == 2
        assert LESSON_F not in prompt
        used = store.read_record(b["loop_id"], iteration).ralph
        assert used is not None and used.lessons_used == []
