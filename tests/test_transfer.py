"""`ralph reflections export` / `import`: memory that travels as files, merged idempotently."""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import zipfile
from pathlib import Path

import pytest

from ralph.memory.retrieval import retrieve_lessons
from ralph.memory.store import MemoryStore
from ralph.records import Diagnostic

from .conftest import EXAMPLE_LOOP, REPO, RunCli
from .fakes.calc_project import git, make_calc_repo


def snapshot(root: Path) -> dict[str, tuple[int, bytes]]:
    """Every file under `.aiwg/ralph` (the local indexes aside) with its mtime and bytes."""
    base = root / ".aiwg" / "ralph"
    return {
        str(p.relative_to(base)): (p.stat().st_mtime_ns, p.read_bytes())
        for p in sorted(base.rglob("*"))
        if p.is_file() and ".sqlite" not in p.name
    }


@pytest.fixture
def exported(example_project: Path, tmp_path: Path, ralph: RunCli) -> Path:
    """The example loop exported from a project into a .zip."""
    archive = tmp_path / "memory.zip"
    result = ralph(
        "reflections", "export", EXAMPLE_LOOP, "--zip", str(archive), cwd=example_project
    )
    assert result.code == 0, result.err
    return archive


@pytest.fixture
def here(tmp_path: Path) -> Path:
    project = tmp_path / "here"
    project.mkdir()
    return project


def test_export_zip_holds_the_records_byte_for_byte(exported: Path) -> None:
    with zipfile.ZipFile(exported) as archive:
        names = archive.namelist()
        assert names == [f"{EXAMPLE_LOOP}/{n:03d}.json" for n in (1, 2, 3)]
        source = REPO / ".aiwg" / "ralph" / "reflections" / EXAMPLE_LOOP
        for name in names:
            assert archive.read(name) == (source / Path(name).name).read_bytes()


def test_import_a_zip_then_again_changes_nothing(exported: Path, here: Path, ralph: RunCli) -> None:
    dry = ralph("reflections", "import", str(exported), "--dry-run", "--json", cwd=here)
    assert dry.code == 0, dry.err
    assert len(json.loads(dry.out)["added"]) == 3
    assert not (here / ".aiwg").exists()  # a dry run writes nothing
    first = ralph("reflections", "import", str(exported), cwd=here)
    assert first.code == 0, first.err
    assert "added 3 records of 1 loop" in first.out
    before = snapshot(here)
    again = ralph("reflections", "import", str(exported), "--json", cwd=here)
    assert again.code == 0, again.err
    report = json.loads(again.out)
    assert report["added"] == [] and report["unchanged"] == 3 and report["conflicts"] == []
    assert snapshot(here) == before


def test_imported_loop_without_state_is_listed_analysed_searched_and_taught(
    exported: Path, here: Path, ralph: RunCli
) -> None:
    assert ralph("reflections", "import", str(exported), cwd=here).code == 0
    store = MemoryStore(here)
    assert not store.state_path(EXAMPLE_LOOP).exists()
    listed = json.loads(ralph("reflections", "list", "--json", cwd=here).out)
    assert listed == [
        {
            "loop_id": EXAMPLE_LOOP,
            "task": "fix the failing date parser tests",
            "status": "completed",
            "iterations": 3,
            "best_reward": 1.0,
            "updated_at": listed[0]["updated_at"],
            "problem": None,
        }
    ]
    analysis = json.loads(ralph("analyze", "--json", cwd=here).out)
    assert analysis["summary"]["loops"] == 1 and analysis["summary"]["green_loops"] == 1
    assert analysis["loops"][0]["status"] == "completed"
    assert analysis["loops"][0]["iterations_to_green"] == 3
    done = json.loads(ralph("analyze", "--status", "completed", "--json", cwd=here).out)
    assert done["summary"]["loops"] == 1
    hits = json.loads(ralph("reflections", "search", "slash date", "--json", cwd=here).out)
    assert hits and hits[0]["loop_id"] == EXAMPLE_LOOP
    record = json.loads(store.record_path(EXAMPLE_LOOP, 1).read_text())
    failures = [Diagnostic(**e) for e in record["evaluator_output"]["errors"]]
    lessons = retrieve_lessons(store, exclude_loop="ralph-another-loop-1", current_errors=failures)
    assert lessons and lessons[0].source == f"{EXAMPLE_LOOP}#1, imported from memory.zip"


def test_import_from_a_folder_and_another_repository(
    example_project: Path, here: Path, tmp_path: Path, ralph: RunCli
) -> None:
    folder = tmp_path / "artifact"
    assert ralph("reflections", "export", "--dir", str(folder), cwd=example_project).code == 0
    assert sorted(p.name for p in (folder / EXAMPLE_LOOP).iterdir()) == [
        "001.json",
        "002.json",
        "003.json",
    ]
    # the artifact folder, and the other repository itself (its .aiwg/ralph is found)
    result = ralph("reflections", "import", str(folder), str(example_project), "--json", cwd=here)
    assert result.code == 0, result.err
    report = json.loads(result.out)
    assert len(report["added"]) == 3 and report["unchanged"] == 3  # the second source: the same


def test_a_different_record_under_the_same_id_is_kept_apart(
    example_project: Path, exported: Path, ralph: RunCli
) -> None:
    store = MemoryStore(example_project)
    path = store.record_path(EXAMPLE_LOOP, 2)
    data = json.loads(path.read_text())
    data["self_reflection"]["reflection_text"] = "another machine thought otherwise"
    other = example_project.parent / "other" / EXAMPLE_LOOP / "002.json"
    other.parent.mkdir(parents=True)
    other.write_text(json.dumps(data))
    mine = path.read_bytes()
    result = ralph("reflections", "import", str(other.parent.parent), cwd=example_project)
    assert result.code == 1
    assert f"conflict: {EXAMPLE_LOOP}#2" in result.out and "kept apart at" in result.out
    assert path.read_bytes() == mine  # never overwritten
    kept = list((store.base / "conflicts" / EXAMPLE_LOOP).glob("002-*.json"))
    assert len(kept) == 1
    assert json.loads(kept[0].read_text())["self_reflection"]["reflection_text"] == (
        "another machine thought otherwise"
    )
    before = snapshot(example_project)
    again = ralph("reflections", "import", str(other.parent.parent), cwd=example_project)
    assert "already kept apart" in again.out
    assert snapshot(example_project) == before
    # the example loop's own records, re-imported: identical, nothing to do
    same = ralph("reflections", "import", str(exported), "--json", cwd=example_project)
    assert same.code == 0 and json.loads(same.out)["unchanged"] == 3


def test_an_obsolete_mark_here_is_not_a_conflict(
    example_project: Path, exported: Path, ralph: RunCli
) -> None:
    assert ralph("reflections", "obsolete", EXAMPLE_LOOP, "1", cwd=example_project).code == 0
    result = ralph("reflections", "import", str(exported), "--json", cwd=example_project)
    assert result.code == 0, result.out
    assert json.loads(result.out)["unchanged"] == 3


def test_invalid_records_are_reported_and_skipped(
    here: Path, tmp_path: Path, ralph: RunCli
) -> None:
    source = tmp_path / "artifact" / EXAMPLE_LOOP
    shutil.copytree(REPO / ".aiwg" / "ralph" / "reflections" / EXAMPLE_LOOP, source)
    (source / "002.json").write_text("{not json")
    data = json.loads((source / "003.json").read_text())
    del data["evaluator_output"]
    (source / "003.json").write_text(json.dumps(data))
    (source / "004.json").write_text((source / "001.json").read_text())  # iteration 1 in 004
    result = ralph("reflections", "import", str(source.parent), "--json", cwd=here)
    assert result.code == 1
    report = json.loads(result.out)
    assert [(a["loop_id"], a["iteration"]) for a in report["added"]] == [(EXAMPLE_LOOP, 1)]
    reasons = {Path(i["from"]).name: i["reason"] for i in report["invalid"]}
    assert set(reasons) == {"002.json", "003.json", "004.json"}
    assert "not JSON" in reasons["002.json"] and "evaluator_output" in reasons["003.json"]
    assert "file named 004.json" in reasons["004.json"]
    assert sorted(p.name for p in MemoryStore(here).reflections_dir(EXAMPLE_LOOP).iterdir()) == [
        "001.json"
    ]


def _zip_with(path: Path, name: str, *, symlink: bool = False) -> Path:
    good = (REPO / ".aiwg" / "ralph" / "reflections" / EXAMPLE_LOOP / "001.json").read_bytes()
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{EXAMPLE_LOOP}/001.json", good)
        info = zipfile.ZipInfo(name)
        if symlink:
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, "/etc/passwd")
        else:
            archive.writestr(info, good)
    return path


@pytest.mark.parametrize(
    ("member", "symlink", "why"),
    [
        ("../../evil/001.json", False, "outside the archive"),
        ("/tmp/evil/001.json", False, "absolute path"),
        ("C:/evil/001.json", False, "absolute path"),
        ("a\\..\\..\\001.json", False, "outside the archive"),
        (f"{EXAMPLE_LOOP}/002.json", True, "symlink"),
    ],
)
def test_an_archive_reaching_outside_its_root_is_refused(
    here: Path, tmp_path: Path, ralph: RunCli, member: str, symlink: bool, why: str
) -> None:
    archive = _zip_with(tmp_path / "bad.zip", member, symlink=symlink)
    good = tmp_path / "good"
    shutil.copytree(REPO / ".aiwg" / "ralph" / "reflections", good)
    result = ralph("reflections", "import", str(good), str(archive), cwd=here)
    assert result.code == 2
    assert why in result.err and "nothing was imported" in result.err
    assert len(result.err.strip().splitlines()) <= 2  # one line and a hint, no traceback
    assert not (here / ".aiwg").exists()  # not even the good source before it


def test_a_folder_with_a_symlink_is_refused(here: Path, tmp_path: Path, ralph: RunCli) -> None:
    source = tmp_path / "artifact"
    shutil.copytree(REPO / ".aiwg" / "ralph" / "reflections", source)
    os.symlink("/etc", source / "elsewhere")
    result = ralph("reflections", "import", str(source), cwd=here)
    assert result.code == 2 and "symlink" in result.err
    assert not (here / ".aiwg").exists()


def test_bad_sources_are_one_line_errors(here: Path, tmp_path: Path, ralph: RunCli) -> None:
    missing = ralph("reflections", "import", str(tmp_path / "nope"), cwd=here)
    assert missing.code == 2 and "no such file" in missing.err
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    other = ralph("reflections", "import", str(text), cwd=here)
    assert other.code == 2 and "not a folder, a .zip" in other.err
    broken = tmp_path / "broken.zip"
    broken.write_bytes(b"PK\x03\x04" + b"\0" * 10)
    assert ralph("reflections", "import", str(broken), cwd=here).code == 2
    no_dest = ralph("reflections", "export", EXAMPLE_LOOP, cwd=REPO)
    assert no_dest.code == 2 and "--zip FILE or --dir DIR" in no_dest.err
    unknown = ralph("reflections", "export", "ralph-nope-1", "--dir", str(tmp_path), cwd=REPO)
    assert unknown.code == 2 and "unknown loop 'ralph-nope-1'" in unknown.err


def test_memories_of_two_clones_merge_into_a_third(
    tmp_path: Path, ralph: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two machines each run a loop; a third imports both memories (an archive and a clone)."""
    calc = "def add(a, b):\n    return a - b  # add\n\n\ndef sub(a, b):\n    return a + b  # sub\n"
    origin = make_calc_repo(tmp_path / "origin", calc=calc, tests="", monkeypatch=monkeypatch)
    clones = {}
    for name in ("one", "two", "three"):
        git(tmp_path, "clone", "-q", str(origin), name)
        clones[name] = tmp_path / name
    agent = f"cmd:{sys.executable} {Path(__file__).parent / 'fakes' / 'edit_agent.py'}"
    ids = {}
    for name, fix, expr in (
        ("one", "a - b  # add => a + b  # add", "calc.add(2, 3) == 5"),
        ("two", "a + b  # sub => a - b  # sub", "calc.sub(5, 3) == 2"),
    ):
        test = f'{sys.executable} -c "import calc, sys; sys.exit(not ({expr}))"'
        task = f"fix {name}. FAKE-EDIT: calc.py :: {fix}"
        run = ralph("run", task, "--actor", agent, "--test", test, "--json", cwd=clones[name])
        assert run.code == 0, run.err
        ids[name] = json.loads(run.out)["loop_id"]
    archive = tmp_path / "one.zip"
    assert ralph("reflections", "export", "--zip", str(archive), cwd=clones["one"]).code == 0
    third = clones["three"]
    merged = ralph("reflections", "import", str(archive), str(clones["two"]), cwd=third)
    assert merged.code == 0, merged.err
    analysis = json.loads(ralph("analyze", "--json", cwd=third).out)
    assert analysis["summary"]["loops"] == 2 and analysis["summary"]["green_loops"] == 2
    assert sorted(loop["loop_id"] for loop in analysis["loops"]) == sorted(ids.values())
    before = snapshot(third)
    again = ralph("reflections", "import", str(archive), str(clones["two"]), "--json", cwd=third)
    assert again.code == 0 and json.loads(again.out)["added"] == []
    assert snapshot(third) == before
    assert git(third, "status", "--porcelain") == "?? .aiwg/"  # only memory, no code changed
