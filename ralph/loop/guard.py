"""The actor can write anywhere in the tree, ralph's memory included: put it back.

After every attempt the loop's records (and its state file) must be exactly what ralph wrote.
A stat per file; a file is read only when it is not as ralph last saw it, and once found intact
it is remembered, so a resumed loop does not re-read its old records on every iteration.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ralph.loop.planted import SettingsGuard
from ralph.memory.store import MAX_RECORD_BYTES, MemoryStore
from ralph.reading import Unreadable, read_json_bounded
from ralph.records import IterationRecord


class MemoryGuard:
    def __init__(self, store: MemoryStore, workdir: Path | None = None) -> None:
        self.store = store
        self._paths: dict[int, Path] = {}
        # ralph's settings as the loop found them (loop/planted.py): an attempt's edit is named
        self._settings = SettingsGuard.of(store.root, workdir) if workdir is not None else None

    def settings(self) -> list[str]:
        """After an attempt: what it did to ralph's settings files, one note each."""
        return self._settings.check() if self._settings is not None else []

    def restore(self, records: list[IterationRecord]) -> list[str]:
        """Rewrite each of `records` the actor changed; the names of the files rewritten."""
        changed = []
        for record in records:
            path = self._paths.get(record.iteration)
            if path is None:
                path = self._paths[record.iteration] = self.store.record_path(
                    record.loop_id, record.iteration
                )
            if self.store.untouched(path):
                continue
            try:  # bounded: an actor may have put anything there, a FIFO too
                on_disk = read_json_bounded(path, MAX_RECORD_BYTES, strict=False)
            except Unreadable:
                on_disk = None
            if same_but_obsolete(on_disk, record):
                self.store._remember(path)  # intact: a stat is enough next time
                continue
            self.store.write_record(record)
            changed.append(path.name)
        self.store.ensure()
        return changed

    def state_touched(self, loop_id: str) -> bool:
        """Whether the state file is not as ralph last wrote it (then the loop writes it)."""
        return not self.store.untouched(self.store.state_path(loop_id))


def same_but_obsolete(on_disk: Any, record: IterationRecord) -> bool:
    """Whether the file holds `record`; the `obsolete` mark a user may set meanwhile (`ralph
    reflections obsolete`) is taken over from the file rather than undone."""
    if not isinstance(on_disk, dict) or not isinstance(on_disk.get("ralph"), dict):
        return bool(on_disk == record.to_json())
    mark = on_disk["ralph"].pop("obsolete", None)
    expected = record.to_json()
    if isinstance(expected.get("ralph"), dict):
        expected["ralph"].pop("obsolete", None)
    if on_disk != expected:
        return False
    if record.ralph is not None:
        record.ralph.obsolete = mark
    return True
