"""Protected tests: an attempt cannot pass by editing the tests it is judged by.

SWE-bench applies its own test files before judging a patch; ralph does the same with the
tests the baseline ran. After the actor's attempt, a file it changed (modified or deleted) that
holds a test id of a judged pytest check of the baseline (failing or passing) is put back as the
attempt found it, which is the baseline's version, since every attempt's edits of it are put
back. So is the whole test harness, wherever it lies in the tree and also when the attempt
created it (then it is removed): every `conftest.py`, the pytest configuration (`pytest.ini`,
`.pytest.ini`, `pytest.toml`, `.pytest.toml`, and the pytest section of `tox.ini`, `setup.cfg`
or `pyproject.toml`), what Python runs at start-up (`sitecustomize.py`, `usercustomize.py`,
`.pth` files), a module that names plugins (`pytest_plugins`, a new test file's too) and the
modules the baseline's harness names as plugins (`pytest_plugins`, `-p NAME`): they change what
runs and how it is reported. New test files stay. Of a file protected by section only that
section is put back (`spliced`): the rest of it is the agent's.

The edit is dropped, not set aside: the tree that is judged is the tree that is committed. The
agent's diff of what was put back is kept as `NNN/test-edits.diff`. `--allow-test-edits` turns
this off.
"""

from __future__ import annotations

import difflib
import posixpath
import re
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ralph.files import write_atomically
from ralph.workspace.base import shown

if TYPE_CHECKING:
    from ralph.evaluators.judging import Baseline
    from ralph.workspace.base import FileChange, Workspace

# the pytest configuration a file can hold: the whole file (None), or the sections whose header
# starts with this; protected wherever it lies in the tree (pytest finds its configuration in
# the folders of the paths it is given and above, and loads a conftest.py in any folder it
# collects)
PYTEST_CONFIGS: dict[str, str | None] = {
    "pytest.ini": None,
    ".pytest.ini": None,
    "pytest.toml": None,
    ".pytest.toml": None,
    "conftest.py": None,
    "tox.ini": "[pytest]",
    "setup.cfg": "[tool:pytest]",
    "pyproject.toml": "[tool.pytest",  # [tool.pytest.ini_options], and pytest 9's [tool.pytest]
}
# what Python runs at start-up from a folder on its path (PYTHONPATH holds a worktree's code)
STARTUP_FILES = frozenset({"sitecustomize.py", "usercustomize.py"})
# a module that names plugins for pytest to load (a new test file with `pytest_plugins`)
NAMES_PLUGINS = re.compile(rb"^\s*pytest_plugins\s*[:=]", re.MULTILINE)
PLUGINS_VALUE = re.compile(r"pytest_plugins\s*(?::[^=\n]*)?=\s*(\[[^\]]*\]|\([^)]*\)|[^\n]*)")
P_OPTION = re.compile(r"(?:^|[\s\"'])-p\s*(?!no:)([\w.]+)(?!:)")


@dataclass(frozen=True)
class ProtectedTests:
    """The baseline's test files and the folders whose pytest configuration applies to them,
    as paths relative to the project's root (where the checks run)."""

    files: frozenset[str]
    folders: frozenset[str]  # "" is the root

    @classmethod
    def of(cls, baseline: Baseline | None) -> ProtectedTests:
        files = set()
        for check in baseline.checks.values() if baseline is not None else ():
            if check.kind == "tests" and check.judged:
                files.update(files_of_tests([*check.failing, *(check.passing or ())]))
        return cls.named(files)

    @classmethod
    def named(cls, files: Iterable[str]) -> ProtectedTests:
        """These test files (from the root), and the folders whose harness applies to them."""
        names = frozenset(files)
        return cls(names, frozenset(folder for name in names for folder in _folders(name)))

    def __bool__(self) -> bool:
        return bool(self.files)

    def edits(
        self,
        changes: Iterable[FileChange],
        prefix: str,
        original: Callable[[str], bytes | None],
        root: Path,
    ) -> list[FileChange]:
        """The changes (paths as the workspace names them, the root at `prefix`) that touch a
        protected file; `original(path)`: the file as the attempt found it (None: absent)."""
        found = []
        named = plugins(original, prefix, self.folders)
        for change in changes:
            if not change.path.startswith(prefix):
                continue
            name = change.path[len(prefix) :]
            if name in self.files:
                if change.kind != "created":
                    found.append(change)
                continue
            base = posixpath.basename(name)
            if base in STARTUP_FILES or base.endswith(".pth") or name in named:
                found.append(change)
                continue
            if (
                base.endswith(".py")
                and change.kind != "deleted"
                and NAMES_PLUGINS.search(_read(root / name) or b"")
            ):
                found.append(change)
                continue
            if base not in PYTEST_CONFIGS:
                continue
            section = PYTEST_CONFIGS[base]
            if section is None or _section(original(change.path), section) != _section(
                _read(root / name), section
            ):
                found.append(change)
        return found


def plugins(
    original: Callable[[str], bytes | None], prefix: str, folders: Iterable[str]
) -> frozenset[str]:
    """The files of the modules the baseline's harness names as plugins (`pytest_plugins` in a
    conftest.py, `-p NAME` in a pytest configuration of a folder of the tests): a module pytest
    imports is the harness too, wherever it lies (from the root or a conftest's folder)."""
    names: set[str] = set()
    for folder in folders:
        for base in PYTEST_CONFIGS:
            text = (original(prefix + posixpath.join(folder, base)) or b"").decode(
                "utf-8", "replace"
            )
            for value in PLUGINS_VALUE.findall(text):
                names.update(re.findall(r"[\"']([\w.]+)[\"']", value))
            names.update(P_OPTION.findall(text))
    found: set[str] = set()
    for name in names:
        module = name.replace(".", "/")
        for folder in ("", *folders):
            found.update(
                posixpath.join(folder, f"{module}{end}") for end in (".py", "/__init__.py")
            )
    return frozenset(found)


def files_of_tests(test_ids: Iterable[str]) -> set[str]:
    """`tests/test_x.py` of `tests/test_x.py::TestC::test_m[1]`; ids without a file (a
    collection error's key, a class name pytest could not place) name none, and neither does a
    doctest's (`src/pkg/mod.py::pkg.mod.func`, with `--doctest-modules`): its file is the code
    the task is about, and putting it back would undo every fix."""
    files = set()
    for test_id in test_ids:
        name, sep, rest = test_id.partition("::")
        if not sep or _is_doctest(rest):
            continue
        if name.endswith(".py") and not name.startswith("/") and ".." not in name:
            files.add(posixpath.normpath(name))
    return files


def _is_doctest(item: str) -> bool:
    """A doctest's item is a dotted name; a test function's or class's never has a dot outside
    its parameters (`test_m[1.5]`)."""
    return "." in item.partition("[")[0]


def note(paths: list[str]) -> str:
    """The line the terminal shows and the record keeps."""
    return f"edited {', '.join(paths)}: put back, the edit did not count"


def _folders(name: str) -> list[str]:
    """The folders above a file, from the root (""): where a conftest.py applies to it."""
    parts = name.split("/")[:-1]
    return ["/".join(parts[:i]) for i in range(len(parts) + 1)]


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:  # deleted
        return None


def _section(data: bytes | None, header: str) -> str:
    """The settings of the sections whose header starts with `header` (ini and TOML alike),
    blank lines and comments left out: what pytest reads of them."""
    if data is None:
        return ""
    kept = []
    for block in _blocks(data.decode("utf-8", "replace"), header):
        for line in _lines(block.text) if block.pytest else ():
            stripped = line.strip()
            if stripped and not stripped.startswith(("#", ";")):
                kept.append(stripped)
    return "\n".join(kept)


def put_back(edits: Iterable[FileChange], prefix: str, workspace: Workspace) -> str:
    """Undo `edits` (from `ProtectedTests.edits`): a file protected by section gets the
    original's pytest sections back and keeps the agent's other edits; any other file is put
    back whole. Returns the diff of what was undone, for `test-edits.diff`."""
    whole, diffs = [], []
    for change in edits:
        name = change.path[len(prefix) :]
        header = PYTEST_CONFIGS.get(posixpath.basename(name))
        path = workspace.root / name
        if header is not None and not path.is_symlink():
            original, current = workspace.original(change.path), _read(path)
            kept = spliced(original, current, header)
            if kept is not None and kept != original and current is not None:
                diffs.append(_diff(shown(change.path), kept, current))
                mode = stat.S_IMODE(path.stat().st_mode)
                write_atomically(path, kept.decode(), durable=False, mode=mode)
                continue
        whole.append(change.path)
        diffs.append(change.diff)
    if whole:
        workspace.put_back(whole)
    return "".join(diff.rstrip("\n") + "\n" for diff in diffs)


def spliced(original: bytes | None, current: bytes | None, header: str) -> bytes | None:
    """`current` (the agent's file) with its sections whose header starts with `header`
    replaced by `original`'s, the rest byte for byte the agent's: a section the agent added is
    removed, one it deleted comes back after the section it followed (else before the one it
    preceded, else at the end). None: put the whole file back (the agent deleted it, it is not
    UTF-8, or the agent created it and nothing but the section is left)."""
    if current is None:
        return None
    try:
        old = _blocks(original.decode() if original is not None else "", header)
        new = _blocks(current.decode(), header)
    except UnicodeDecodeError:
        return None
    kept = {block.header: block for block in old if block.pytest}
    out: list[_Block] = []
    dropped = False
    for block in new:
        if not block.pytest:
            lines = _lines(block.text)
            while dropped and lines and not lines[0].strip() and _ends_blank(out):
                lines.pop(0)  # the blank lines after a removed section: one is enough
            if lines:
                out.append(_Block(block.header, False, "".join(lines)))
        elif block.header in kept and all(b.header != block.header for b in out):
            out.append(kept[block.header])
        dropped = block.pytest and out[-1:] != [kept.get(block.header)]
    ends = re.findall(r"\r\n|\n|\r", "".join(block.text for block in [*new, *old]))
    eol = ends[0] if ends else "\n"  # the agent's line ending, else the original's
    for at, block in enumerate(old):
        if block.pytest and all(b.header != block.header for b in out):
            _restore(out, block, [b.header for b in old[:at]], [b.header for b in old[at:]], eol)
    last = len(out) - 1  # the original's section may have ended its file without a newline
    text = "".join(
        b.text if at == last or not b.text or b.text.endswith(("\n", "\r")) else b.text + eol
        for at, b in enumerate(out)
    )
    if original is None and not text.strip():
        return None
    return text.encode()


@dataclass(frozen=True)
class _Block:
    """A section of an ini or TOML file, or the text before the first one (header None), or the
    blank lines and comments after a pytest section (header None): they are not pytest's."""

    header: str | None
    pytest: bool
    text: str


def _lines(text: str) -> list[str]:
    """The lines of `text`, each with its own line ending (\\n, \\r\\n or \\r), kept."""
    return [line for line in re.split(r"(?<=\n)|(?<=\r)(?!\n)", text) if line]


def _blocks(text: str, header: str) -> list[_Block]:
    """`text` cut at its section headers, losslessly (the texts joined give it back)."""
    blocks: list[_Block] = []
    lines: list[str] = []
    name: str | None = None
    for line in [*_lines(text), None]:
        if line is None or line.strip().startswith("["):
            pytest = name is not None and name.startswith(header)
            tail = len(lines)
            while pytest and tail > 1 and _is_gap(lines[tail - 1]):
                tail -= 1
            if lines:
                blocks.append(_Block(name, pytest, "".join(lines[:tail])))
            if lines[tail:]:
                blocks.append(_Block(None, False, "".join(lines[tail:])))
            if line is None:
                break
            name, lines = line.strip(), []
        lines.append(line)
    return blocks


def _is_gap(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith(("#", ";"))


def _ends_blank(blocks: list[_Block]) -> bool:
    lines = _lines("".join(block.text for block in blocks))
    return not lines or not lines[-1].strip()


def _restore(
    out: list[_Block], block: _Block, before: list[str | None], after: list[str | None], eol: str
) -> None:
    """Put `block` back in `out` after the nearest section that preceded it in the original,
    else before the nearest that followed it, else at the end; never between a section and the
    comments over it; a blank line sets it apart."""
    headers = [b.header for b in out]
    at = len(out)
    for name in reversed(before):
        if name is not None and name in headers:
            at = headers.index(name) + 1
            while at < len(out) and out[at].header is None and not out[at].text.strip():
                at += 1  # its trailing blank lines
            at = _above_comments(out, at) if at < len(out) else at
            break
    else:
        for name in after:
            if name is not None and name in headers:
                at = _above_comments(out, headers.index(name))
                break
    text = block.text if block.text.endswith(("\n", "\r")) else block.text + eol
    previous = "".join(b.text for b in out[:at])
    if previous.strip() and not _is_gap(_lines(previous)[-1]):
        text = eol + text  # (a line ending the previous block lacks is added by `spliced`)
    if at < len(out) and _lines(out[at].text)[0].strip():
        text += eol
    out.insert(at, _Block(block.header, True, text))


def _above_comments(out: list[_Block], at: int) -> int:
    """Where to insert before `out[at]`: above the comment lines right over its header (they
    are about it), split off the block they end."""
    if at == 0:
        return at
    lines = _lines(out[at - 1].text)
    top = len(lines)
    while top > 0 and lines[top - 1].strip().startswith(("#", ";")):
        top -= 1
    if top == len(lines):
        return at
    previous = out[at - 1]
    out[at - 1] = _Block(previous.header, previous.pytest, "".join(lines[:top]))
    out.insert(at, _Block(None, False, "".join(lines[top:])))
    return at


def _diff(path: str, kept: bytes, current: bytes) -> str:
    """What the agent wrote against what was kept: a unified diff that, applied to the tree
    as committed, gives the agent's file back."""
    lines = difflib.unified_diff(
        _lines(kept.decode()), _lines(current.decode()), f"a/{path}", f"b/{path}"
    )
    return "".join(
        line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n"
        for line in lines
    )
