"""MemoryStore: layout, atomic writes, numeric ordering, listings and corrupt files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ralph.errors import PreflightError, StoreError
from ralph.ids import new_loop_id, validate_loop_id
from ralph.memory import locks
from ralph.memory import store as store_module
from ralph.memory.store import LoopState, MemoryStore
from ralph.records import IterationRecord

from .conftest import EXAMPLE_LOOP
from .test_records import full_record


def record_for(loop_id: str, iteration: int) -> IterationRecord:
    record = full_record()
    record.loop_id = loop_id
    record.iteration = iteration
    return record


def test_new_loop_ids_follow_the_documented_shape() -> None:
    loop_id = new_loop_id("Fix the failing DATE parser tests!! " + "x" * 80)
    assert validate_loop_id(loop_id) == loop_id
    slug = loop_id.removeprefix("ralph-").rsplit("-", 1)[0]
    assert slug.startswith("fix-the-failing-date-parser-tests") and len(slug) <= 40
    assert len(loop_id.rsplit("-", 1)[1]) == 8
    assert new_loop_id("same") != new_loop_id("same")


@pytest.mark.parametrize(
    ("task", "slug"),
    [
        # the semver trial's task cut `tests` to `te`
        ("fix the failing prerelease comparison tests", "fix-the-failing-prerelease-comparison"),
        ("Fix: parser—crash!", "fix-parser-crash"),
        ("x" * 50 + " more", "x" * 40),  # one word longer than a slug: cut, still an id
        ("!!!", "loop"),
    ],
)
def test_a_loop_id_slug_ends_at_a_word(task: str, slug: str) -> None:
    loop_id = new_loop_id(task)
    assert validate_loop_id(loop_id) == loop_id
    assert loop_id.removeprefix("ralph-").rsplit("-", 1)[0] == slug


@pytest.mark.parametrize("bad", ["", "../x", "ralph-../x", "ralph-a/b", "ralph-ABC", "other-1"])
def test_invalid_loop_ids_never_reach_a_path(tmp_path: Path, bad: str) -> None:
    with pytest.raises(StoreError, match="invalid loop id"):
        MemoryStore(tmp_path).reflections_dir(bad)


def test_records_are_named_nnn_and_sorted_numerically(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    for n in (1, 2, 10, 100, 1000):
        store.write_record(record_for("ralph-a-1", n))
    assert (store.reflections_dir("ralph-a-1") / "002.json").exists()
    assert [n for n, _ in store.record_paths("ralph-a-1")] == [1, 2, 10, 100, 1000]
    assert store.read_record("ralph-a-1", 10) == record_for("ralph-a-1", 10)


def test_invalid_record_is_refused_before_it_reaches_disk(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    record = record_for("ralph-a-1", 1)
    record.evaluator_output.reward_signal = 3.0
    with pytest.raises(StoreError, match="reward_signal"):
        store.write_record(record)
    assert not store.record_path("ralph-a-1", 1).exists()


def test_ensure_writes_a_gitignore_that_keeps_logs_local(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    store.ensure()
    lines = (tmp_path / ".aiwg/ralph/.gitignore").read_text().splitlines()
    assert "loops/" in lines and "reflections/" not in lines


def test_state_round_trip_and_crash_detection(tmp_path: Path) -> None:
    """Running means: its lock is held. The pid in the state decides nothing."""
    store = MemoryStore(tmp_path)
    state = LoopState("ralph-a-1", "task", pid=os.getpid(), host=os.uname()[1])
    store.write_state(state)
    loaded = store.read_state("ralph-a-1")
    assert loaded.task == "task" and loaded.status == "running"
    assert store.effective_status(loaded) == "crashed"  # a live pid, but no lock
    with store.lock("ralph-a-1", tmp_path):
        assert store.effective_status(store.read_state("ralph-a-1")) == "running"
    assert store.effective_status(loaded) == "crashed"


WRITER = """
import sys
from pathlib import Path
from ralph.files import atomic_write_text
target = Path(sys.argv[1])
big = [("A" * 2_000_000), ("B" * 2_000_000)]
i = 0
print("ready", flush=True)
while True:
    atomic_write_text(target, '{"v": "%s"}' % big[i % 2])
    i += 1
"""


def test_atomic_write_killed_mid_write_leaves_old_or_new_file(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    target.write_text('{"v": "old"}')
    for delay in (0.05, 0.13, 0.21, 0.34):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(target)], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        value = json.loads(target.read_text())["v"]
        assert value == "old" or set(value) in ({"A"}, {"B"})
        assert len(value) in (3, 2_000_000)


def test_listing_a_thousand_loops_reads_only_state_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MemoryStore(tmp_path)
    data = json.dumps(record_for("ralph-a-1", 1).to_json())
    store.write_state(LoopState("ralph-loop-0000", "task 0", status="completed", iteration=1))
    state = store.state_path("ralph-loop-0000").read_text()  # one real state, copied: 1000
    for i in range(1000):  # fsynced writes would take seconds and prove nothing here
        loop_id = f"ralph-loop-{i:04d}"
        folder = store.reflections_dir(loop_id)
        folder.mkdir(parents=True)
        (folder / "001.json").write_text(data)
        text = state.replace("ralph-loop-0000", loop_id).replace('"task 0"', f'"task {i}"')
        store.loop_dir(loop_id).mkdir(parents=True, exist_ok=True)
        store.state_path(loop_id).write_text(text)
    opened: list[str] = []
    real = store_module.read_json_bounded

    def spy(path: Path, limit: int, *, strict: bool = True) -> object:
        opened.append(path.name)
        return real(path, limit, strict=strict)

    monkeypatch.setattr(store_module, "read_json_bounded", spy)
    listings = store.list_loops()
    assert len(listings) == 1000
    assert all(item.record_count == 1 for item in listings)
    assert set(opened) == {"state.json"} and len(opened) == 1000


def test_corrupt_files_are_reported_not_fatal(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    store.write_record(record_for("ralph-a-1", 1))
    store.reflections_dir("ralph-a-1").joinpath("002.json").write_text("{not json")
    store.reflections_dir("ralph-a-1").joinpath("003.json").write_text('{"loop_id": "x"}')
    store.loop_dir("ralph-b-2").mkdir(parents=True)
    store.state_path("ralph-b-2").write_text("[]")
    files = store.read_records("ralph-a-1")
    assert [f.record is not None for f in files] == [True, False, False]
    assert "not JSON" in files[1].problems[0]
    assert any("required property" in p for p in files[2].problems)
    listings = {item.loop_id: item for item in store.list_loops()}
    assert listings["ralph-b-2"].state is None
    assert "invalid loop state" in (listings["ralph-b-2"].problem or "")
    assert listings["ralph-a-1"].problem == "no state file"


def test_lock_refuses_a_second_loop_and_ignores_a_stale_lock(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    with (
        store.lock("ralph-a-1", tmp_path),
        pytest.raises(PreflightError, match="ralph-a-1 is already running"),
        store.lock("ralph-b-2", tmp_path),
    ):
        pass
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    path = locks.lock_path(store.base, tmp_path)
    path.write_text(json.dumps({"loop_id": "ralph-old-1", "pid": proc.pid, "host": os.uname()[1]}))
    with store.lock("ralph-b-2", tmp_path):
        assert "ralph-b-2" in path.read_text()
    assert not path.exists()


def test_discover_finds_the_memory_from_a_subdirectory(example_project: Path) -> None:
    sub = example_project / "src" / "deep"
    sub.mkdir(parents=True)
    store = MemoryStore.discover(sub)
    assert store.root == example_project.resolve()
    assert store.latest_loop() == EXAMPLE_LOOP


def test_written_files_get_the_mode_of_a_plain_open(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    path = store.write_record(record_for("ralph-a-1", 1))
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    assert path.stat().st_mode & 0o777 == plain.stat().st_mode & 0o777


def test_untouched_tells_whether_someone_else_wrote_the_file(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path)
    path = store.write_record(record_for("ralph-a-1", 1))
    store.write_state(LoopState("ralph-a-1", "task"))
    assert store.untouched(path) and store.untouched(store.state_path("ralph-a-1"))
    data = path.read_bytes()
    path.write_bytes(data)  # same bytes, rewritten in place by another writer
    os.utime(path, ns=(0, 0))
    assert not store.untouched(path)
    store.state_path("ralph-a-1").unlink()
    assert not store.untouched(store.state_path("ralph-a-1"))
    assert not MemoryStore(tmp_path).untouched(path)  # another store never wrote it


def test_loops_ending_in_the_same_second_are_ordered_by_which_was_written_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`latest` and `prune --keep` need an order: updated_at has whole seconds."""
    from ralph.memory import store as store_module

    monkeypatch.setattr(store_module, "utc_now", lambda: "2026-11-23T20:00:00Z")
    store = MemoryStore(tmp_path)
    store.ensure()
    for loop_id in ("ralph-z-later-id", "ralph-a-earlier-id"):  # written z first, then a
        store.write_state(LoopState(loop_id, "task", status="completed"))
        os.utime(store.state_path(loop_id), ns=(0, 10**18 if loop_id.startswith("ralph-a") else 1))
    assert [it.loop_id for it in store.list_loops()] == ["ralph-z-later-id", "ralph-a-earlier-id"]
    assert store.latest_loop() == "ralph-a-earlier-id"
