"""ralph's settings inside the tree an agent works on: fixed when the loop starts, never obeyed
from an attempt's edits.

A loop's settings are read once, before the baseline, from the committed base and the user's
own files (`assembly.intake`); `resume` uses those stored in the state, and `notify` those the
loop ran with (cli/loops.py). An attempt that edits them anyway is named after the attempt:
`.aiwg/ralph/config.yaml` (never part of an iteration's commit) is put back as the loop found
it, and a changed `[tool.ralph]` table of `pyproject.toml` (part of the diff, which a person
reviews) is reported, so a later loop does not take it unseen.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ralph.config import CONFIG_FILE, PYPROJECT
from ralph.files import write_atomically
from ralph.reading import Unreadable, read_bounded

MAX_SETTINGS_BYTES = 1 << 20  # a settings file larger than this is not one ralph reads whole
NOT_OBEYED = "not obeyed: the loop keeps the settings it started with"


@dataclass
class SettingsGuard:
    """The settings files as the loop found them, and what an attempt did to them."""

    config: Path  # the memory's .aiwg/ralph/config.yaml
    pyprojects: tuple[Path, ...]  # pyproject.toml of the memory's tree and the loop's tree
    _config: bytes | None = field(init=False, default=None)
    _tables: dict[Path, Any] = field(init=False, default_factory=dict)

    @classmethod
    def of(cls, home: Path, workdir: Path) -> SettingsGuard:
        guard = cls(
            home / CONFIG_FILE, tuple(dict.fromkeys((home / PYPROJECT, workdir / PYPROJECT)))
        )
        guard._config = _read(guard.config)
        guard._tables = {path: _tool_ralph(_read(path)) for path in guard.pyprojects}
        return guard

    def check(self) -> list[str]:
        """After an attempt: one note per settings file it changed (config.yaml put back)."""
        notes = []
        if _read(self.config) != self._config:
            try:
                if self._config is None:
                    os.unlink(self.config)
                else:
                    write_atomically(self.config, self._config.decode("utf-8", "surrogateescape"))
                what = "put back"
            except (OSError, UnicodeError) as exc:
                what = f"could not be put back ({exc})"
            notes.append(
                f"the attempt changed ralph's settings ({CONFIG_FILE}): {what}; {NOT_OBEYED}"
            )
        for path, table in self._tables.items():
            if _tool_ralph(_read(path)) != table:
                notes.append(
                    f"the attempt changed ralph's settings ({PYPROJECT} [tool.ralph]): {NOT_OBEYED}"
                    " (the edit stays in the diff: review it before a new loop reads it)"
                )
        return notes


def _read(path: Path) -> bytes | None:
    try:
        return read_bounded(path, MAX_SETTINGS_BYTES)
    except Unreadable:
        return None if not os.path.lexists(path) else b"\0unreadable"


def _tool_ralph(raw: bytes | None) -> Any:
    """pyproject's `[tool.ralph]` table (None: none), or the raw bytes when it does not parse."""
    if raw is None:
        return None
    try:
        tool = tomllib.loads(raw.decode("utf-8")).get("tool")
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return raw
    return tool.get("ralph") if isinstance(tool, dict) else None
