"""Records stay small enough to commit: at most 50 diagnostics per check, the total kept."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ralph import schemas
from ralph.config import CheckSpec
from ralph.evaluators.base import CheckOutcome, Evaluation
from ralph.evaluators.judging import CheckVerdict
from ralph.memory.store import MemoryStore
from ralph.records import DIAGNOSTICS_PER_CHECK, CheckResult, Diagnostic, EvaluatorOutput

from .conftest import RunCli
from .fakes.calc_project import make_calc_repo


def diagnostics(n: int, file: str) -> list[Diagnostic]:
    return [Diagnostic("type_error", f"error {i}", file=file, line=i + 1) for i in range(n)]


def outcome(name: str, errors: list[Diagnostic], verdict: CheckVerdict | None) -> CheckOutcome:
    return CheckOutcome(
        CheckSpec(name, name), CheckResult(name, "fail"), errors=errors, verdict=verdict
    )


def evaluation(*outcomes: CheckOutcome) -> Evaluation:
    errors = [e for o in outcomes for e in o.errors]
    return Evaluation(EvaluatorOutput(False, "combined", errors=errors), list(outcomes), "fp")


def test_each_check_keeps_at_most_50_and_those_to_work_on_first() -> None:
    old = diagnostics(300, "old.py")
    new = diagnostics(5, "new.py")
    guard = outcome(
        "mypy", old[:150] + new + old[150:], CheckVerdict("guard", False, regressions=new)
    )
    tests = outcome("tests", diagnostics(3, "t.py"), CheckVerdict("target", False))
    whole = evaluation(guard, tests)
    kept, total = whole.recorded_output()
    assert total == 308 and whole.error_count == 308  # judging still sees every one
    assert kept.errors is not None and len(kept.errors) == DIAGNOSTICS_PER_CHECK + 3
    mypy_kept = kept.errors[:DIAGNOSTICS_PER_CHECK]
    assert all(d in mypy_kept for d in new), "a guard's regressions are never cut"
    assert [d.file for d in kept.errors[-3:]] == ["t.py"] * 3
    small = evaluation(tests)
    assert small.recorded_output() == (small.output, None)


def test_a_loop_with_many_errors_writes_a_small_valid_record(
    ralph: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Like a real repository with 338 mypy errors, whose records were 110 KB each."""
    program = "import sys\n" + "".join(
        f"print('mod.py:{i}: error: Incompatible types  [assignment]')\n" for i in range(1, 341)
    )
    repo = make_calc_repo(tmp_path / "repo", calc="X = 1\n", tests="", monkeypatch=monkeypatch)
    (tmp_path / "lint.py").write_text(program + "sys.exit(1)\n")
    agent = tmp_path / "agent.sh"
    agent.write_text("#!/bin/sh\necho 'Y = 2' >> calc.py\n")
    agent.chmod(0o755)
    config = repo / ".aiwg" / "ralph" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(
        "checks:\n  - name: types\n"
        f"    command: {sys.executable} {tmp_path / 'lint.py'}\n    parser: mypy\n"
        "    role: target\n"
    )
    result = ralph(
        "run", "fix the types", "--actor", f"cmd:{agent}", "--reflector", "heuristic",
        "--max-iterations", "1", "--json", cwd=repo,
    )  # fmt: skip
    assert result.code == 1, result.err
    loop_id = json.loads(result.out)["loop_id"]
    path = MemoryStore(repo).record_path(loop_id, 1)
    data = json.loads(path.read_text())
    assert schemas.errors(schemas.RECORD, data) == []
    assert len(data["evaluator_output"]["errors"]) == DIAGNOSTICS_PER_CHECK
    assert data["ralph"]["error_count"] == 340
    assert data["performance_delta"]["error_count_change"] == 0  # 340 before, 340 after
    assert path.stat().st_size < 30_000
    record = MemoryStore(repo).read_record(loop_id, 1)
    assert record.error_count == 340
