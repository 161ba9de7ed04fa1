"""`ralph reflections validate`: records and loop states checked against their schemas, as a
result that draws itself (the invalid files with their problems, then a count)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ralph import schemas
from ralph.errors import StoreError
from ralph.glyphs import plural
from ralph.memory.store import RECORD_NAME, record_problems

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions, RenderResult

    from ralph.memory.store import MemoryStore


@dataclass
class Validation:
    """The files read and the problems of each invalid one."""

    files: list[Path]
    invalid: dict[Path, list[str]] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return 1 if self.invalid else 0

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        from rich.text import Text

        for file, problems in self.invalid.items():
            yield Text.assemble(("invalid", "red"), f" {file}")
            for problem in problems[:20]:
                yield Text(f"  {problem}")
        valid = len(self.files) - len(self.invalid)
        yield Text(
            f"{valid} valid, {len(self.invalid)} invalid ({plural(len(self.files), 'file')})"
        )


def validate_paths(paths: list[Path]) -> Validation:
    """Validate every record and state file under `paths`."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files.extend(
                sorted(
                    p
                    for p in path.rglob("*.json")
                    if p.is_file() and (RECORD_NAME.match(p.name) or p.name == "state.json")
                )
            )
        elif path.is_file():
            files.append(path)
        else:
            raise StoreError(f"{path}: no such file or directory")
    result = Validation(files)
    for file in files:
        problems = validate_file(file)
        if problems:
            result.invalid[file] = problems
    return result


def memory_paths(store: MemoryStore) -> list[Path]:
    """What `validate` reads by default: `reflections/` and `loops/`, whichever exist (records
    copied from CI or written by aiwg come without ralph's `loops/`)."""
    found = [p for p in (store.base / "reflections", store.base / "loops") if p.is_dir()]
    if not found:
        raise StoreError(
            f"nothing to validate: {store.base} has no reflections/ or loops/",
            hint="pass the files or folders to validate",
        )
    return found


def validate_file(path: Path) -> list[str]:
    """Problems of one file: a record (`NNN.json`) or a loop state (`state.json`)."""
    from ralph.memory.store import MAX_RECORD_BYTES, MAX_STATE_BYTES
    from ralph.reading import Unreadable, read_json_bounded

    state = path.name == "state.json"
    try:  # a record as the import takes it: strict JSON that can be written back as UTF-8
        data = read_json_bounded(
            path, MAX_STATE_BYTES if state else MAX_RECORD_BYTES, writable=not state
        )
    except Unreadable as exc:
        return [str(exc)]
    if state:
        return schemas.errors(schemas.LOOP_STATE, data)
    return record_problems(data)
