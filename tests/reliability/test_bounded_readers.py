"""Third adversarial round: schema-valid extreme records and files that are not records.

Every reader of a record goes through one bounded reader (`ralph.reading`: regular files, a size
limit, decoding errors as reasons); analyze and the PROV export read out-of-range values as
unknown; an import validates everything within its limits before it writes anything.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ralph.memory import archive as archive_reader
from ralph.memory import transfer
from ralph.memory.store import MemoryStore

from ..conftest import EXAMPLE_LOOP, REPO, RunCli

DEADLINE = 60.0  # seconds a test waits before it unblocks what would hang without the fix


def example_record(project: Path, iteration: int = 1) -> dict[str, Any]:
    path = project / ".aiwg/ralph/reflections" / EXAMPLE_LOOP / f"{iteration:03d}.json"
    data: dict[str, Any] = json.loads(path.read_text("utf-8"))
    return data


def put(project: Path, data: dict[str, Any], name: str | None = None) -> Path:
    folder = project / ".aiwg/ralph/reflections" / data["loop_id"].strip()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (name or f"{data['iteration']:03d}.json")
    path.write_text(json.dumps(data), "utf-8")
    return path


def extreme(project: Path) -> dict[str, Any]:
    """What the review wrote: garbage time, a phase of 1e18 ms, iteration 10**9."""
    data = example_record(project)
    data.update(iteration=10**9, timestamp="garbage")
    data["ralph"]["duration_ms"]["actor"] = 10**18
    put(project, data)
    return data


def run_limited(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m ralph ARGS` with 1.5 GB of address space: what allocates by a record's
    number dies at once instead of taking the machine."""
    code = (
        "import resource, runpy, sys; "
        "resource.setrlimit(resource.RLIMIT_AS, (1536 << 20, 1536 << 20)); "
        "sys.argv = ['ralph', *sys.argv[1:]]; runpy.run_module('ralph', run_name='__main__')"
    )
    return subprocess.run(
        [sys.executable, "-c", code, *args], cwd=project, capture_output=True, text=True
    )


def test_extreme_values_are_unknown_to_analyze_in_bounded_memory(example_project: Path) -> None:
    """Iteration 10**9 made success@k a dict of 10**9 entries (4 GB, then MemoryError)."""
    extreme(example_project)
    checked = run_limited(example_project, "reflections", "validate")
    assert checked.returncode == 0, checked.stdout + checked.stderr  # the schema accepts them
    done = run_limited(example_project, "analyze", "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert 0 < len(out["summary"]["success_at_k"]) <= 100
    (loop,) = out["loops"]
    assert loop["last_iteration"] == 10**9
    assert loop["wall_seconds"] < 366 * 24 * 3600  # the 1e18 ms phase is unknown, not summed
    shown = run_limited(example_project, "analyze", EXAMPLE_LOOP)
    assert shown.returncode == 0, shown.stderr  # the curve's axis cut the 10-digit label short


@pytest.mark.parametrize(
    ("timestamp", "actor_ms"),
    [
        ("garbage", 5),
        ("2026-11-20T09:14:03Z", 10**18),
        ("0001-01-01T00:00:00+14:00", 1),
    ],
)
def test_prov_export_leaves_times_it_cannot_tell_out(
    example_project: Path, ralph: RunCli, timestamp: str, actor_ms: int
) -> None:
    """`export --prov` died on a time that does not parse or a duration before year 1."""
    data = example_record(example_project)
    data.update(iteration=10**9, timestamp=timestamp)
    data["ralph"]["duration_ms"]["actor"] = actor_ms
    put(example_project, data)
    result = ralph("reflections", "export", "--prov", cwd=example_project)
    assert result.code == 0, result.err
    activities = json.loads(result.out)["activity"]
    act = activities[f"ralph:{EXAMPLE_LOOP}/{10**9}/act"]
    assert "prov:startTime" not in act  # unknown, not invented
    assert activities[f"ralph:{EXAMPLE_LOOP}/1/act"]["prov:startTime"]  # the others keep theirs


@pytest.fixture
def unblock() -> Iterator[list[Path]]:
    """FIFOs the test makes: after the deadline, opened for writing and closed, so a reader
    stuck on one (the bug) gets an empty file and the test fails instead of hanging."""
    fifos: list[Path] = []
    stop = threading.Event()

    def release() -> None:
        if stop.wait(DEADLINE):
            return
        for fifo in fifos:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK) if _has_reader(fifo) else None
            if fd is not None:
                os.close(fd)

    thread = threading.Thread(target=release, daemon=True)
    thread.start()
    yield fifos
    stop.set()
    thread.join()


def _has_reader(fifo: Path) -> bool:
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:  # ENXIO: nobody reads it
        return False
    return True


def test_a_fifo_named_like_a_record_is_reported_never_waited_on(
    example_project: Path, ralph: RunCli, tmp_path: Path, unblock: list[Path]
) -> None:
    folder = example_project / ".aiwg/ralph/reflections" / EXAMPLE_LOOP
    fifo = folder / "004.json"
    os.mkfifo(fifo)
    unblock.append(fifo)
    problems = MemoryStore(example_project).read_records(EXAMPLE_LOOP)[-1].problems
    assert problems == ["not a regular file"]
    result = ralph("analyze", "--json", cwd=example_project)
    assert result.code == 0, result.err
    shown = str(fifo.relative_to(example_project))
    assert json.loads(result.out)["invalid_files"] == [
        {"path": shown, "reason": "not a regular file"}
    ]
    result = ralph("reflections", "search", "date", cwd=example_project)
    assert result.code == 0, result.err  # the search index skips it as unreadable
    for args in (("show", EXAMPLE_LOOP, "4", "--json"), ("export", "--zip", "out.zip")):
        result = ralph("reflections", *args, cwd=example_project)
        assert result.code == 2 and "not a regular file" in result.err, args
    target = tmp_path / "target"
    target.mkdir()
    result = ralph("reflections", "import", str(folder), "--json", cwd=target)
    assert result.code == 1, result.err  # some records were invalid
    report = json.loads(result.out)
    assert len(report["added"]) == 3
    assert report["invalid"] == [{"from": str(fifo), "reason": "not a regular file"}]
    result = ralph("reflections", "import", str(fifo), cwd=target)  # given by name
    assert result.code == 2 and "not a regular file" in result.err


def test_a_record_too_large_is_refused_before_it_is_read_whole(example_project: Path) -> None:
    data = example_record(example_project, 3)
    data["notes"] = "x" * 6_000_000
    put(example_project, data)
    (problem,) = MemoryStore(example_project).read_records(EXAMPLE_LOOP)[-1].problems
    assert problem == "larger than 5000000 bytes"


def memory_of(project: Path) -> dict[str, bytes]:
    base = project / ".aiwg" / "ralph"
    if not base.exists():
        return {}
    return {
        str(p.relative_to(base)): p.read_bytes()
        for p in sorted(base.rglob("*"))
        if p.is_file() and ".sqlite" not in p.name
    }


@pytest.mark.parametrize(
    "spoil",
    [
        pytest.param(lambda d: d.update(task_description="bad \ud800 text"), id="lone-surrogate"),
        pytest.param(lambda d: d.update(loop_id=d["loop_id"] + "\n"), id="loop-id-newline"),
    ],
)
def test_a_record_that_cannot_be_written_is_invalid_and_the_rest_imported(
    example_project: Path, ralph: RunCli, tmp_path: Path, spoil: Any
) -> None:
    """Such a record passed validation and failed at its write, half way through the import
    (the records before it written, those after it not)."""
    source = tmp_path / "artifact"  # records side by side, not in their loop's folder
    source.mkdir()
    for n in (1, 2, 3):
        data = example_record(example_project, n)
        if n == 2:
            spoil(data)
        (source / f"{n:03d}.json").write_text(json.dumps(data), "utf-8")
    target = tmp_path / "target"
    target.mkdir()
    result = ralph("reflections", "import", str(source), "--json", cwd=target)
    assert result.code == 1, result.err  # some records were invalid
    report = json.loads(result.out)
    assert [a["iteration"] for a in report["added"]] == [1, 3]
    (invalid,) = report["invalid"]
    assert invalid["from"].endswith("002.json")
    assert sorted(memory_of(target)) == [
        ".gitignore",
        "loops/imported.json",  # where each imported record came from (memory/transfer.py)
        f"reflections/{EXAMPLE_LOOP}/001.json",
        f"reflections/{EXAMPLE_LOOP}/003.json",
    ]
    checked = ralph("reflections", "validate", str(source / "002.json"), cwd=target)
    assert checked.code == 1, checked.out  # validate says what import will say


def bomb(path: Path, records: int, size: int) -> Path:
    """`records` valid records of `size` bytes each, deflated to almost nothing."""
    template = json.loads(
        (REPO / ".aiwg/ralph/reflections" / EXAMPLE_LOOP / "001.json").read_text("utf-8")
    )
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for n in range(1, records + 1):
            record = {**template, "loop_id": "ralph-bomb-00000000", "iteration": n, "notes": ""}
            text = json.dumps(record)
            text = text.replace('"notes": ""', '"notes": "' + "a" * (size - len(text)) + '"')
            archive.writestr(f"ralph-bomb-00000000/{n:03d}.json", text)
    return path


def test_an_archive_beyond_the_limits_is_refused_before_it_is_inflated(
    ralph: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """300 records of 4.9 MB in a 2 MB zip took 2.9 GB of memory and wrote 1.4 GB. The limits
    are lowered here so the test is small; what they bound is the same."""
    monkeypatch.setattr(archive_reader, "MAX_IMPORT_BYTES", 1_000_000)
    archive = bomb(tmp_path / "bomb.zip", 30, 49_000)
    assert archive.stat().st_size < 100_000
    read: list[str] = []
    real = zipfile.ZipFile.open

    def spy(self: zipfile.ZipFile, name: Any, *args: Any, **kwargs: Any) -> Any:
        read.append(str(name))
        return real(self, name, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "open", spy)
    target = tmp_path / "target"
    target.mkdir()
    result = ralph("reflections", "import", str(archive), cwd=target)
    assert result.code == 2
    assert "more than 1 MB of records in one import; nothing was imported" in result.err
    assert read == []  # refused by what the archive declares, nothing inflated
    assert memory_of(target) == {}
    monkeypatch.setattr(archive_reader, "MAX_IMPORT_BYTES", 2_000_000)  # the same within the limit
    result = ralph("reflections", "import", str(archive), cwd=target)
    assert result.code == 0, result.out + result.err
    assert "added 30 records of 1 loop" in result.out


def test_an_import_that_fails_while_writing_leaves_the_memory_as_it_was(
    example_project: Path, ralph: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "target"
    (target / ".aiwg/ralph").mkdir(parents=True)
    before = memory_of(target)
    real = transfer.atomic_write_json
    calls: list[Path] = []

    def disk_full(path: Path, data: Any, **kwargs: Any) -> None:
        calls.append(path)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        real(path, data, **kwargs)

    monkeypatch.setattr(transfer, "atomic_write_json", disk_full)
    source = example_project / ".aiwg/ralph/reflections"
    result = ralph("reflections", "import", str(source), cwd=target)
    assert result.code == 2
    assert "No space left on device; nothing was imported" in result.err
    assert len(calls) == 3
    assert memory_of(target) == before | {".gitignore": memory_of(target)[".gitignore"]}
    assert not (target / ".aiwg/ralph/reflections" / EXAMPLE_LOOP).exists()
