"""What git ignored when a loop started, kept as one exclude file for the loop's whole life.

An agent may edit or delete `.gitignore`; the user's ignored files (`.env` with a key, local
notes) must still never be committed on the loop branch, so a rollback never deletes them. At
loop start the ignore rules (the global excludes file, `info/exclude`, every `.gitignore`,
rebased onto the top of the work tree) and, last so no later rule re-includes them, the paths
git ignored then, are written to `<git dir>/ralph/<loop-id>/exclude`: in the git directory, so
no commit can hold it and `resume` finds it again. ralph's own git commands read it as
`core.excludesFile` (`config_env`), and `GitWorkspace` takes out of each commit what matches it
anyway (an agent's `!pattern` or `git add -f`). The untracked, unignored files present at the
start are listed there too (`untracked_at_start`): they are the user's, so a loop starts with
them present, never commits them, and a rollback never removes them; a file the agent creates
later is not listed, and is the loop's work.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePosixPath

from ralph.files import write_atomically
from ralph.workspace.tree_walk import TOOL_RULES, is_tool_file

MAX_LISTED = 2000  # untracked files listed one by one; beyond, wholly untracked folders whole
Names = Callable[..., list[str]]  # Git.names: NUL-separated output of a git command
HEADER = (
    "# ralph: what git ignored when this loop started (rules, then the ignored paths), "
    "then the untracked files that were there\n"
)


def exclude_path(git_dir_path: Callable[[str], Path], loop_id: str) -> Path:
    """Where the loop's exclude file lives (`git rev-parse --git-path`, per worktree)."""
    return git_dir_path(f"ralph/{loop_id}/exclude")


def write_snapshot(
    path: Path, top: Path, names: Names, sources: list[Path], users: Sequence[str] = ()
) -> None:
    """Record what tools keep for themselves (`tree_walk.TOOL_RULES`: no `git add -A` of
    ralph's picks up a bytecode file), the ignore rules of `sources` and of every
    `.gitignore`, then the ignored paths, then `users`: the untracked files that were there
    when the loop started (a notes file, the user's agent script), which stay the user's."""
    lines = [HEADER, *(f"{rule}\n" for rule in TOOL_RULES)]  # tools' own files: never work
    for source in sources:
        lines += _rules(source, "")
    gitignores = names(
        "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--",
        ":(glob)**/.gitignore",
    )  # fmt: skip
    for name in sorted(set(gitignores), key=lambda n: (n.count("/"), n)):
        parent = PurePosixPath(name).parent.as_posix()
        lines += _rules(top / name, "" if parent == "." else parent)
    entries = names("status", "--porcelain", "-z", "--ignored=matching", "--untracked-files=normal")
    lines += [literal(entry[3:]) + "\n" for entry in entries if entry.startswith("!! ")]
    lines += [literal(name) + "\n" for name in users]
    write_atomically(path, "".join(line for line in lines if _encodable(line)))


def config_env(path: Path, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Git's environment that makes `path` the excludes file (after any the user set there)."""
    env = os.environ if environ is None else environ
    try:
        count = int(env.get("GIT_CONFIG_COUNT", "0"))
    except ValueError:
        count = 0
    return {
        "GIT_CONFIG_COUNT": str(count + 1),
        f"GIT_CONFIG_KEY_{count}": "core.excludesFile",
        f"GIT_CONFIG_VALUE_{count}": str(path),
    }


def rebase(pattern: str, directory: str) -> str | None:
    """A `.gitignore` line of `directory` as the same rule read from the top of the work tree;
    None for a blank line or a comment. A pattern with a slash before its end is anchored to
    its directory; one without matches at any depth below it."""
    line = pattern.rstrip("\n").rstrip("\r")
    if not line.strip() or line.startswith("#"):
        return None
    negate = line.startswith("!")
    body = line[1:] if negate else line
    if not directory:
        rule = body
    elif "/" in body.rstrip("/"):
        rule = f"/{_escaped(directory)}/{body.lstrip('/')}"
    else:
        rule = f"/{_escaped(directory)}/**/{body}"
    return ("!" if negate else "") + rule


def literal(path: str) -> str:
    """An anchored pattern that matches exactly `path` (`dir/` for a directory)."""
    directory = path.endswith("/")
    name = _escaped(path.rstrip("/"))
    if name.endswith(" "):  # git strips unescaped trailing spaces
        stripped = name.rstrip(" ")
        name = stripped + "\\ " * (len(name) - len(stripped))
    return "/" + name + ("/" if directory else "")


def _escaped(text: str) -> str:
    return "".join("\\" + c if c in "\\*?[" else c for c in text)


def _encodable(line: str) -> bool:
    """A line that is not UTF-8 (a name git read as bytes) cannot be written: left out."""
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _rules(source: Path, directory: str) -> list[str]:
    try:
        text = source.read_text(encoding="utf-8", errors="surrogateescape")
    except OSError:  # absent or unreadable: git reads no rule from it either
        return []
    rules = (rebase(line, directory) for line in text.splitlines())
    return [rule + "\n" for rule in rules if rule is not None]


def global_sources(config_path: str, xdg: str | None, home: str | None) -> list[Path]:
    """The user's global excludes file: `core.excludesFile`, else git's XDG default."""
    if config_path:
        return [Path(config_path).expanduser()]
    if xdg:
        return [Path(xdg) / "git" / "ignore"]
    return [Path(home) / ".config" / "git" / "ignore"] if home else []


def untracked_at_start(names: Names, exclude: str) -> list[str]:
    """The untracked files git does not ignore, one by one (`exclude`: ralph's memory, as a
    pathspec), but not what tools keep for themselves (already among the rules). Beyond
    `MAX_LISTED` files (git matches every path against every line), a folder wholly untracked
    is one line (`dir/`), so a file the agent adds there stays out of the loop's commits too."""
    query = ("ls-files", "-z", "--others", "--exclude-standard")
    found = names(*query, "--", ".", exclude)
    if len(found) > MAX_LISTED:
        found = names(*query, "--directory", "--no-empty-directory", "--", ".", exclude)
    return [name for name in found if not is_tool_file(name)]
