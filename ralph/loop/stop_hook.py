"""Claude Code's Stop hook: the agent may stop only when the project's checks agree.

`ralph hook claude-stop` reads the hook's JSON from stdin, runs the configured checks in the
`cwd` given there (the repository around it), judged against the newest baseline ralph took of
that tree (the latest loop that worked in it and kept a `baseline.json`: checks failing before
that loop may keep failing as they did; without one every check must pass), and answers:

- checks pass: nothing printed, the stop happens;
- checks fail: `{"decision": "block", "reason": ...}`, the failing checks and their file:line
  diagnostics, so Claude keeps working on them;
- the test harness edited (loop/protect.py's rule: a test file of the baseline, or without one
  a tracked test file, modified or deleted since HEAD; a new or changed conftest, pytest
  configuration, start-up file or plugin): blocked without running the checks, the files
  named, as the loop would put them back (`allow_test_edits` turns it off). The checks
  themselves judge as the loop's do: by the JUnit report, ids seen passing, canaries;
- never forever: after `max_blocks` consecutive blocks (a stop with `stop_hook_active` true
  continues the count; a fresh stop starts it again) the stop is let through with a
  `systemMessage` saying so. The count is kept in `.aiwg/ralph/tmp/claude-stop.json`.

`ralph hook install claude` adds the hook to `.claude/settings.json`, keeping every other key
and hook; installed twice, the file does not change.
"""

from __future__ import annotations

import io
import json
import os
import posixpath
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ralph import config
from ralph.errors import ConfigError
from ralph.escapes import strip_escapes
from ralph.evaluators.base import EvaluationRequest
from ralph.evaluators.describe import check_summary, located_first
from ralph.evaluators.verdicts import Baseline
from ralph.files import atomic_write_json, private_tmp, write_atomically
from ralph.glyphs import plural
from ralph.loop.assembly import make_evaluator, project_root
from ralph.loop.protect import ProtectedTests
from ralph.memory.store import MemoryStore
from ralph.reading import Unreadable, parse_json
from ralph.redact import redact
from ralph.workspace.base import ChangeKind, FileChange
from ralph.workspace.git import Git

if TYPE_CHECKING:
    from ralph.evaluators.base import Evaluation

MAX_BLOCKS = 5
MAX_INPUT_BYTES = 1 << 20
COUNTER_FILE = "claude-stop.json"
SHOWN_DIAGNOSTICS = 20
HOOK_COMMAND = "ralph hook claude-stop"
TEST_NAME = re.compile(r"^(test_.*|.*_test)\.py$")  # pytest's default python_files
HOOK_TIMEOUT = 900  # seconds Claude Code waits for the checks (its default is 60)


@dataclass(frozen=True)
class HookInput:
    """What ralph reads of the Stop hook's input."""

    cwd: Path
    stop_hook_active: bool
    session_id: str


def read_input(stdin: TextIO) -> str:
    """The hook's input, at most `MAX_INPUT_BYTES`: a regular file's size is looked at before
    anything is read, and a pipe is read no further than one byte past the limit (300 MB on
    stdin are refused, never read whole)."""
    too_large = ConfigError("the hook input on stdin is larger than 1 MB")
    stream = getattr(stdin, "buffer", None)
    if stream is None:  # a text stream without bytes under it (a test's StringIO)
        text = stdin.read(MAX_INPUT_BYTES + 1)
        if len(text) > MAX_INPUT_BYTES:
            raise too_large
        return text
    try:
        st = os.fstat(stream.fileno())
        if stat.S_ISREG(st.st_mode) and st.st_size - stream.tell() > MAX_INPUT_BYTES:
            raise too_large
    except (OSError, ValueError, io.UnsupportedOperation):
        pass  # no file under it: the bounded read below decides
    raw = stream.read(MAX_INPUT_BYTES + 1)
    if len(raw) > MAX_INPUT_BYTES:
        raise too_large
    return bytes(raw).decode("utf-8", errors="replace")


def parse_input(text: str) -> HookInput:
    """The hook's JSON (`cwd`, `stop_hook_active`, `session_id`); a one-line error otherwise
    (nested past Python's stack too: `[[[[...`)."""
    if len(text.encode("utf-8", errors="replace")) > MAX_INPUT_BYTES:
        raise ConfigError("the hook input on stdin is larger than 1 MB")
    try:
        data = parse_json(text.encode("utf-8", errors="replace"), strict=False)
    except Unreadable as why:
        raise ConfigError(
            f"the hook input on stdin is {why}",
            hint='Claude Code sends it; by hand: echo \'{"cwd": "."}\' | ralph hook claude-stop',
        ) from None
    if not isinstance(data, dict):
        raise ConfigError("the hook input on stdin is not a JSON object")
    cwd = data.get("cwd")
    if not isinstance(cwd, str) or not cwd.strip():
        raise ConfigError("the hook input has no `cwd`: the directory to run the checks in")
    path = Path(cwd).expanduser()
    if not path.is_dir():
        raise ConfigError(f"the hook input's cwd {cwd!r} is not a directory")
    session = data.get("session_id")
    return HookInput(
        cwd=path.resolve(),
        stop_hook_active=data.get("stop_hook_active") is True,
        session_id=session if isinstance(session, str) else "",
    )


def hook_project(given: Path | None, environ: dict[str, str] | os._Environ[str]) -> Path:
    """The project the hook serves: `--project`, else Claude Code's `CLAUDE_PROJECT_DIR`, else
    the directory the hook was started in; its repository's top."""
    where = given or Path(environ.get("CLAUDE_PROJECT_DIR", "").strip() or Path.cwd())
    return project_root(where.expanduser())


def decide(
    hook: HookInput, *, max_blocks: int = MAX_BLOCKS, project: Path | None = None
) -> dict[str, Any] | None:
    """The hook's answer: None (let it stop), or the JSON object to print. A `cwd` outside
    `project` (the project the hook serves: `hook_project`) runs nothing there: that
    directory's configured checks are not this project's; the stop is blocked, counted."""
    root = project_root(hook.cwd)
    home = project if project is not None else root
    store = MemoryStore.discover(home)
    blocks = _read_count(store, hook) if hook.stop_hook_active else 0
    if blocks >= max_blocks:
        _write_count(store, hook, 0)
        return {
            "systemMessage": f"ralph: the checks still fail after {blocks} blocked stops; "
            "letting Claude stop (`ralph check` shows them)"
        }
    if root != home.resolve():
        _write_count(store, hook, blocks + 1)
        reason = (
            f"ralph: the session's directory {hook.cwd} is outside the project {home}; ralph "
            "runs no checks there. Go back into the project before you stop."
        )
        return {"decision": "block", "reason": strip_escapes(redact(reason))}
    settings = config.load(store.root)
    baseline = tree_baseline(store, root)
    edited = [] if settings.allow_test_edits else harness_edits(root, baseline)
    if edited:
        _write_count(store, hook, blocks + 1)
        return {"decision": "block", "reason": edits_reason(edited, blocks + 1, max_blocks)}
    suite = make_evaluator(settings)
    suite.preflight()
    evaluation = suite.handle(EvaluationRequest(root, baseline))
    if evaluation.passed:
        _write_count(store, hook, 0)
        return None
    _write_count(store, hook, blocks + 1)
    return {"decision": "block", "reason": block_reason(evaluation, blocks + 1, max_blocks)}


def block_reason(evaluation: Evaluation, block: int, max_blocks: int) -> str:
    """What Claude reads: which checks fail, then their diagnostics, file:line first."""
    failing = evaluation.failing()
    names = ", ".join(f"{o.spec.name} ({check_summary(o)})" for o in failing)
    lines = [f"ralph: the project's checks fail: {names}. Fix them before you stop."]
    errors = located_first(evaluation.relevant_errors())
    for d in errors[:SHOWN_DIAGNOSTICS]:
        where = d.location() or d.rule or d.type
        rule = f" [{d.rule}]" if d.rule and d.rule not in where else ""
        first = d.message.strip().splitlines()[0] if d.message.strip() else d.type
        lines.append(f"- {where}: {first}{rule}")
    if len(errors) > SHOWN_DIAGNOSTICS:
        lines.append(f"- ... and {len(errors) - SHOWN_DIAGNOSTICS} more (`ralph check` shows all)")
    if evaluation.baseline is not None:
        lines.append("Failures that were there before ralph's baseline are not asked of you.")
    lines.append(f"(stop blocked {block} of at most {plural(max_blocks, 'time')} in a row)")
    return strip_escapes(redact("\n".join(lines)))


def harness_edits(root: Path, baseline: Baseline | None) -> list[str]:
    """The test files and harness the session changed since HEAD (paths from `root`), by the
    loop's rule (loop/protect.py); without a baseline, every tracked test file is protected."""
    git = Git(root)
    status, out, _ = git.run("rev-parse", "--show-prefix", check=False)
    if status != 0:
        return []  # not a git repository: nothing to compare with
    prefix = out.decode("utf-8", "replace").strip()
    status, out, _ = git.run(
        "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames", "--", ".",
        check=False,
    )  # fmt: skip
    changes = []
    for entry in out.decode("utf-8", "replace").split("\0"):
        code, path = entry[:2], entry[3:]
        if not path.startswith(prefix) or path.startswith(f"{prefix}.aiwg/"):
            continue
        kind: ChangeKind = (
            "created" if code in ("??", "A ") else "deleted" if "D" in code else "modified"
        )
        changes.append(FileChange(path, kind, 0, 0, ""))

    def original(path: str) -> bytes | None:
        found, blob, _ = git.run("cat-file", "blob", f"HEAD:{path}", check=False)
        return blob if found == 0 else None

    rule = ProtectedTests.of(baseline)
    if baseline is None:
        rule = ProtectedTests.named(
            c.path[len(prefix) :]
            for c in changes
            if c.kind != "created" and TEST_NAME.match(posixpath.basename(c.path))
        )
    return [c.path[len(prefix) :] for c in rule.edits(changes, prefix, original, root)]


def edits_reason(edited: list[str], block: int, max_blocks: int) -> str:
    """What Claude reads when the tests or their harness were edited."""
    lines = [
        f"ralph: you changed the tests or the test harness: {', '.join(edited)}. The checks "
        "judge the code against the tests as they were; put these files back as they were "
        "and fix the code instead (a test that is wrong is for a person to change).",
        f"(stop blocked {block} of at most {plural(max_blocks, 'time')} in a row)",
    ]
    return strip_escapes(redact("\n".join(lines)))


def tree_baseline(store: MemoryStore, root: Path) -> Baseline | None:
    """The baseline of the newest loop that worked in `root` and kept one; None: none did."""
    for listing in reversed(store.list_loops()):
        state = listing.state
        if state is None:
            continue
        where = state.git.worktree if state.git is not None else None
        tree = Path(where).resolve() if where else store.root
        if tree != root.resolve():
            continue
        data = store.read_baseline(listing.loop_id)
        if data is not None:
            return Baseline.from_json(data)
    return None


# --- the count of consecutive blocks ------------------------------------------------------------
def _counter(store: MemoryStore) -> Path:
    return private_tmp(store.root) / COUNTER_FILE


def _read_count(store: MemoryStore, hook: HookInput) -> int:
    try:
        data = json.loads(_counter(store).read_text("utf-8"))
    except (OSError, ValueError):
        return 0
    if not isinstance(data, dict) or data.get("session_id") != hook.session_id:
        return 0
    blocks = data.get("blocks")
    return blocks if isinstance(blocks, int) and not isinstance(blocks, bool) else 0


def _write_count(store: MemoryStore, hook: HookInput, blocks: int) -> None:
    atomic_write_json(_counter(store), {"session_id": hook.session_id, "blocks": blocks})


# --- installing it -----------------------------------------------------------------------------
def install_claude(project: Path, command: str = HOOK_COMMAND) -> tuple[Path, bool]:
    """Add the Stop hook to `<project>/.claude/settings.json`, merged with what is there;
    returns the file and whether it changed (installed twice: no change)."""
    path = project / ".claude" / "settings.json"
    data: Any = {}
    if path.exists():
        try:
            data = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{path}: cannot read it as JSON ({exc}); not changed") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: not a JSON object; not changed")
    hooks = data.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise ConfigError(f"{path}: `hooks` is not an object; not changed")
    stop = hooks.setdefault("Stop", [])
    if not isinstance(stop, list):
        raise ConfigError(f"{path}: `hooks.Stop` is not a list; not changed")
    for group in stop:
        for hook in group.get("hooks") or [] if isinstance(group, dict) else []:
            if isinstance(hook, dict) and hook.get("command") == command:
                return path, False
    stop.append({"hooks": [{"type": "command", "command": command, "timeout": HOOK_TIMEOUT}]})
    mode = path.stat().st_mode & 0o777 if path.exists() else None
    # the user's own file: written as it was read (no redaction of their values), mode kept
    write_atomically(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n", mode=mode)
    return path, True
