"""The one place that starts subprocesses: process group, wall and idle timeouts, capped capture.

Actors and checks both run here. Each command gets its own process group so a timeout or Ctrl-C
kills its children and grandchildren too; whatever the command leaves running in its group after
it exits is killed as well. Output is captured with a size cap (head and tail kept), cleaned of
terminal escapes (colour codes of a `--color=yes` in a project's pytest `addopts`, titles,
screen clears: escapes.py) and redacted, here, so every check, actor, agent parser and the
live view get clean text.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Literal, Protocol, TypeAlias

from ralph import reaping
from ralph.escapes import StreamCleaner, strip_escapes
from ralph.glyphs import plural
from ralph.redact import redact

Child: TypeAlias = "subprocess.Popen[bytes]"  # a started command, for those that track them

OutputCallback = Callable[[str, str], None]
KILL_GRACE_SECONDS = 2.0
DEFAULT_CAP = 200_000
OWNER_VARIABLE = "RALPH_OWNER_PID"  # every process ralph starts inherits its pid: see kill_orphans


@dataclass
class Applied:
    """A confined start's argv and environment; its notes are filled once it has ended."""

    argv: list[str]
    env: dict[str, str]
    notes: list[str] = field(default_factory=list)


class Confinement(Protocol):
    """What `run` needs of a sandbox (ralph/sandbox.Sandbox): the argv and environment to
    start instead, for as long as the process runs."""

    def applied(
        self, command: Sequence[str], cwd: Path, full: Mapping[str, str]
    ) -> AbstractContextManager[Applied]: ...


@dataclass
class ProcessResult:
    exit_code: int | None
    stdout: str
    stderr: str
    duration_ms: int
    timed_out: Literal["wall", "idle"] | None = None
    notes: list[str] = field(default_factory=list)  # the sandbox's: a dropped configuration

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and self.timed_out is None


class CappedBuffer:
    """Keeps the first and last `cap // 2` bytes of a stream and counts what it dropped."""

    def __init__(self, cap: int) -> None:
        self.half = max(cap // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def write(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > 2 * self.half:
                del self.tail[: len(self.tail) - self.half]

    def text(self) -> str:
        tail = self.tail[-self.half :] if len(self.tail) > self.half else self.tail
        elided = self.total - len(self.head) - len(tail)
        head_text = self.head.decode("utf-8", errors="replace")
        tail_text = bytes(tail).decode("utf-8", errors="replace")
        if elided <= 0:
            return (self.head + tail).decode("utf-8", errors="replace")
        return f"{head_text}\n[... {plural(elided, 'byte')} elided by ralph ...]\n{tail_text}"


def run(
    command: str | Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    stdin: str | None = None,
    wall_timeout: float | None = None,
    idle_timeout: float | None = None,
    cap: int = DEFAULT_CAP,
    on_output: OutputCallback | None = None,
    on_start: Callable[[subprocess.Popen[bytes]], None] | None = None,
    unset: Collection[str] = (),
    clean: bool = True,
    sandbox: Confinement | None = None,
    contain: bool = False,
) -> ProcessResult:
    """Run `command` (a shell string or an argv) to completion, a timeout, or Ctrl-C.

    A KeyboardInterrupt while waiting kills the process group and is re-raised, so the caller
    can save its state; the partial result is not returned in that case. `on_start` receives
    the process as soon as it exists, so a caller running several commands in worker threads
    (where no KeyboardInterrupt arrives) can still `kill_group` them all on Ctrl-C. `unset`:
    variables of ralph's environment the command must not see (FORCE_COLOR for a check).
    `clean=False` keeps the output's control characters (NUL-separated `git -z` output).
    `sandbox`: run confined (ralph/sandbox.py): bwrap's argv prefix and only the variables the
    sandbox keeps; what is redacted is still judged against ralph's whole environment.
    `contain` (an actor's): what it started dies with it even out of its group (reaping.py).
    """
    if sandbox is None:
        return _run(command, cwd, env, stdin, wall_timeout, idle_timeout, cap, on_output,
                    on_start, unset, clean, contain=contain)  # fmt: skip
    argv = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
    full_env = {**os.environ, **(env or {})}
    with sandbox.applied(argv, cwd, full_env) as applied:
        confined = {name: value for name, value in applied.env.items() if name not in unset}
        result = _run(applied.argv, cwd, confined, stdin, wall_timeout, idle_timeout, cap,
                      on_output, on_start, (), clean, base={}, secrets=full_env)  # fmt: skip
    result.notes = applied.notes
    return result


def _run(
    command: str | Sequence[str],
    cwd: Path,
    env: Mapping[str, str] | None,
    stdin: str | None,
    wall_timeout: float | None,
    idle_timeout: float | None,
    cap: int,
    on_output: OutputCallback | None,
    on_start: Callable[[subprocess.Popen[bytes]], None] | None,
    unset: Collection[str],
    clean: bool,
    *,
    base: Mapping[str, str] | None = None,
    secrets: Mapping[str, str] | None = None,
    contain: bool = False,
) -> ProcessResult:
    argv = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
    full_env = {**(os.environ if base is None else base), **(env or {})}
    full_env[OWNER_VARIABLE] = str(os.getpid())
    for name in unset:
        full_env.pop(name, None)
    run = reaping.Run.start(full_env) if contain else None  # marks it, adopts its orphans
    known = full_env if secrets is None else {**secrets, **full_env}  # what redaction looks for
    if stdin is not None:  # what ralph hands a program is redacted like what it writes
        stdin = redact(stdin, known)
    started = time.monotonic()
    with reaping.SPAWNING:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=full_env,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        reaping.started(proc.pid, run)
    swept: list[int] = []
    buffers = {"stdout": CappedBuffer(cap), "stderr": CappedBuffer(cap)}
    last_output = [time.monotonic()]
    readers: list[threading.Thread] = []
    timed_out: Literal["wall", "idle"] | None = None
    # From here the command runs: a Ctrl-C at any point (a starved main thread can still be
    # starting the readers when the command is well under way) kills its group, never leaves it.
    try:
        if on_start is not None:
            on_start(proc)
        readers = [
            threading.Thread(
                target=_pump,
                args=(stream, buffers[name], name, last_output, _live(on_output, known, clean)),
                daemon=True,
            )
            for name, stream in (("stdout", proc.stdout), ("stderr", proc.stderr))
        ]
        if stdin is not None:
            readers.append(threading.Thread(target=_feed, args=(proc.stdin, stdin), daemon=True))
        for thread in readers:
            thread.start()
        timed_out = _wait(proc, started, last_output, wall_timeout, idle_timeout)
    except KeyboardInterrupt:
        kill_group(proc)
        raise
    finally:
        # Whatever the command left behind in its group goes with it.
        kill_group(proc)
        swept = reaping.ended(proc.pid, run)  # and, for an actor, what left the group
        for thread in readers:
            if thread.ident is not None:  # started
                thread.join(timeout=KILL_GRACE_SECONDS)

    def text(name: str) -> str:
        raw = buffers[name].text()
        return redact(strip_escapes(raw) if clean else raw, known)

    return ProcessResult(
        exit_code=proc.returncode,
        stdout=text("stdout"),
        stderr=text("stderr"),
        duration_ms=int((time.monotonic() - started) * 1000),
        timed_out=timed_out,
        notes=[f"ralph ended {plural(len(swept), 'program')} it left running"] if swept else [],
    )


@dataclass(frozen=True)
class Captured:
    """What a short helper command said, byte for byte (no cap, no redaction: for git's own
    answers, such as paths, which must stay exact)."""

    exit_code: int
    stdout: bytes
    stderr: bytes


def capture(
    argv: Sequence[str], *, cwd: Path | None = None, timeout: float | None = None
) -> Captured | None:
    """Run a short helper command (git plumbing) to its end with no input; None when it could
    not start or outlived `timeout`. For what the user's checks and actors run, use `run`."""
    try:
        done = subprocess.run(
            list(argv), cwd=cwd, capture_output=True, stdin=subprocess.DEVNULL,
            timeout=timeout, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    return Captured(done.returncode, done.stdout, done.stderr)


def _wait(
    proc: subprocess.Popen[bytes],
    started: float,
    last_output: list[float],
    wall_timeout: float | None,
    idle_timeout: float | None,
) -> Literal["wall", "idle"] | None:
    while True:
        now = time.monotonic()
        deadlines: list[tuple[float, Literal["wall", "idle"]]] = []
        if wall_timeout is not None:
            deadlines.append((started + wall_timeout, "wall"))
        if idle_timeout is not None:
            deadlines.append((last_output[0] + idle_timeout, "idle"))
        due = min(deadlines) if deadlines else None
        if due is not None and now >= due[0]:
            kill_group(proc)
            return due[1]
        try:
            proc.wait(timeout=None if due is None else min(due[0] - now, 1.0))
            return None
        except subprocess.TimeoutExpired:
            continue


def _pump(
    stream: IO[bytes] | None,
    buffer: CappedBuffer,
    name: str,
    last_output: list[float],
    on_output: Callable[[str, bytes], None] | None,
) -> None:
    if stream is None:
        return
    with stream:
        while chunk := stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536):
            last_output[0] = time.monotonic()
            buffer.write(chunk)
            if on_output is not None:
                on_output(name, chunk)
    if on_output is not None:
        on_output(name, b"")  # the end: what a decoder or cleaner held back


def _live(
    on_output: OutputCallback | None, environ: Mapping[str, str], clean: bool
) -> Callable[[str, bytes], None] | None:
    """The live output callback, given decoded (a character cut by a read boundary is kept
    whole), cleaned and redacted text (a secret cut in two by a read boundary can still show
    there; what is kept and written is redacted whole)."""
    if on_output is None:
        return None
    callback = on_output
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    cleaner = StreamCleaner()

    def forward(stream: str, chunk: bytes) -> None:
        text = decoder.decode(chunk, final=not chunk)
        if clean:
            text = cleaner.feed(text) if chunk else cleaner.feed(text) + cleaner.flush()
        if text:
            callback(stream, redact(text, environ))

    return forward


def _feed(stream: IO[bytes] | None, text: str) -> None:
    if stream is None:
        return
    with contextlib.suppress(BrokenPipeError, OSError), stream:
        stream.write(text.encode("utf-8"))


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the whole process group, SIGKILL what is left after a grace period."""
    pgid = proc.pid  # start_new_session makes the child its group's leader
    if not _group_alive(pgid):
        if proc.poll() is None:
            proc.wait()
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + KILL_GRACE_SECONDS
    while time.monotonic() < deadline:
        if proc.poll() is not None and not _group_alive(pgid):
            break
        time.sleep(0.02)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    proc.wait()


def _group_alive(pgid: int) -> bool:
    """Whether any non-zombie process is left in the group.

    Orphans are reparented to PID 1, which in a container may never reap them; a zombie still
    answers kill(0), so on Linux /proc is asked for live members instead. A group kill(0) does
    not find has no member at all: the usual case, answered without reading all of /proc
    (a scan that costs milliseconds, twice per
    iteration: `bench/loop.py`).
    """
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # a member this user may not signal: alive, unless /proc says it is a zombie
    proc_root = Path("/proc")
    if not proc_root.is_dir():
        return True
    for entry in os.scandir(proc_root):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
            return True
    return False


def start_time(pid: int) -> int | None:
    """When process `pid` started, in clock ticks after boot (Linux /proc); None if unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat[stat.rfind(")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def kill_orphans(owner_pid: int) -> list[int]:
    """SIGKILL the process groups that a dead ralph (pid `owner_pid`) started and left running.

    After a kill -9 of ralph itself nothing stops its agent or checks: they would go on editing
    the tree while a resumed loop works in it. They are found by the OWNER_VARIABLE they all
    inherited. Call once the loop's lock is free (its ralph is gone). A process whose owner pid
    belongs to a process started before it is spared: that owner is alive, it is no orphan;
    an owner pid now held by a younger process was reused. Linux (/proc) only, else a no-op.
    """
    proc_root = Path("/proc")
    if owner_pid <= 0 or owner_pid == os.getpid() or not proc_root.is_dir():
        return []
    marker = f"{OWNER_VARIABLE}={owner_pid}".encode()
    owner_started = start_time(owner_pid)
    groups: set[int] = set()
    for entry in os.scandir(proc_root):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker not in Path(entry.path, "environ").read_bytes().split(b"\0"):
                continue
            started = start_time(int(entry.name))
            if owner_started is not None and started is not None and owner_started <= started:
                continue  # its owner (or one as old) still lives: not an orphan
            groups.add(os.getpgid(int(entry.name)))
        except OSError:  # gone, or not ours to read
            continue
    groups.discard(os.getpgrp())
    for group in sorted(groups):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
    return sorted(groups)


def which(tool: str, path: str | None = None) -> str | None:
    """`shutil.which`, kept here so every question about running programs has one home."""
    return shutil.which(tool, path=path)


# Words that start a command but are not a program to look for on PATH.
SHELL_WORDS = frozenset(
    {"cd", "test", "[", "true", "false", ":", "echo", "printf", "export", "set", "source", "."}
    | {"exit", "if", "for", "while", "until", "case", "!", "{", "(", "eval", "ulimit", "wait"}
    | {"builtin", "export", "set", "unset", "read", "trap", "shift"}
)
PREFIX_WORDS = frozenset({"exec", "command", "env", "time", "nice", "nohup"})
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def executable_of(command: str) -> str | None:
    """The program a shell command starts, or None when the shell itself runs it (builtins)."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    for word in words:
        if ASSIGNMENT.match(word) or word in PREFIX_WORDS:
            continue
        if word in SHELL_WORDS or word.startswith(("$", "(", "{", "`")):
            return None
        return word
    return None
