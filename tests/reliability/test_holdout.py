"""Held-out tests (loop/holdout.py): what the checks alone cannot see, an agent that fits the
visible test's exact inputs, ends `suspect`, not `success`; the agent never sees the held-out
tests (masked under the sandbox, in no prompt)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ralph import sandbox
from ralph.config import Settings
from ralph.loop.holdout import held_out
from ralph.loop.result import EXIT_CODES
from ralph.sandbox import Sandbox
from ralph.testing import make_loop, write

from ..conftest import RunCli
from ..fakes.calc_project import make_calc_repo

FOUND = sandbox.find()
MODES = [
    "none",
    pytest.param(
        "bwrap", marks=pytest.mark.skipif(not FOUND.works, reason=f"no bubblewrap: {FOUND.reason}")
    ),
]
BUGGY = "def add(a, b):\n    return a - b\n"
VISIBLE = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
HELD = "from calc import add\n\n\ndef test_add_more():\n    assert add(10, 20) == 30\n"
# fits the visible test's inputs and nothing else; and looks for the held-out tests
SPECIAL_CASE = """\
import json, os, pathlib
seen = {}
try:
    seen["held"] = pathlib.Path(HELD_PATH).read_text()
except OSError as exc:
    seen["held"] = f"refused: {exc.strerror}"
seen["prompt"] = "test_add_more" in pathlib.Path(os.environ["RALPH_PROMPT_FILE"]).read_text()
pathlib.Path("calc.py").write_text(
    "def add(a, b):\\n    if (a, b) == (2, 3):\\n        return 5\\n    return a - b\\n"
)
print(json.dumps(seen))
"""


def test_a_hidden_path_is_an_empty_file_or_folder_over_every_bind(tmp_path: Path) -> None:
    (tmp_path / "held").mkdir()
    (tmp_path / "held.py").write_text(HELD)
    box = Sandbox("bwrap", tmp_path, hidden=(tmp_path / "held", tmp_path / "held.py"))
    argv = box.argv(["true"], tmp_path, tmp_path / "tmp")
    tail = argv[argv.index(str(tmp_path)) :]
    assert ["--tmpfs", str(tmp_path / "held")] == argv[-9:-7]
    assert ["--ro-bind", "/dev/null", str(tmp_path / "held.py")] == argv[-7:-4]
    assert "--chdir" in tail


@pytest.mark.parametrize(("held", "ends"), [("assert False", "suspect"), ("pass", "success")])
def test_a_success_the_held_out_tests_fail_is_suspect(tmp_path: Path, held: str, ends: str) -> None:
    outside = tmp_path / "private" / "test_held.py"
    outside.parent.mkdir()
    outside.write_text(f"def test_held():\n    {held}\n")
    loop = make_loop(tmp_path / "repo", {1: write("full")}, tests=True)
    settings = Settings(holdout=[str(outside)])
    loop.runner.parts.holdout = held_out(settings, loop.root, {}, None)
    result = loop.start()
    assert result.stop_reason == ends
    assert EXIT_CODES[result.stop_reason] == (1 if ends == "suspect" else 0)
    if ends == "suspect":
        assert "1 held-out test failed" in result.message
        assert "test_held" in result.message and "special-cased" in result.message
    assert all("test_held" not in prompt for prompt in loop.actor.prompts.values())


@pytest.mark.parametrize("mode", MODES)
def test_an_agent_that_special_cases_the_inputs_ends_suspect(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ralph: RunCli, mode: str
) -> None:
    repo = make_calc_repo(tmp_path / "repo", calc=BUGGY, tests=VISIBLE, monkeypatch=monkeypatch)
    held = tmp_path / "private" / "test_held.py"
    held.parent.mkdir()
    held.write_text(HELD)
    agent = tmp_path / "agent.py"
    agent.write_text(SPECIAL_CASE.replace("HELD_PATH", repr(str(held))))
    config = tmp_path / "config.yaml"
    config.write_text(json.dumps({"holdout": [str(held)]}))
    test = f"{sys.executable} -m pytest -q -p no:cacheprovider tests"
    result = ralph(
        "run", "make add add", "--actor", f"cmd:{sys.executable} {agent}", "--test", test,
        "--config", str(config), "--sandbox", mode, "--json", "--max-iterations", "1",
        "--reflector", "heuristic", cwd=repo,
    )  # fmt: skip
    assert result.code == 1, result
    data = json.loads(result.out)
    assert data["stop_reason"] == "suspect", data
    assert "held-out test failed" in result.err and "test_add_more" in result.err, result.err
    log = next((repo / ".aiwg/ralph/loops").rglob("actor.log")).read_text()
    seen = json.loads(next(line for line in log.splitlines() if line.startswith("{")))
    assert seen["prompt"] is False  # in no prompt
    # masked under the sandbox (/dev/null over it: refused); without it, outside the tree is
    # readable, as the README says
    assert (seen["held"] != HELD) if mode == "bwrap" else (seen["held"] == HELD), seen


def test_holdout_from_the_config_and_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ralph.config import load

    (tmp_path / ".aiwg" / "ralph").mkdir(parents=True)
    (tmp_path / ".aiwg" / "ralph" / "config.yaml").write_text("holdout: [../held]\n")
    assert load(tmp_path).holdout_paths(tmp_path) == ((tmp_path.parent / "held").resolve(),)
    monkeypatch.setenv("RALPH_HOLDOUT", "/x/test_a.py /y")
    assert load(tmp_path).holdout == ["/x/test_a.py", "/y"]
