"""Memory that travels: `ralph reflections export` and `ralph reflections import`.

Loops run on many machines (a CI matrix, colleagues' clones); their records travel as files — an
artifact folder, a `.zip`, another clone's `.aiwg/ralph` — and are merged back here:

- a record this memory lacks is written, once it validates (an invalid one is reported, skipped);
- the same record again (equal JSON; a local obsolete mark aside) changes nothing, so importing
  twice is harmless;
- a record with the loop id and iteration of one here but other content is a conflict: never
  overwritten, kept apart as `conflicts/<loop>/NNN-<hash>.json` and reported;
- records of a loop running here are left alone (reported), so its own writes cannot collide.

Only records travel, never state files: a loop's branch, worktree and process belong to the
machine that ran it. A loop known only from its records is described from them
(`status_from_records`, `records_summary`). Sources are read by `archive.py`: in memory, never
extracted, and one member outside the archive's root (`..`, an absolute path, a symlink) refuses
the archive.

An import is all or nothing: every source is read and every record validated first (its name,
loop id, size, that it can be written back as UTF-8), within `archive.py`'s limits, and only then
is anything written; an error before or while writing leaves the memory as it was.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ralph.errors import StoreError
from ralph.files import atomic_write_json, write_atomically
from ralph.glyphs import plural
from ralph.ids import validate_loop_id
from ralph.memory.archive import Incoming, read_sources
from ralph.memory.store import MAX_RECORD_BYTES, MemoryStore, parse_state
from ralph.reading import Unreadable, read_bounded, read_json_bounded
from ralph.redact import redact, redact_data
from ralph.rendering import whole

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult

CONFLICTS_DIR = "conflicts"


@dataclass
class Conflict:
    loop_id: str
    iteration: int
    origin: str
    kept_at: str
    new: bool


@dataclass
class ImportReport:
    dry_run: bool
    added: list[tuple[str, int, str]] = field(default_factory=list)
    unchanged: int = 0
    conflicts: list[Conflict] = field(default_factory=list)
    invalid: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # origin, why (loop running)

    @property
    def loops(self) -> list[str]:
        return sorted({loop_id for loop_id, _, _ in self.added})

    @property
    def changed(self) -> bool:
        return bool(self.added) or any(c.new for c in self.conflicts)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield from (whole(line) for line in self.lines())

    def lines(self) -> list[str]:
        """What the import did, as it is shown: one line per change and per problem, then
        the totals."""
        lines: list[str] = []
        verb = "would add" if self.dry_run else "added"

        for loop_id, iteration, origin in self.added:
            lines.append(f"{verb} {loop_id}#{iteration} (from {origin})")
        for c in self.conflicts:
            kept = ("would be kept" if self.dry_run else "kept") if c.new else "already kept"
            lines.append(
                f"conflict: {c.loop_id}#{c.iteration} from {c.origin} differs from the record here;"
                f" {kept} apart at {c.kept_at}"
            )
        for origin, reason in self.invalid:
            lines.append(f"invalid, skipped: {origin}: {reason}")
        for origin, reason in self.skipped:
            lines.append(f"skipped: {origin}: {reason}")
        lines.append(
            f"{'dry run: ' if self.dry_run else ''}{verb} "
            f"{plural(len(self.added), 'record')} of {plural(len(self.loops), 'loop')}; "
            f"{self.unchanged} already here, {plural(len(self.conflicts), 'conflict')}, "
            f"{len(self.invalid)} invalid"
        )
        return lines

    def to_json(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "added": [{"loop_id": lp, "iteration": i, "from": o} for lp, i, o in self.added],
            "loops": self.loops,
            "unchanged": self.unchanged,
            "conflicts": [
                {
                    "loop_id": c.loop_id,
                    "iteration": c.iteration,
                    "from": c.origin,
                    "kept_at": c.kept_at,
                    "new": c.new,
                }
                for c in self.conflicts
            ],
            "invalid": [{"from": o, "reason": r} for o, r in self.invalid],
            "skipped": [{"from": o, "reason": r} for o, r in self.skipped],
        }


# --- merging -----------------------------------------------------------------------------------


def comparable(data: Any) -> str:
    """The record's meaning, for equality: a local obsolete mark does not make it different,
    and it is compared as it is written (redacted), so a record holding a secret equals the
    copy an earlier import of it wrote."""
    data = redact_data(data)
    if isinstance(data, dict) and isinstance(data.get("ralph"), dict):
        data = {**data, "ralph": {k: v for k, v in data["ralph"].items() if k != "obsolete"}}
    return json.dumps(data, sort_keys=True, ensure_ascii=False)


def import_records(
    store: MemoryStore, paths: Sequence[Path], *, dry_run: bool = False
) -> ImportReport:
    """Merge the records found in `paths` into `store` (see the module docstring): everything
    is read and decided first, then written in one go (`_write_all`), or not at all."""
    incoming = read_sources(paths)
    report = ImportReport(dry_run=dry_run)
    pending: dict[tuple[str, int], str] = {}  # digests of what this import writes (or would)
    planned: list[tuple[Path, Incoming]] = []
    kept_apart: set[Path] = set()
    running: dict[str, bool] = {}
    for item in incoming:
        if item.raw is None:
            report.invalid.append((item.origin, item.problem or "invalid"))
            continue
        loop_id, iteration = item.key
        if running.setdefault(loop_id, _running_here(store, loop_id)):
            report.skipped.append((item.origin, f"loop {loop_id} is running here"))
            continue
        mine = _digest(comparable(item.data))
        target = store.record_path(loop_id, iteration)
        known = pending.get((loop_id, iteration))
        if known is None and target.exists():
            known = _digest(_comparable_file(target))
        if known == mine:
            report.unchanged += 1
            continue
        if known is not None:
            conflict, path = _keep_apart(store, item, mine, kept_apart)
            report.conflicts.append(conflict)
            if conflict.new:
                kept_apart.add(path)
                planned.append((path, item))
            continue
        pending[(loop_id, iteration)] = mine
        report.added.append((loop_id, iteration, item.origin))
        planned.append((target, item))
    if not dry_run and planned:
        _write_all(store, planned)
        kept = [item for path, item in planned if path == store.record_path(*item.key)]
        note_imported(store, {item.key: item.origin for item in kept})
    return report


IMPORTED_FILE = "imported.json"  # loops/imported.json: `loop#iteration` -> where it came from


def note_imported(store: MemoryStore, origins: dict[tuple[str, int], str]) -> None:
    """Remember where each imported record came from (an archive's name, else the file), so a
    lesson it gives a prompt says so (`imported_from`)."""
    if not origins:
        return
    known = imported_from(store)
    for (loop_id, iteration), origin in origins.items():
        archive = origin.split(":", 1)[0]
        shown = Path(archive).name if archive != origin and Path(archive).is_file() else origin
        known[f"{loop_id}#{iteration}"] = redact(shown)
    with contextlib.suppress(OSError):
        atomic_write_json(store.base / "loops" / IMPORTED_FILE, known)


def imported_from(store: MemoryStore) -> dict[str, str]:
    """`loop#iteration` -> the archive or folder its record was imported from (none: {})."""
    try:
        data = read_json_bounded(store.base / "loops" / IMPORTED_FILE, MAX_RECORD_BYTES)
    except Unreadable:
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): str(v) for k, v in data.items() if isinstance(v, str)}


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _write_all(store: MemoryStore, planned: list[tuple[Path, Incoming]]) -> None:
    """Write the planned files, each new (a record this memory lacks, a conflict not yet kept);
    on any failure remove what was written and the folders made for it, so a failed import
    leaves the memory as it was, and say so."""
    written: list[Path] = []
    made: list[Path] = []
    try:
        store.ensure()
        for path, item in planned:
            for folder in reversed(path.parents):
                if folder.is_relative_to(store.base) and not folder.exists():
                    made.append(folder)
            atomic_write_json(path, item.data)
            written.append(path)
    except BaseException as exc:
        for done in written:
            with contextlib.suppress(OSError):
                done.unlink()
        for folder in reversed(made):
            with contextlib.suppress(OSError):
                folder.rmdir()
        if isinstance(exc, (OSError, StoreError, ValueError)):
            why = exc.message if isinstance(exc, StoreError) else str(exc)
            raise StoreError(
                f"the import failed while writing: {why}; nothing was imported"
            ) from None
        raise


def _comparable_file(path: Path) -> str:
    try:
        return comparable(read_json_bounded(path, MAX_RECORD_BYTES, strict=False))
    except Unreadable as exc:  # an unreadable local record still differs from any import
        return f"unreadable: {exc}"


def _running_here(store: MemoryStore, loop_id: str) -> bool:
    path = store.state_path(loop_id)
    if not path.exists():
        return False
    try:
        return store.effective_status(parse_state(path)) == "running"
    except StoreError:
        return False


def _keep_apart(
    store: MemoryStore, item: Incoming, digest: str, planned: set[Path]
) -> tuple[Conflict, Path]:
    loop_id, iteration = item.key
    path = store.base / CONFLICTS_DIR / loop_id / f"{iteration:03d}-{digest[:12]}.json"
    new = path not in planned and not path.exists()
    shown = os.path.relpath(path, store.root)
    return Conflict(loop_id, iteration, item.origin, shown, new), path


# --- exporting ---------------------------------------------------------------------------------


def export_records(
    store: MemoryStore,
    loop_ids: Sequence[str],
    *,
    zip_path: Path | None = None,
    folder: Path | None = None,
) -> list[tuple[str, int]]:
    """Copy the record files of `loop_ids` (default: every loop with records) as
    `<loop>/NNN.json` into a new `.zip` or a folder: byte for byte, or redacted (`exported`).
    Returns (loop, records) per loop."""
    if (zip_path is None) == (folder is None):
        raise StoreError("export needs one destination", hint="--zip FILE or --dir DIR")
    store.require()
    ids = [validate_loop_id(i) for i in dict.fromkeys(loop_ids)] or [
        i for i in store.loop_ids() if store.record_paths(i)
    ]
    files: list[tuple[str, Path]] = []
    counts = []
    for loop_id in ids:
        paths = store.record_paths(loop_id)
        if not paths:
            raise StoreError(
                f"loop {loop_id} has no records", hint="`ralph reflections list` shows the loops"
            )
        files.extend((f"{loop_id}/{path.name}", path) for _, path in paths)
        counts.append((loop_id, len(paths)))
    if not files:
        raise StoreError("no records to export", hint="`ralph reflections list` shows the loops")
    if zip_path is not None:
        _write_zip(zip_path, files)
    else:
        assert folder is not None
        for name, path in files:
            text = exported(_local(path)).decode("utf-8", errors="replace")
            write_atomically(folder / name, text)
    return counts


def _local(path: Path) -> bytes:
    """A local record's bytes for an export, through the bounded reader."""
    try:
        return read_bounded(path, MAX_RECORD_BYTES)
    except Unreadable as exc:
        raise StoreError(f"{path}: {exc}; not exported") from None


def exported(raw: bytes) -> bytes:
    """A record file's bytes as they leave ralph: as they are, or, when a string in it holds a
    secret (a record written elsewhere, or before a rule was added), the record with its strings
    redacted one by one (redacting the text could cut through JSON syntax)."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return redact(raw.decode("utf-8", errors="replace")).encode("utf-8")
    safe = redact_data(data)
    if safe == data:
        return raw
    return (json.dumps(safe, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _write_zip(target: Path, files: list[tuple[str, Path]]) -> None:
    """Written beside the target and renamed: a reader never sees half an archive."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle, zipfile.ZipFile(handle, "w") as archive:
            for name, path in files:
                info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                archive.writestr(info, exported(_local(path)))
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# --- loops known only from their records -------------------------------------------------------


def status_from_records(passed: Sequence[bool]) -> str:
    """A loop imported without its state: `completed` when its last attempt passed (a loop
    stops at green), else `failed`; `unknown` without any valid record."""
    if not passed:
        return "unknown"
    return "completed" if passed[-1] else "failed"


def records_summary(store: MemoryStore, loop_id: str) -> dict[str, Any]:
    """What a listing shows of a loop without a state file, read from its valid records."""
    records = store.valid_records(loop_id)
    rewards = [r.evaluator_output.reward_signal or 0.0 for r in records]
    return {
        "task": next((r.task_description for r in records if r.task_description), None),
        "status": status_from_records([r.evaluator_output.passed for r in records]),
        "iterations": len(records),
        "best_reward": max(rewards, default=None),
        "updated_at": records[-1].timestamp if records else None,
    }
