"""What a loop changed: `changed_files` in `--json`, `ralph status` and the batch table, from
git's numstat (tests/test_finish.py runs it on real git) or, without git, from the records."""

from __future__ import annotations

from pathlib import Path

from ralph.glyphs import changed_text
from ralph.loop.batch import Entry
from ralph.loop.result import loop_status
from ralph.loop.tasks_file import BatchTask
from ralph.memory.store import MemoryStore
from ralph.rendering import to_data
from ralph.testing import Step, make_loop
from ralph.workspace.branches import ChangedFile, parse_numstat


def test_without_git_the_records_say_what_changed(tmp_path: Path) -> None:
    plan = {
        1: Step(version="half", write={"README.md": "# calc\n\nNow documented.\n"}),
        2: Step(version="full", write={"src/util.py": "X = 1\n"}),
    }
    loop = make_loop(tmp_path, plan, git=False, max_iterations=3)
    result = loop.start()
    assert result.status == "completed"
    changed = to_data(loop_status(None, tmp_path))["changed_files"]
    paths = [f["path"] for f in changed]
    assert paths == ["README.md", "calc.py", "src/util.py"]  # sorted; .aiwg/ never a change
    assert changed[0] == {"path": "README.md", "added": 3, "removed": 0}
    assert to_data(result)["changed_files"] == changed


def test_numstat_binary_files_have_no_counts_and_names_are_text() -> None:
    bad = b"notes-\xff.txt".decode("utf-8", "surrogateescape")  # as git's output is read
    out = f"3\t1\tREADME.md\x00-\t-\tlogo.png\x0010\t0\tsrc/a b.py\x001\t0\t{bad}\x00"
    assert parse_numstat(out) == [
        ChangedFile("README.md", 3, 1),
        ChangedFile("logo.png", None, None),
        ChangedFile("src/a b.py", 10, 0),
        ChangedFile("notes-\ufffd.txt", 1, 0),  # printable, and JSON can hold it
    ]


def test_the_line_names_the_files_and_counts_the_rest() -> None:
    files = to_data([ChangedFile(f"f{n}.py", n, 0) for n in range(5)])
    assert changed_text(files, limit=2) == "5 files: f0.py +0 -0, f1.py +1 -0, … 3 more"
    assert changed_text([]) == "nothing" and changed_text(None).startswith("unknown")


def test_a_finished_batch_entry_reads_its_changes_once(tmp_path: Path) -> None:
    loop = make_loop(tmp_path, {1: Step(version="full", write={"README.md": "hi\n"})}, git=False)
    loop.start()
    entry = Entry(BatchTask("fix", "make f pass"), "ralph-fake-1")
    entry.refresh(MemoryStore(tmp_path))
    assert entry.changes_read and entry.status == "completed"
    assert [f["path"] for f in entry.changed_files or []] == ["README.md", "calc.py"]
    assert entry.to_json()["changed_files"] == entry.changed_files
