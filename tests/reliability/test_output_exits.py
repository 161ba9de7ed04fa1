"""What leaves ralph passes one exit: no secret and no terminal control sequence from a record
written elsewhere (or a trace) reaches the screen, stdout or an export; and importing such a
record twice changes nothing the second time."""

from __future__ import annotations

import csv
import io
import json
import shutil
import zipfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ralph import schemas
from ralph.memory.store import MemoryStore

from ..conftest import EXAMPLE_LOOP, RunCli

SK = "sk-" + "Zx8Yw7Vu6" * 3
GHP = "ghp_" + "Qw3Er5Ty7" * 4
TITLE, CLEAR = "\x1b]0;owned\x07", "\x1b[2J"
CSI8 = "\x9b2J"  # the 8-bit form of CLEAR
TAINTED = "ralph-tainted-1234abcd"


def tainted_record(source: Path, iteration: int) -> dict[str, object]:
    data = json.loads(source.read_text())
    data["loop_id"] = TAINTED
    data["task_description"] = f"fix the parser {TITLE}{CLEAR}with {GHP}"
    sr = data["self_reflection"]
    sr["reflection_text"] = f"parser broke; key {SK} {CLEAR}{CSI8}see the date format"
    sr["lessons_learned"] = [f"never print {GHP}{TITLE}"]
    return data


@pytest.fixture
def project(example_project: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The example memory plus a loop known only from records written elsewhere: its task and
    reflection hold tokens and escape sequences (written raw, as another tool would)."""
    reflections = example_project / ".aiwg/ralph/reflections"
    target = reflections / TAINTED
    target.mkdir()
    for source in sorted((reflections / EXAMPLE_LOOP).glob("*.json")):
        data = tainted_record(source, int(source.stem))
        assert schemas.errors(schemas.RECORD, data) == []
        (target / source.name).write_text(json.dumps(data, indent=2, ensure_ascii=False))
    monkeypatch.setenv("CI", "true")
    return example_project


def assert_clean(text: str) -> None:
    for bad in (SK, GHP, GHP.lower(), "\x1b", "\x07", "\x9b"):
        assert bad not in text, (bad, text[:2000])


READERS = [
    ("reflections", "list", "--json"),
    ("reflections", "list"),
    ("reflections", "list", "--loop", TAINTED, "--json"),
    ("reflections", "list", "--loop", TAINTED),
    ("reflections", "show", TAINTED, "1", "--json"),
    ("reflections", "show", TAINTED, "1"),
    ("reflections", "search", "parser date", "--json"),
    ("reflections", "search", "parser date"),
    ("analyze", "--json"),
    ("analyze", "--csv"),
    ("analyze", TAINTED),
    ("reflections", "export", TAINTED, "--prov"),
    ("reflections", "export", TAINTED, "--prov", "--format", "jsonld"),
]


@pytest.mark.parametrize("argv", READERS, ids=[" ".join(a) for a in READERS])
def test_readers_show_no_secret_and_no_escape_of_a_record(
    ralph: RunCli, project: Path, argv: tuple[str, ...]
) -> None:
    result = ralph(*argv, cwd=project)
    assert result.code == 0, result.err
    assert_clean(result.out)
    assert_clean(result.err)
    if "--json" in argv or "--prov" in argv:
        json.loads(result.out)  # still one JSON document
    if "--csv" in argv:  # a row per iteration (and the example loop's baseline), whole
        head, *rows = csv.reader(io.StringIO(result.out))
        assert len(rows) == 7 and {len(row) for row in rows} == {len(head)}


def test_on_a_terminal_the_screen_keeps_its_colours_but_no_outside_escape(
    ralph: RunCli, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CI")
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich treats stdout as a terminal
    for argv in (("reflections", "show", TAINTED, "1"), ("reflections", "list")):
        out = ralph(*argv, cwd=project).out
        assert "\x1b[" in out  # rich's own styles
        assert "\x1b]" not in out and CLEAR not in out and "\x9b" not in out
        assert SK not in out and GHP not in out


def test_exports_hold_no_secret_and_copy_clean_records_as_they_are(
    ralph: RunCli, project: Path, tmp_path: Path
) -> None:
    archive, folder = tmp_path / "out.zip", tmp_path / "out"
    assert ralph("reflections", "export", "--zip", str(archive), cwd=project).code == 0
    assert ralph("reflections", "export", "--dir", str(folder), cwd=project).code == 0
    prov = tmp_path / "prov.json"
    assert ralph("reflections", "export", "--prov", "-o", str(prov), cwd=project).code == 0
    assert_clean_json(prov.read_bytes())
    with zipfile.ZipFile(archive) as zipped:
        members = {name: zipped.read(name) for name in zipped.namelist()}
    folders = {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*.json")}
    assert members == folders and len(members) == 6
    for name, raw in members.items():
        data = assert_clean_json(raw)
        assert schemas.errors(schemas.RECORD, data) == []  # still a record another memory takes
        if name.startswith(EXAMPLE_LOOP):  # nothing to redact: the bytes as they are
            assert raw == (project / ".aiwg/ralph/reflections" / name).read_bytes()
    tainted = json.loads(members[f"{TAINTED}/001.json"])
    assert tainted["task_description"].endswith("with [REDACTED]")


def assert_clean_json(raw: bytes) -> object:
    text = raw.decode("utf-8")
    assert SK not in text and GHP not in text
    return json.loads(text)


def test_trace_shows_an_agents_stream_without_its_escapes(
    ralph: RunCli, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MemoryStore(project)
    folder = store.artifacts_dir(EXAMPLE_LOOP, 1)
    folder.mkdir(parents=True, exist_ok=True)
    steps = [
        {"meta": {"source": "claude", "steps": 2, "dropped": 0, "unparsed": 0}},
        {"step": 1, "thought": f"look{TITLE}{CLEAR}", "tool": "Bash", "target": f"ls{CLEAR}"},
        {"step": 2, "tool": "Read", "target": "a.py", "observation": f"{TITLE}out {SK}\nmore"},
    ]
    (folder / "trace.jsonl").write_text("\n".join(json.dumps(s) for s in steps) + "\n")
    plain = ralph("trace", EXAMPLE_LOOP, "1", cwd=project)
    assert plain.code == 0, plain.err
    assert_clean(plain.out)
    assert "look" in plain.out and "Bash: ls" in plain.out
    monkeypatch.setenv("FORCE_COLOR", "1")  # the table a terminal gets
    table = ralph("trace", EXAMPLE_LOOP, "1", cwd=project).out
    assert "\x1b[" in table and "look" in table
    assert "\x1b]" not in table and CLEAR not in table and SK not in table
    monkeypatch.delenv("FORCE_COLOR")
    as_json = ralph("trace", EXAMPLE_LOOP, "1", "--json", cwd=project)
    assert_clean(as_json.out)
    assert json.loads(as_json.out)["steps"][0]["thought"].startswith("look\x1b]0;")  # data kept


def test_importing_a_record_that_import_redacts_twice_changes_nothing_the_second_time(
    ralph: RunCli, project: Path, tmp_path: Path
) -> None:
    archive = tmp_path / "from-ci.zip"
    with zipfile.ZipFile(archive, "w") as zipped:  # another machine's records, as they are
        for path in sorted((project / ".aiwg/ralph/reflections" / TAINTED).glob("*.json")):
            zipped.write(path, f"{TAINTED}/{path.name}")
    here = tmp_path / "here"
    (here / ".aiwg/ralph").mkdir(parents=True)
    first = ralph("reflections", "import", str(archive), "--json", cwd=here)
    assert first.code == 0, first.err
    assert len(json.loads(first.out)["added"]) == 3
    for _ in range(2):
        again = ralph("reflections", "import", str(archive), "--json", cwd=here)
        assert again.code == 0, again.out
        report = json.loads(again.out)
        assert (report["added"], report["conflicts"], report["unchanged"]) == ([], [], 3)
    assert not (here / ".aiwg/ralph/conflicts").exists()
    written = (here / ".aiwg/ralph/reflections" / TAINTED / "001.json").read_text()
    assert SK not in written and GHP not in written


def test_a_record_that_really_differs_is_still_a_conflict(
    ralph: RunCli, project: Path, tmp_path: Path
) -> None:
    source = project / ".aiwg/ralph/reflections" / TAINTED / "001.json"
    data = json.loads(source.read_text())
    data["self_reflection"]["reflection_text"] += " and something else"
    other = tmp_path / "other" / TAINTED
    other.mkdir(parents=True)
    (other / "001.json").write_text(json.dumps(data))
    shutil.rmtree(project / ".aiwg/ralph/reflections" / EXAMPLE_LOOP)
    assert ralph("reflections", "import", str(source.parent), cwd=project).code == 0
    result = ralph("reflections", "import", str(other.parent), "--json", cwd=project)
    assert result.code == 1 and len(json.loads(result.out)["conflicts"]) == 1


def test_stdout_is_written_only_through_the_one_exit() -> None:
    """A new command cannot forget the rules: only cli/common.py (console, print_json,
    text_out) touches stdout (entry.py flushes it at exit); the rest of ralph returns values."""
    package = Path(__file__).resolve().parents[2] / "ralph"
    allowed = {"cli/common.py", "cli/entry.py"}
    writers = [
        f"{path.relative_to(package)}:{number}"
        for path in sorted(package.rglob("*.py"))
        if str(path.relative_to(package)) not in allowed
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "sys.stdout" in line or "sys.__stdout__" in line
    ]
    assert writers == []


PIECES = [
    SK,
    GHP,
    "AKIA" + "ZXCVBNMASDFGHJKL",
    "aws_secret_access_key",
    "=",
    ": ",
    '"',
    "'",
    "\t",
    "\n",
    "Bearer",
    "bearer ",
    "x" * 40,
    "ab/+=" * 8,
    "-----BEGIN RSA PRIVATE KEY-----",
    "-----END RSA PRIVATE KEY-----",
    'hunter2"Quote99',
    "plain words",
    "\\",
    "é",
    "\x9b",
]


@given(st.lists(st.lists(st.sampled_from(PIECES), max_size=8).map("".join), max_size=4))
@settings(max_examples=400, deadline=None)
def test_the_documents_scan_never_misses_what_redaction_would_change(parts: list[str]) -> None:
    """print_json redacts only when one scan of the dumped document says it may matter: the
    scan must never say no when redacting the data would change it."""
    import os

    from ralph.redact import may_change_json, redact_data

    environ = {**os.environ, "MY_SERVICE_TOKEN": 'hunter2"Quote99'}
    data = {"items": parts, parts[0] if parts else "k": {"n": 1}}
    text = json.dumps(data, indent=2, ensure_ascii=False)
    if redact_data(data, environ) != data:
        assert may_change_json(text, environ)


def test_an_error_that_quotes_outside_text_is_one_clean_line(ralph: RunCli, tmp_path: Path) -> None:
    """An error message may quote what it could not read: no token, no escape on stderr."""
    (tmp_path / ".aiwg/ralph").mkdir(parents=True)
    archive = tmp_path / f"x{TITLE}{CLEAR}{GHP}.txt"
    archive.write_text("not a record")
    result = ralph("reflections", "import", str(archive), cwd=tmp_path)
    assert result.code == 2 and result.err.startswith("ralph: error: ")
    assert_clean(result.err)
