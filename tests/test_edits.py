"""edits.py: search/replace blocks are parsed leniently and applied strictly inside the repo."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ralph.actors.edits import (
    EditBlock,
    UnsafePath,
    apply_edit_blocks,
    apply_edits,
    check_path,
    parse_edit_blocks,
)


def block(path: str, search: str, replace: str, fence: str = "```python") -> str:
    lines = [path]
    if fence:
        lines.append(fence)
    lines += ["<<<<<<< SEARCH", *search.splitlines(), "=======", *replace.splitlines()]
    lines.append(">>>>>>> REPLACE")
    if fence:
        lines.append("```")
    return "\n".join(lines) + "\n"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("def f():\n    return 1\n\n\ndef g():\n    return 2\n")
    return root


def read(root: Path, rel: str) -> str:
    return (root / rel).read_text()


# --------------------------------------------------------------------------- parsing


def test_parse_reads_several_files_and_several_blocks_per_file() -> None:
    answer = (
        "I fix both functions and add a test.\n\n"
        + block("src/app.py", "    return 1", "    return 10")
        + "\nAnd the second one:\n\n"
        + block("src/app.py", "    return 2", "    return 20", fence="")
        + block("tests/test_app.py", "", "def test_f():\n    assert True")
    )
    blocks, errors = parse_edit_blocks(answer)
    assert errors == []
    assert [(b.path, b.search, b.replace) for b in blocks] == [
        ("src/app.py", "    return 1\n", "    return 10\n"),
        ("src/app.py", "    return 2\n", "    return 20\n"),
        ("tests/test_app.py", "", "def test_f():\n    assert True\n"),
    ]


def test_parse_accepts_decorated_path_lines_and_a_fence_before_the_path() -> None:
    answer = "**src/a.py**:\n```python\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n```\n"
    answer += "```\n`src/b.py`\n<<<<<<< SEARCH\n=======\nz\n>>>>>>> REPLACE\n```\n"
    blocks, errors = parse_edit_blocks(answer)
    assert errors == []
    assert [b.path for b in blocks] == ["src/a.py", "src/b.py"]


def test_parse_reuses_the_previous_path_for_a_block_without_one() -> None:
    answer = (
        block("src/app.py", "a", "b", fence="")
        + "\n<<<<<<< SEARCH\nc\n=======\nd\n>>>>>>> REPLACE\n"
    )
    blocks, _ = parse_edit_blocks(answer)
    assert [(b.path, b.search) for b in blocks] == [("src/app.py", "a\n"), ("src/app.py", "c\n")]


def test_parse_reports_an_unterminated_block() -> None:
    blocks, errors = parse_edit_blocks("src/app.py\n<<<<<<< SEARCH\nold\n=======\nnew\n")
    assert blocks == []
    assert len(errors) == 1
    assert "REPLACE" in errors[0].reason
    assert errors[0].search_first_line == "old"


# --------------------------------------------------------------------------- applying


def test_multi_block_edit_applies_every_block_of_a_file(repo: Path) -> None:
    answer = block("src/app.py", "    return 1", "    return 10")
    answer += block("src/app.py", "def g():\n    return 2", "def g():\n    return 20")
    report = apply_edits(answer, repo)
    assert report.ok
    assert report.applied == ["src/app.py"]
    assert read(repo, "src/app.py") == "def f():\n    return 10\n\n\ndef g():\n    return 20\n"


def test_one_failing_block_leaves_the_whole_file_untouched(repo: Path) -> None:
    before = read(repo, "src/app.py")
    answer = block("src/app.py", "    return 1", "    return 10")
    answer += block("src/app.py", "    return 3", "    return 30")
    report = apply_edits(answer, repo)
    assert read(repo, "src/app.py") == before
    assert report.applied == []
    reasons = {f.search_first_line.strip(): f.reason for f in report.failures}
    assert reasons["return 3"] == "SEARCH text not found in the file"
    assert "another block" in reasons["return 1"]
    assert any("return 3" in line for line in report.unmatched())


def test_failure_in_one_file_does_not_stop_another(repo: Path) -> None:
    (repo / "other.py").write_text("x = 1\n")
    answer = block("src/app.py", "nope", "yes") + block("other.py", "x = 1", "x = 2")
    report = apply_edits(answer, repo)
    assert report.applied == ["other.py"]
    assert read(repo, "other.py") == "x = 2\n"
    assert [f.path for f in report.failures] == ["src/app.py"]


def test_trailing_whitespace_differences_still_match(repo: Path) -> None:
    (repo / "src" / "app.py").write_text("def f():   \n    return 1\t\n")
    report = apply_edits(
        block("src/app.py", "def f():\n    return 1", "def f():\n    return 2"), repo
    )
    assert report.ok
    assert read(repo, "src/app.py") == "def f():\n    return 2\n"


def test_consistently_shifted_indentation_matches_and_replace_is_reindented(repo: Path) -> None:
    (repo / "m.py").write_text("class A:\n    def f(self):\n        return 1\n")
    search = "def f(self):\n    return 1"  # the model dropped one level of indentation
    replace = "def f(self):\n    return 2"
    report = apply_edits(block("m.py", search, replace), repo)
    assert report.ok
    assert read(repo, "m.py") == "class A:\n    def f(self):\n        return 2\n"


def test_inconsistent_indentation_does_not_match(repo: Path) -> None:
    report = apply_edits(block("src/app.py", "def f():\n  return 1", "def f():\n  return 9"), repo)
    assert not report.ok
    assert read(repo, "src/app.py").startswith("def f():\n    return 1\n")


def test_empty_search_creates_a_missing_file_and_its_directories(repo: Path) -> None:
    report = apply_edits(block("pkg/new/mod.py", "", "VALUE = 1"), repo)
    assert report.created == ["pkg/new/mod.py"]
    assert read(repo, "pkg/new/mod.py") == "VALUE = 1\n"


def test_empty_search_on_an_existing_non_empty_file_is_an_error(repo: Path) -> None:
    before = read(repo, "src/app.py")
    report = apply_edits(block("src/app.py", "", "overwritten"), repo)
    assert read(repo, "src/app.py") == before
    assert "already exists" in report.failures[0].reason


def test_empty_search_fills_an_existing_empty_file(repo: Path) -> None:
    (repo / "empty.py").write_text("")
    report = apply_edits(block("empty.py", "", "x = 1"), repo)
    assert report.applied == ["empty.py"]
    assert read(repo, "empty.py") == "x = 1\n"


def test_crlf_files_keep_their_line_endings(repo: Path) -> None:
    (repo / "win.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    report = apply_edits(block("win.txt", "two", "TWO", fence=""), repo)
    assert report.ok
    assert (repo / "win.txt").read_bytes() == b"one\r\nTWO\r\nthree\r\n"


def test_file_mode_is_preserved(repo: Path) -> None:
    script = repo / "run.sh"
    script.write_text("echo hi\n")
    script.chmod(0o755)
    apply_edits(block("run.sh", "echo hi", "echo bye", fence=""), repo)
    assert read(repo, "run.sh") == "echo bye\n"
    assert script.stat().st_mode & 0o777 == 0o755


# --------------------------------------------------------------------------- safety


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("../outside.py", "'..'"),
        ("src/../../outside.py", "'..'"),
        ("/etc/passwd", "absolute"),
        ("~/x.py", "absolute"),
        (".git/config", ".git"),
        ("sub/.git/hooks/pre-commit", ".git"),
        (".aiwg/ralph/config.yaml", ".aiwg"),
    ],
)
def test_paths_outside_or_protected_are_refused(repo: Path, path: str, why: str) -> None:
    (repo / ".git").mkdir()
    (repo / ".git" / "config").write_text("[core]\n")
    report = apply_edits(block(path, "", "pwned"), repo)
    assert report.applied == [] and report.created == []
    assert why in report.failures[0].reason
    assert not (repo.parent / "outside.py").exists()
    assert (repo / ".git" / "config").read_text() == "[core]\n"


def test_a_file_symlink_pointing_outside_is_refused(repo: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("keep me\n")
    (repo / "link.txt").symlink_to(secret)
    report = apply_edits(block("link.txt", "keep me", "changed", fence=""), repo)
    assert "outside the repository" in report.failures[0].reason
    assert secret.read_text() == "keep me\n"


def test_a_directory_symlink_pointing_outside_is_refused(repo: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (repo / "vendor").symlink_to(elsewhere, target_is_directory=True)
    report = apply_edits(block("vendor/new.py", "", "x = 1"), repo)
    assert "outside the repository" in report.failures[0].reason
    assert list(elsewhere.iterdir()) == []


def test_a_symlink_into_git_is_refused(repo: Path) -> None:
    (repo / ".git").mkdir()
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (repo / "head").symlink_to(repo / ".git" / "HEAD")
    report = apply_edits(block("head", "ref", "pwned", fence=""), repo)
    assert ".git" in report.failures[0].reason
    assert (repo / ".git" / "HEAD").read_text() == "ref: refs/heads/main\n"


def test_a_symlink_inside_the_repository_edits_its_target(repo: Path) -> None:
    (repo / "alias.py").symlink_to(repo / "src" / "app.py")
    report = apply_edits(block("alias.py", "    return 1", "    return 5"), repo)
    assert report.ok
    assert (repo / "alias.py").is_symlink()
    assert "return 5" in read(repo, "src/app.py")


def test_check_path_returns_the_real_target(repo: Path) -> None:
    assert check_path(repo, "src/app.py") == (repo / "src" / "app.py").resolve()
    with pytest.raises(UnsafePath):
        check_path(repo, "")


def test_no_temporary_files_are_left_behind(repo: Path) -> None:
    apply_edits(block("src/app.py", "    return 1", "    return 10"), repo)
    assert sorted(os.listdir(repo / "src")) == ["app.py"]


# --------------------------------------------------------------------------- property

# no surrogates: a file's text is always encodable (the test writes it with .encode())
line_text = st.text(
    alphabet=st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=12
)


@given(
    lines=st.lists(line_text, min_size=1, max_size=12),
    bounds=st.tuples(st.integers(0, 12), st.integers(0, 12)),
    trailing_newline=st.booleans(),
)
def test_replacing_a_slice_with_itself_leaves_the_file_unchanged(
    tmp_path_factory: pytest.TempPathFactory,
    lines: list[str],
    bounds: tuple[int, int],
    trailing_newline: bool,
) -> None:
    root = tmp_path_factory.mktemp("prop")
    content = "\n".join(lines) + ("\n" if trailing_newline else "")
    (root / "f.txt").write_bytes(content.encode())
    # a slice of whole lines: from the start of one line to the start of another (or the end)
    starts = [0] + [i + 1 for i, char in enumerate(content) if char == "\n"]
    starts = sorted(set([*starts, len(content)]))
    first, last = sorted(starts[min(b, len(starts) - 1)] for b in bounds)
    search = content[first:last]
    report = apply_edit_blocks([EditBlock("f.txt", search, search)], root)
    assert (root / "f.txt").read_bytes().decode() == content
    assert report.created == []


def test_a_search_ending_in_newline_matches_the_last_line_without_one(repo: Path) -> None:
    (repo / "end.txt").write_bytes(b"a\nb")
    report = apply_edit_blocks([EditBlock("end.txt", "b\n", "c\n")], repo)
    assert report.ok
    assert (repo / "end.txt").read_bytes() == b"a\nc"
