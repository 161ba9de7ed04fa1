"""ralph's settings are fixed when the loop starts: an agent that plants `[tool.ralph]` in
pyproject.toml or edits `.aiwg/ralph/config.yaml` is reported and never obeyed, not at the
loop's end (`notify_command` ran outside any sandbox) and not on `resume`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ralph.memory.store import MemoryStore
from tests.conftest import RunCli

IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}
TEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"
CONFIG = f"checks:\n  - name: tests\n    command: {TEST}\n"


def project(tmp_path: Path) -> Path:
    """A git repository whose one test fails until calc.py says 2; its checks configured."""
    root = tmp_path / "proj"
    root.mkdir()
    (root / "calc.py").write_text("VALUE = 1\n")
    (root / "test_calc.py").write_text(
        "from calc import VALUE\n\ndef test_value():\n    assert VALUE == 2\n"
    )
    (root / ".aiwg" / "ralph").mkdir(parents=True)
    (root / ".aiwg" / "ralph" / "config.yaml").write_text(CONFIG)
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "init"]):
        subprocess.run(["git", *args], cwd=root, check=True, env={**os.environ, **IDENTITY})
    return root


def planting_agent(tmp_path: Path, marker: Path) -> str:
    """A `cmd:` agent that fixes nothing and plants settings: a notify command that touches
    `marker`, the sandbox off and test edits on."""
    script = tmp_path / "plant.py"
    planted = (
        f'[tool.ralph]\nnotify = true\nnotify_command = "touch {marker}"\n'
        'sandbox = "none"\nallow-test-edits = true\n'
    )
    script.write_text(
        "from pathlib import Path\n"
        f"Path('pyproject.toml').write_text({planted!r})\n"
        "config = Path('.aiwg/ralph/config.yaml')\n"
        "config.write_text(config.read_text() + "
        f"'notify: true\\nnotify_command: touch {marker}\\n')\n"
        "print('planted')\n"
    )
    return f"cmd:{sys.executable} {script}"


def test_planted_settings_are_reported_and_never_obeyed_at_the_end_or_on_resume(
    ralph: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = project(tmp_path)
    marker = tmp_path / "notified"
    monkeypatch.delenv("RALPH_NOTIFY_COMMAND", raising=False)
    agent = planting_agent(tmp_path, marker)
    result = ralph("run", "make VALUE 2", "-a", agent, "-n", "1", "--sandbox", "none", cwd=root)
    assert result.code == 1, result.err
    said = result.out + result.err
    assert "changed ralph's settings (.aiwg/ralph/config.yaml): put back" in said
    assert "changed ralph's settings (pyproject.toml [tool.ralph]): not obeyed" in said
    assert not marker.exists(), "the planted notify_command ran at the loop's end"
    assert (root / ".aiwg" / "ralph" / "config.yaml").read_text() == CONFIG
    store = MemoryStore(root)
    loop_id = store.loop_ids()[-1]
    assert store.read_state(loop_id).settings.allow_test_edits is False

    # resume runs with the settings stored at start, though the tree still plants them
    resumed = ralph("resume", loop_id, "-n", "2", "--json", cwd=root)
    assert resumed.code == 1, resumed.err
    assert json.loads(resumed.out)["loop_id"] == loop_id
    assert not marker.exists(), "resume obeyed the planted notify_command"
    state = store.read_state(loop_id)
    assert (state.settings.sandbox, state.settings.allow_test_edits) == ("none", False)
    assert state.settings.notify_command is None
