"""What an import reads: record files from folders, `.zip` archives and single files, bounded.

Archives are read in memory, never extracted; one member outside the archive's root (`..`, an
absolute path, a symlink) refuses the archive, as does a symlink in a folder. Every record is
parsed and validated here (`Incoming`), within the limits below, before the import
(`transfer.import_records`) writes anything: a record of at most `MAX_RECORD_BYTES`, at most
`MAX_IMPORT_RECORDS` records and `MAX_IMPORT_BYTES` of them in one import (a zip's members are
counted by their declared size before any is inflated, and again as they are read).
"""

from __future__ import annotations

import json
import os
import re
import stat
import zipfile
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from ralph.errors import StoreError
from ralph.files import AIWG_DIR
from ralph.ids import LOOP_ID_PATTERN
from ralph.memory.store import MAX_RECORD_BYTES, RECORD_NAME, record_problems
from ralph.reading import MB, Unreadable, parse_json, read_bounded
from ralph.records import IterationRecord

MAX_IMPORT_RECORDS = 100_000  # record files in one import
MAX_IMPORT_BYTES = 256 * MB  # their total size, inflated: the import holds them until it writes


class ArchiveRefused(StoreError):
    """A source with a path outside its root: nothing of it is imported."""


@dataclass
class Incoming:
    """One record file found in a source: its bytes once validated, or the reason it is not.

    The bytes, not the parsed record, are kept until the import writes: what an import holds
    is bounded by `MAX_IMPORT_BYTES`, and each record is parsed again only to be written."""

    origin: str
    raw: bytes | None = None
    problem: str | None = None
    loop_id: str = ""
    iteration: int = -1

    @property
    def key(self) -> tuple[str, int]:
        return self.loop_id, self.iteration

    @property
    def data(self) -> dict[str, Any]:
        assert self.raw is not None
        data: dict[str, Any] = json.loads(self.raw)
        return data


class _Budget:
    """The import's limits, counted across all its sources."""

    def __init__(self) -> None:
        self.records = 0
        self.bytes = 0

    def take(self, origin: str, records: int, size: int) -> None:
        self.records += records
        self.bytes += size
        if self.records > MAX_IMPORT_RECORDS:
            why = f"more than {MAX_IMPORT_RECORDS} records"
        elif self.bytes > MAX_IMPORT_BYTES:
            why = f"more than {MAX_IMPORT_BYTES // MB} MB of records"
        else:
            return
        raise StoreError(
            f"{origin}: {why} in one import; nothing was imported",
            hint="import fewer loops at a time (`ralph reflections export LOOP...` picks them)",
        )


def read_sources(paths: Sequence[Path]) -> list[Incoming]:
    """Every record file in `paths` (folders, `.zip` archives, record files), all read first.

    An unsafe source, or one beyond the limits, raises before anything is imported from any."""
    found: list[Incoming] = []
    budget = _Budget()
    for path in paths:
        found.extend(_read_source(path, budget))
    return found


def _read_source(path: Path, budget: _Budget) -> Iterator[Incoming]:
    if not path.exists():
        raise StoreError(f"{path}: no such file or directory")
    if path.is_dir():
        yield from _read_folder(_records_root(path), budget)
        return
    if not path.is_file():  # a FIFO or a device: even a look at its first bytes would wait
        raise StoreError(f"{path}: not a regular file, a folder or a .zip archive")
    if zipfile.is_zipfile(path):
        yield from _read_zip(path, budget)
    elif RECORD_NAME.match(path.name):
        yield _parse(str(path), _read_file(path, budget), path.name, path.parent.name)
    else:
        raise StoreError(
            f"{path}: not a folder, a .zip archive or a record (NNN.json)",
            hint="give an artifact folder, a .zip, a repository or its .aiwg/ralph",
        )


def _records_root(folder: Path) -> Path:
    """A repository's or a `.aiwg/ralph`'s reflections folder; any other folder as it is."""
    for candidate in (folder / AIWG_DIR / "reflections", folder / "reflections"):
        if candidate.is_dir() and not candidate.is_symlink():
            return candidate
    return folder


def _read_folder(root: Path, budget: _Budget) -> Iterator[Incoming]:
    found: list[Path] = []
    for here, dirs, files in os.walk(root, followlinks=False):
        for name in [*dirs, *files]:
            if os.path.islink(os.path.join(here, name)):
                raise ArchiveRefused(
                    f"{os.path.join(here, name)}: a symlink inside {root}; nothing was imported",
                    hint="copy the records themselves into the folder",
                )
        found.extend(Path(here, name) for name in files if RECORD_NAME.match(name))
    for path in sorted(found):
        yield _parse(str(path), _read_file(path, budget), path.name, path.parent.name)


def _read_file(path: Path, budget: _Budget) -> bytes | str:
    """The file's bytes through the bounded reader, or the reason they cannot be had (a str)."""
    try:
        raw = read_bounded(path, MAX_RECORD_BYTES)
    except Unreadable as exc:
        budget.take(str(path), 1, 0)
        return str(exc)
    budget.take(str(path), 1, len(raw))
    return raw


def _read_zip(path: Path, budget: _Budget) -> Iterator[Incoming]:
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
            for info in members:
                _check_member(path, info)
            records = [
                info
                for info in members
                if not info.is_dir() and RECORD_NAME.match(PurePosixPath(info.filename).name)
            ]
            # what the archive declares, before anything is inflated; then what it holds
            declared = _Budget()
            declared.take(str(path), len(records), sum(max(i.file_size, 0) for i in records))
            for info in records:
                member = PurePosixPath(info.filename)
                origin = f"{path}:{info.filename}"
                with archive.open(info) as handle:
                    raw = handle.read(MAX_RECORD_BYTES + 1)
                budget.take(origin, 1, min(len(raw), MAX_RECORD_BYTES))
                content: bytes | str = raw
                if len(raw) > MAX_RECORD_BYTES:
                    content = f"larger than {MAX_RECORD_BYTES} bytes"
                yield _parse(origin, content, member.name, member.parent.name)
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, RuntimeError, ValueError) as exc:
        raise StoreError(f"{path}: cannot read the archive: {exc}") from None


_DRIVE = re.compile(r"^[A-Za-z]:")


def _check_member(path: Path, info: Any) -> None:
    """Refuse the archive for a member that would land outside its root if extracted."""
    name: str = info.filename
    why = None
    if stat.S_ISLNK(info.external_attr >> 16):
        why = "is a symlink"
    elif name.startswith(("/", "\\")) or _DRIVE.match(name):
        why = "has an absolute path"
    elif "\\" in name or ".." in PurePosixPath(name).parts:
        why = "points outside the archive"
    if why:
        raise ArchiveRefused(
            f"{path}: member {name!r} {why}; nothing was imported",
            hint="only import archives made by `ralph reflections export` or a CI artifact",
        )


def _parse(origin: str, content: bytes | str, name: str, folder: str) -> Incoming:
    """Everything a record must be before the import writes anything: strict JSON that can be
    written back as UTF-8, valid, its loop id a whole id, its name and folder its own."""
    if isinstance(content, str):
        return Incoming(origin, problem=content)
    try:
        data = parse_json(content, writable=True)
    except Unreadable as exc:
        return Incoming(origin, problem=str(exc))
    problems = record_problems(data)
    if problems:
        return Incoming(origin, problem=problems[0])
    loop_id, iteration = data["loop_id"], data["iteration"]
    try:
        IterationRecord.from_json(data)
    except (TypeError, ValueError, KeyError) as exc:
        return Incoming(origin, problem=str(exc))
    match = RECORD_NAME.match(name)
    if match and int(match.group(1)) != iteration:
        return Incoming(origin, problem=f"iteration {iteration} in a file named {name}")
    if LOOP_ID_PATTERN.fullmatch(folder) and folder != loop_id:
        return Incoming(origin, problem=f"loop {loop_id} in a folder named {folder}")
    return Incoming(origin, content, loop_id=loop_id, iteration=iteration)
