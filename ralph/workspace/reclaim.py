"""What an agent's own git commands did to the loop's branch and HEAD, undone: the branch put
back where ralph's last commit left it and checked out again, the files left as they are."""

from __future__ import annotations

from ralph.workspace.trees import Trees


def reclaim(trees: Trees, branch: str | None, expected: str | None) -> list[str]:
    """Put `branch` back at `expected` (ralph's last commit on it) and check it out again,
    leaving the files as they are; returns what had moved, one sentence each.

    An agent may run `git commit`, `git reset --hard`, `git checkout main` or delete the
    loop branch. Its commits would otherwise sit under ralph's (or break `update-ref`), and
    a reset could drop iterations the state still names. The files stay as the agent left
    them: they are the attempt, diffed and committed like any other change.
    """
    if branch is None or expected is None:
        return []
    git = trees.git
    ref = f"refs/heads/{branch}"
    status, out, _ = git.run("rev-parse", "HEAD", "--symbolic-full-name", "HEAD", check=False)
    if status == 0 and out.decode().split() == [expected, ref]:
        return []  # one git call when nothing moved, the usual case
    at = git.rev(ref)
    current = git.run("symbolic-ref", "-q", "HEAD", check=False)[1].decode().strip()
    moves = []
    if at is None:
        moves.append(f"the agent deleted the loop branch {branch}")
    elif at != expected:
        if git.ok("merge-base", "--is-ancestor", expected, at):
            what = f"committed on {branch} ({at[:12]})"
        else:
            what = f"moved {branch} to {at[:12]} (a reset)"
        moves.append(f"the agent {what}")
    if current != ref:
        where = current.removeprefix("refs/heads/") or f"a detached HEAD ({git.rev('HEAD')})"
        moves.append(f"the agent checked out {where}")
    if not moves:
        return []
    git.run("update-ref", "-m", "ralph: the loop branch put back", ref, expected)
    git.run("symbolic-ref", "HEAD", ref)
    git.run("reset", "-q", "--", ".", trees.exclude)  # the index mirrors HEAD again
    kept = "ralph put its branch back at " + expected[:12] + " and kept the files as they are"
    return [f"{'; '.join(moves)}: {kept}"]
