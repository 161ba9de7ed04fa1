"""The escalation exit: an agent that says `RALPH-ESCALATE: <reason>` stops the loop for a
person (needs_human, exit 5) with the reason and the evidence on screen, in `status`, `notify`
and the record; never a success; `--no-escalate` takes the offer away; `resume` continues."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ralph import schemas
from ralph.memory.store import MemoryStore
from tests.conftest import RunCli

from .test_settings_fixed import project

REASON = "test_value wants VALUE == 2 but the task says 3"


def agent(tmp_path: Path, *, fix: bool = False) -> str:
    """A `cmd:` agent that keeps the prompt it got and escalates (after fixing calc.py, with
    `fix`)."""
    script = tmp_path / "escalate.py"
    script.write_text(
        "import os\nfrom pathlib import Path\n"
        "prompt = Path(os.environ['RALPH_PROMPT_FILE']).read_text()\n"
        f"Path({str(tmp_path / 'prompt.md')!r}).write_text(prompt)\n"
        + ("Path('calc.py').write_text('VALUE = 2\\n')\n" if fix else "")
        + "print('I looked at the tests.')\n"
        f"print('**RALPH-ESCALATE: {REASON}**')\n"
    )
    return f"cmd:{sys.executable} {script}"


def notified(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    seen = tmp_path / "notified.txt"
    dump = "import os, sys; open(sys.argv[1], 'w').write(os.environ['RALPH_NOTIFY_MESSAGE'])"
    monkeypatch.setenv("RALPH_NOTIFY_COMMAND", f'{sys.executable} -c "{dump}" {seen}')
    return seen


def test_an_escalation_stops_the_loop_for_a_person_with_its_reason_and_evidence(
    ralph: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = project(tmp_path)
    seen = notified(tmp_path, monkeypatch)
    run = ralph("run", "make VALUE 3", "-a", agent(tmp_path), "-n", "3", "--sandbox", "none",
                "--notify", "--json", cwd=root)  # fmt: skip
    assert run.code == 5, run.err
    assert "RALPH-ESCALATE: <the reason" in (tmp_path / "prompt.md").read_text()
    result = json.loads(run.out)
    assert (result["status"], result["exit_code"], result["iterations"]) == ("needs_human", 5, 1)
    assert (
        REASON in result["stop_reason"] and "evidence: iteration 1, reward" in result["stop_reason"]
    )
    assert "tests fail" in result["stop_reason"]
    assert f"the agent asks for a person: {REASON}" in run.err
    assert REASON in seen.read_text() and "needs_human" in seen.read_text()

    status = ralph("status", result["loop_id"], cwd=root)
    assert status.code == 0 and REASON in status.out and "needs_human" in status.out
    store = MemoryStore(root)
    data = json.loads(store.record_path(result["loop_id"], 1).read_text())
    assert data["ralph"]["escalation"] == REASON
    assert schemas.errors(schemas.RECORD, data) == []
    assert data["evaluator_output"]["passed"] is False

    # a person looked; the loop can go on
    monkeypatch.delenv("RALPH_NOTIFY_COMMAND")
    again = ralph("resume", result["loop_id"], "-n", "3", "--json", cwd=root)
    assert again.code == 5, again.err
    assert json.loads(again.out)["iterations"] == 2


def test_without_the_offer_the_line_is_ignored(ralph: RunCli, tmp_path: Path) -> None:
    root = project(tmp_path)
    run = ralph("run", "make VALUE 3", "-a", agent(tmp_path), "-n", "1", "--sandbox", "none",
                "--no-escalate", "--json", cwd=root)  # fmt: skip
    assert run.code == 1, run.err
    assert "RALPH-ESCALATE" not in (tmp_path / "prompt.md").read_text()
    assert json.loads(run.out)["status"] == "failed"


def test_only_the_checks_decide_an_escalation_with_passing_checks_is_a_success(
    ralph: RunCli, tmp_path: Path
) -> None:
    root = project(tmp_path)
    run = ralph("run", "make VALUE 2", "-a", agent(tmp_path, fix=True), "-n", "2",
                "--sandbox", "none", "--json", cwd=root)  # fmt: skip
    assert run.code == 0, run.err
    assert json.loads(run.out)["status"] == "completed"
