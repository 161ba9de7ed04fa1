"""A file over the size limit and a flood of new files are not committed: left in the tree,
named in the run's lines and the record's notes (`max_file_mb`, `max_new_files`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ralph.memory.store import MemoryStore
from tests.conftest import RunCli

from .test_settings_fixed import CONFIG, project


def test_a_huge_file_and_a_flood_of_new_files_are_left_out_and_reported(
    ralph: RunCli, tmp_path: Path
) -> None:
    root = project(tmp_path)
    config = root / ".aiwg" / "ralph" / "config.yaml"
    config.write_text(CONFIG + "max_file_mb: 1\nmax_new_files: 50\n")
    script = tmp_path / "flood.py"
    script.write_text(
        "from pathlib import Path\n"
        "Path('calc.py').write_text('VALUE = 2\\n')\n"
        "with open('big.bin', 'wb') as f:\n    f.truncate(3_000_000)\n"
        "Path('flood/deep').mkdir(parents=True)\n"
        "for n in range(60):\n    Path(f'flood/deep/{n}.txt').write_text(str(n))\n"
        "print('done')\n"
    )
    agent = f"cmd:{sys.executable} {script}"
    result = ralph("run", "make VALUE 2", "-a", agent, "-n", "1", "--sandbox", "none",
                   "--json", cwd=root)  # fmt: skip
    assert result.code == 0, result.err
    assert "not committed: big.bin (3 MB, over the limit of 1 MB" in result.err
    assert "not committed: 60 new files (over the limit of 50, max_new_files), in flood" in (
        result.err
    )
    commit = json.loads(result.out)["best_commit"]
    files = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", commit], cwd=root, capture_output=True,
        text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert "calc.py" in files and "big.bin" not in files
    assert not [name for name in files if name.startswith("flood/")]
    assert (root / "big.bin").stat().st_size == 3_000_000  # left where the agent put it
    assert len(list((root / "flood" / "deep").iterdir())) == 60
    record = MemoryStore(root).valid_records(json.loads(result.out)["loop_id"])[-1]
    assert record.notes is not None and "big.bin" in record.notes
