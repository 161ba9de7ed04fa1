"""Protected tests: an attempt cannot pass by editing the tests it is judged by.

SWE-bench applies its own test files before judging a patch; ralph does the same with the
tests the baseline ran. After the actor's attempt, a file it changed (modified or deleted) that
holds a test id of a judged pytest check of the baseline (failing or passing) is put back as the
attempt found it, which is the baseline's version, since every attempt's edits of it are put
back. So are a `conftest.py` and the pytest configuration (`pytest.ini`, `.pytest.ini`, and
the pytest section of `tox.ini`, `setup.cfg` or `pyproject.toml`) in a folder above such a test
file, also when the attempt created one: they change what runs. New test files stay.

The edit is dropped, not set aside: the tree that is judged is the tree that is committed. The
agent's diff of those files is kept as `NNN/test-edits.diff`. `--allow-test-edits` turns this off.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ralph.evaluators.judging import Baseline
    from ralph.workspace.base import FileChange

# the pytest configuration a file can hold: the whole file (None), or the sections whose header
# starts with this
PYTEST_CONFIGS: dict[str, str | None] = {
    "pytest.ini": None,
    ".pytest.ini": None,
    "conftest.py": None,
    "tox.ini": "[pytest]",
    "setup.cfg": "[tool:pytest]",
    "pyproject.toml": "[tool.pytest",  # [tool.pytest.ini_options], and pytest 9's [tool.pytest]
}


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
        folders = {folder for name in files for folder in _folders(name)}
        return cls(frozenset(files), frozenset(folders))

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
        for change in changes:
            if not change.path.startswith(prefix):
                continue
            name = change.path[len(prefix) :]
            if name in self.files:
                if change.kind != "created":
                    found.append(change)
                continue
            folder, base = posixpath.split(name)
            if base not in PYTEST_CONFIGS or folder not in self.folders:
                continue
            section = PYTEST_CONFIGS[base]
            if section is None or _section(original(change.path), section) != _section(
                _read(root / name), section
            ):
                found.append(change)
        return found


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
    """The text of the sections whose header starts with `header` (ini and TOML alike)."""
    if data is None:
        return ""
    kept, inside = [], False
    for line in data.decode("utf-8", "replace").splitlines():
        stripped = line.strip()
        if stripped.startswith("["):
            inside = stripped.startswith(header)
        if inside and stripped and not stripped.startswith(("#", ";")):
            kept.append(stripped)
    return "\n".join(kept)
