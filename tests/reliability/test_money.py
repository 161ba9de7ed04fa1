"""Huge but finite amounts: an agent reporting `total_cost_usd: 1.7e308` made the loop's total
`inf` at its second iteration; the state could not be written and every `resume` exited 2.
Decision: money sums saturate at `records.MAX_COST_USD` (token sums at `MAX_TOKENS`), which is
past any budget."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from ralph.memory.store import MemoryStore
from ralph.records import MAX_COST_USD, MAX_TOKENS, known_sum, sum_costs

from ..conftest import RunCli
from .conftest import VERSIONS, assert_invariants, check_command

HUGE = json.dumps(
    {
        "type": "result",
        "subtype": "success",
        "result": "changed f",
        "is_error": False,
        "usage": {"input_tokens": 9 * 10**307, "output_tokens": 5},
        "total_cost_usd": 1.7e308,
    }
)


def test_sums_saturate_never_overflow() -> None:
    assert sum_costs(1.7e308, 1.7e308) == MAX_COST_USD
    assert sum_costs(MAX_COST_USD, 0.25) == MAX_COST_USD
    assert sum_costs(0.1, 0.2) == 0.3
    assert sum_costs(float("inf"), 1.0) is None and sum_costs(float("nan")) is None
    assert sum_costs(1.0, None) is None
    assert known_sum([10**400, 10**400]) == MAX_TOKENS
    assert known_sum([None, 3, 4]) == 7 and known_sum([None]) is None


FAKE_CLAUDE = r"""#!{python}
import os, sys
from pathlib import Path
sys.stdin.read()
Path("calc.py").write_text(os.environ["CALC"])
sys.stdout.write(Path(os.environ["CLAUDE_SAYS"]).read_text())
"""


def test_an_agent_reporting_an_absurd_cost_leaves_a_resumable_loop(
    ralph: RunCli, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    claude = bin_dir / "claude"
    claude.write_text(FAKE_CLAUDE.format(python=sys.executable))
    claude.chmod(0o755)
    says = tmp_path / "says.txt"
    says.write_text(HUGE)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CLAUDE_SAYS", str(says))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-fake-key-for-the-preflight")
    monkeypatch.setenv("CALC", VERSIONS["partial"])
    argv = ["run", "make f pass", "--actor", "claude", "--reflector", "heuristic"]
    first = ralph(*argv, "--test", check_command(), "--max-iterations", "2", "--json", cwd=project)
    assert first.code == 1, first.err  # the iteration limit, not an error
    assert json.loads(first.out)["stop_reason"] == "limit"
    loop_id = json.loads(first.out)["loop_id"]
    state = MemoryStore(project).read_state(loop_id)
    assert state.iteration == 2
    assert state.usage.cost_usd == MAX_COST_USD and state.usage.tokens_in == MAX_TOKENS
    monkeypatch.setenv("CALC", VERSIONS["full"])
    resumed = ralph("resume", loop_id, "--max-iterations", "3", "--json", cwd=project)
    assert resumed.code == 0, resumed.err
    summary = json.loads(resumed.out)
    assert summary["status"] == "completed" and summary["iterations"] == 3
    records = assert_invariants(project)
    assert all(r["ralph"]["usage"]["cost_usd"] == MAX_COST_USD for r in records)
    for path in MemoryStore(project).base.rglob("*.json"):
        assert "Infinity" not in path.read_text(), path
