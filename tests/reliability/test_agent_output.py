"""Malformed agent output: usage that is not a count, JSON nested too deep; never a crash, never
a non-finite number in a record or the state."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from ralph.actors.agent_output import parse_claude, parse_codex, parse_opencode
from ralph.memory.store import MemoryStore

from ..conftest import RunCli
from .conftest import VERSIONS, assert_invariants, check_command

RESULT = {"type": "result", "subtype": "success", "result": "fixed f", "is_error": False}
MALFORMED = {
    "infinite tokens": '{"type": "result", "result": "fixed f", '
    '"usage": {"input_tokens": Infinity, "output_tokens": 5}, "total_cost_usd": 0.5}',
    "nan cost": '{"type": "result", "result": "fixed f", '
    '"usage": {"input_tokens": 7, "output_tokens": 5}, "total_cost_usd": NaN}',
    "negative tokens": json.dumps({**RESULT, "usage": {"input_tokens": -7, "output_tokens": 5}}),
    "huge exponent": '{"type": "result", "result": "fixed f", '
    '"usage": {"input_tokens": 1e400, "output_tokens": 5.5}, "total_cost_usd": -1}',
    "200,000 brackets": "[" * 200_000,
    "deep objects": '{"a": ' * 50_000 + "1" + "}" * 50_000,
    "deep line": json.dumps(RESULT) + "\n" + '{"type": ' + "[" * 100_000 + "\n",
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_parsers_never_crash_and_keep_only_counts(name: str) -> None:
    text = MALFORMED[name]
    for parse in (parse_claude, parse_codex, parse_opencode):
        parse(text)  # no OverflowError, no RecursionError
    out = parse_claude(text)
    for value in (out.tokens_in, out.tokens_out):
        assert value is None or (isinstance(value, int) and value >= 0)
    assert out.cost_usd is None or out.cost_usd >= 0
    if name in ("infinite tokens", "negative tokens", "huge exponent", "nan cost"):
        assert out.text == "fixed f" and out.notes, "ignored values are noted"
    if name == "infinite tokens":
        assert (out.tokens_in, out.tokens_out, out.cost_usd) == (None, 5, 0.5)
        assert "input_tokens inf" in out.notes[0]
    if name == "deep line":
        assert out.text == "fixed f"  # the good line is still read


FAKE_CLAUDE_PER_ATTEMPT = r"""#!{python}
import json, os, sys
from pathlib import Path
sys.stdin.read()
says = json.loads(Path(os.environ["CLAUDE_SAYS"]).read_text())
n = int(os.environ["RALPH_ITERATION"])
if n == len(says):  # the last attempt fixes f
    Path("calc.py").write_text(os.environ["CALC"])
sys.stdout.write(says[n - 1])
"""
IN_A_LOOP = ["infinite tokens", "nan cost", "negative tokens", "deep objects"]


def test_a_loop_survives_malformed_agent_output(
    ralph: RunCli, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: OverflowError, RecursionError, or "refusing to write an invalid record". One
    loop whose agent says one malformed thing per attempt, then fixes f at the last."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    claude = bin_dir / "claude"
    claude.write_text(FAKE_CLAUDE_PER_ATTEMPT.format(python=sys.executable))
    claude.chmod(0o755)
    says = tmp_path / "says.json"
    says.write_text(json.dumps([MALFORMED[name] for name in IN_A_LOOP]))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CLAUDE_SAYS", str(says))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-fake-key-for-the-preflight")
    monkeypatch.setenv("CALC", VERSIONS["full"])
    argv = ["run", "make f pass", "--actor", "claude", "--reflector", "heuristic"]
    more = ["--patience", "20", "--max-iterations", str(len(IN_A_LOOP))]
    result = ralph(*argv, *more, "--test", check_command(), "--json", cwd=project)
    assert result.code == 0, result.err
    records = assert_invariants(project)
    assert len(records) == len(IN_A_LOOP) and records[-1]["evaluator_output"]["passed"] is True
    for path in MemoryStore(project).base.rglob("*.json"):
        text = path.read_text()
        assert "NaN" not in text and "Infinity" not in text, path
    for name, record in zip(IN_A_LOOP, records, strict=True):
        if name != "deep objects":
            assert "ignored" in record["notes"], name
    assert "ignored" in result.err
    assert ralph("reflections", "validate", cwd=project).code == 0


def test_no_writer_puts_a_non_finite_number_on_disk(tmp_path: Path) -> None:
    """The last line of defence: `allow_nan=False`, a one-line error, the old file kept."""
    from ralph.errors import StoreError
    from ralph.files import atomic_write_json
    from ralph.memory.state import Totals
    from ralph.memory.store import LoopState

    target = tmp_path / "x.json"
    atomic_write_json(target, {"cost": 1.0})
    with pytest.raises(StoreError, match=r"refusing to write .*x\.json: Out of range float"):
        atomic_write_json(target, {"cost": float("nan")})
    assert json.loads(target.read_text()) == {"cost": 1.0}
    store = MemoryStore(tmp_path)
    state = LoopState("ralph-nan-1", "task", usage=Totals(cost_usd=float("inf")))
    with pytest.raises(StoreError):
        store.write_state(state)
    assert not store.state_path("ralph-nan-1").exists()
