"""The working tree the actor changes: git (branch, one commit per iteration, rollback, worktrees)
or snapshots without git.
"""
