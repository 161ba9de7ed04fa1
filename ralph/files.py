"""Files on disk: the one atomic writer, JSON in and out, the private scratch folder.

Every file ralph writes goes through `write_atomically`: a temporary file in the same directory,
fsynced and renamed over the target, so a reader (or a kill -9) never sees half a file. What ralph
writes about a loop also passes `redact` (`atomic_write_text`/`atomic_write_json`); a project file
an actor edits does not.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ralph.errors import StoreError
from ralph.redact import redact, redact_data

AIWG_DIR = Path(".aiwg") / "ralph"
# A file modified this close to a look at it may change again within the same timestamp tick:
# it is compared by content (or looked at again), never trusted by its stat alone.
RACY_NS = 2_000_000_000


def _read_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# Files get the mode a plain `open()` would give them (mkstemp's 0600 would hide shared memory
# and reports from the rest of a team); read once, as the umask is process-wide.
FILE_MODE = 0o666 & ~_read_umask()


def atomic_write_text(path: Path, text: str, *, durable: bool = True) -> None:
    """Write `text` to `path` atomically; any failure is one StoreError and leaves no temp file.

    Every file ralph writes goes through here (or `atomic_write_json`), so this is where its
    one redaction rule (ralph.redact) is applied to what reaches disk. `durable` fsyncs before
    the rename, so even a power cut leaves old or new: records and state need that; logs and
    prompts (rewritten by a rerun anyway) skip the cost.
    """
    _store_write(path, redact(text), durable=durable)


def write_atomically(
    path: Path, text: str, *, durable: bool = True, mode: int | None = None
) -> None:
    """Temp file in the same directory, (fsync,) rename: readers see the old or the new file,
    and a failure (OSError) leaves no temp file behind. `mode` defaults to what a plain `open()`
    gives; no redaction here (a source file an actor edits is written as it is)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            os.fchmod(handle.fileno(), FILE_MODE if mode is None else mode)
            handle.write(text)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _store_write(path: Path, text: str, *, durable: bool = True) -> None:
    try:
        write_atomically(path, text, durable=durable)
    except OSError as exc:
        raise StoreError(
            f"cannot write {path}: {exc.strerror or exc}", hint=writable_hint(path)
        ) from None


def private_tmp(root: Path) -> Path:
    """`.aiwg/ralph/tmp/` of the memory at `root`: the checks' scratch files (pytest's JUnit
    reports, which hold assertion text), readable by the user only, ignored by git. A file is
    named after the process that made it (`scratch_prefix`), so what a kill -9 left behind is
    removed once that process is gone: by the next check and by `ralph resume`."""
    folder = root / AIWG_DIR / "tmp"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(folder, 0o700)
        ignore = folder / ".gitignore"
        if not ignore.exists():
            ignore.write_text("*\n", encoding="utf-8")
    except OSError as exc:
        raise StoreError(f"cannot create {folder}: {exc.strerror or exc}") from None
    clear_private_tmp(root)
    return folder


PYCACHE_PREFIX = "PYTHONPYCACHEPREFIX"
NO_BYTECODE = "PYTHONDONTWRITEBYTECODE"
CHECKS_PYCACHE = "pycache"
ACTOR_PYCACHE = "pycache-actor"  # its own: a sandboxed actor never writes what the checks load


def bytecode_env(
    root: Path, environ: Mapping[str, str], name: str = CHECKS_PYCACHE, *, make: bool = True
) -> dict[str, str]:
    """`PYTHONPYCACHEPREFIX` for a check (or, with `ACTOR_PYCACHE`, an actor): Python, and
    pytest for the test modules it rewrites (it honours `sys.pycache_prefix`), write bytecode in
    `.aiwg/ralph/tmp/NAME/` of the memory at `root`, not in `__pycache__/` beside the user's
    code, which would dirty a tree that does not ignore it and enter a loop's commits.

    The folder is kept across runs (`clear_private_tmp` removes only scratch files): warm, it
    is as fast as bytecode beside the code (300 modules, 600 tests, 2 busy cores: a pytest run
    1.1-1.2 s either way; 2.1-2.6 s with no bytecode at all). The first run fills it, with the
    standard library's and the tools' bytecode too (about 10 MB; that run 4.8 s). `make`:
    create the folder now (else Python does, on its first write). Empty when `environ` names a
    prefix (the user's wins) or asks for no bytecode (PYTHONDONTWRITEBYTECODE: nothing is
    written then); no bytecode at all when the folder cannot be made."""
    if PYCACHE_PREFIX in environ or environ.get(NO_BYTECODE):
        # the user's prefix wins; with no bytecode written at all, a prefix would only hide the
        # standard library's own bytecode: Python compiled everything from source on every run
        # (the suite, run so on a machine that sets it, took twice its CPU)
        return {}
    folder = root / AIWG_DIR / "tmp" / name
    if make:
        try:
            private_tmp(root)
            folder.mkdir(mode=0o700, exist_ok=True)
        except (StoreError, OSError):
            return {NO_BYTECODE: "1"}
    return {PYCACHE_PREFIX: str(folder)}


def forget_bytecode(
    root: Path, tree: Path, names: tuple[str, ...] = (CHECKS_PYCACHE, ACTOR_PYCACHE)
) -> None:
    """Remove the bytecode the checks and the actor (`names`) kept for the files under `tree`
    (a removed worktree of the memory at `root`): it is kept by the source's path, so a gone
    worktree's would stay for good, one project's worth per loop of `--worktree` or `batch`."""
    for name in names:
        folder = root / AIWG_DIR / "tmp" / name
        for where in {tree.absolute(), tree.resolve()}:
            shutil.rmtree(folder / where.relative_to(where.anchor), ignore_errors=True)


def scratch_prefix() -> str:
    """`ralph-<pid>-<start time>-`: a scratch file's name says which process made it."""
    from ralph.process import start_time

    return f"ralph-{os.getpid()}-{start_time(os.getpid()) or 0}-"


SCRATCH_NAME = re.compile(r"^ralph-(\d+)-(\d+)-")


def clear_private_tmp(root: Path) -> list[Path]:
    """Remove the scratch files in `private_tmp(root)` whose process is gone (its pid is free
    or now names a process started at another time)."""
    from ralph.process import start_time

    folder = root / AIWG_DIR / "tmp"
    removed = []
    for entry in os.scandir(folder) if folder.is_dir() else ():
        match = SCRATCH_NAME.match(entry.name)
        if match and start_time(int(match[1])) != int(match[2]) and entry.is_file():
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
    return removed


def writable_hint(path: Path) -> str:
    return f"free disk space and make {path.parent} writable; the file was left as it was"


def atomic_write_json(path: Path, data: Any, *, redacted: bool = False) -> None:
    """JSON as every reader understands it (NaN or Infinity is refused, never written), its
    strings redacted one by one (redacting the text could cut through JSON syntax);
    `redacted`: `data` is `redact_data`'s result already (a record is redacted, then checked)."""
    try:
        safe = data if redacted else redact_data(data)
        text = json.dumps(safe, indent=2, ensure_ascii=False, allow_nan=False)
    except ValueError as exc:
        raise StoreError(f"refusing to write {path}: {exc}") from None
    _store_write(path, text + "\n")


def read_json(path: Path) -> Any:
    """Parsed JSON, or StoreError naming the file and what is wrong with it."""
    try:
        return json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise StoreError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise StoreError(f"{path}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise StoreError(f"{path}: not JSON: {exc.msg} at line {exc.lineno}") from None
