"""A command ralph prints for a person to copy pastes as one at 80 columns: every wrapped line
of it ends with ` \\`, a quoted argument is never cut, and a comment after it is never the
start of a line a shell would run (trial 3: the `memory` line broke after `--`, and pasting its
first line committed the staged fix under the wrong message). And the other lines trial 3 saw
cut mid-word or at column 0 (prune, errors and hints, `ralph check`'s diagnostics) wrap between
words under their indent on a terminal, whole in a pipe; apply's help says what it does."""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from ralph.cli.diagnosis import Row
from ralph.cli.live import RichReporter, next_steps
from ralph.loop.handoff import ApplyOutcome
from ralph.loop.result import LoopResult
from ralph.memory.shown import ShownRecord
from tests.fakes.records import record

LOOP_ID = "ralph-fix-the-failing-prerelease-comparison-te-efdb735b"
BRANCH = "ralph/fix-the-failing-prerelease-comparison-te-efdb735b"
MEMORY = (
    'git add .aiwg/ralph/reflections && git commit -m "ralph: reflections" -- '
    ".aiwg/ralph/reflections"
)


def drawn(draw: Callable[[Console], Any], *, terminal: bool) -> list[str]:
    out = io.StringIO()
    draw(Console(file=out, force_terminal=terminal, width=80, color_system=None))
    return out.getvalue().splitlines()


def printed(result: Any, *, terminal: bool) -> list[str]:
    return drawn(lambda console: console.print(result, crop=False), terminal=terminal)


def pasted(lines: list[str]) -> list[str]:
    """The lines as a shell reads them: a line ending in ` \\` goes on with the next."""
    joined: list[str] = []
    carried = ""
    for line in lines:
        if line.endswith(" \\"):
            carried += line[:-1]
        else:
            joined.append(carried + line)
            carried = ""
    return joined


def assert_copies_whole(
    draw: Callable[[Console], Any], commands: list[str], comments: tuple[str, ...] = ()
) -> None:
    """Each command, wrapped at 80 columns, pastes as the one a pipe prints whole; each comment
    is on the command's line (when both fit) or on lines that all start with `#`."""
    piped = drawn(draw, terminal=False)
    lines = drawn(draw, terminal=True)
    assert all(len(line) <= 80 for line in lines), lines
    assert lines != piped, "nothing was long enough to wrap"
    shell = [" ".join(line.split()) for line in pasted(lines)]
    for command in commands:
        assert any(command in line for line in piped), piped  # whole in a pipe
        assert any(line.endswith(command) or f"{command} #" in line for line in shell), (
            command,
            lines,
        )
        for quoted in re.findall(r'"[^"]*"', command):  # a break inside quotes would change it
            assert any(quoted in line for line in lines), (quoted, lines)
    for comment in comments:
        last = comment.split()[-1]
        holding = [line for line in lines if last in line.split()]
        assert holding, (comment, lines)
        for line in holding:  # the shell reads it as a comment, never runs `needs`
            assert "#" in line.partition(last)[0], (comment, lines)


def finished(**changes: Any) -> LoopResult:
    fields: dict[str, Any] = dict(
        loop_id=LOOP_ID, status="completed", stop_reason="success", exit_code=0, iterations=2,
        best_iteration=1, best_reward=1.0, reward_history=[0.06, 1.0], usage={},
        reflections_dir="r", branch=BRANCH, base_branch="main", base_commit="a" * 40,
        best_commit="b" * 40, baseline_reward=0.1, changed_files=None, memory_hint=MEMORY,
    )  # fmt: skip
    return LoopResult(**{**fields, **changes})


def test_the_run_s_final_commands_paste_whole_and_the_memory_line_keeps_its_pathspec() -> None:
    def run(console: Console) -> None:
        RichReporter(console).loop_finished(finished())

    assert_copies_whole(
        run,
        [
            f"git switch main && ralph apply {LOOP_ID}",
            f"git merge --squash {'b' * 12}",
            "ralph prune",
            MEMORY,
        ],
        ("removes finished loops' branches, keeps records",),
    )
    lines = drawn(run, terminal=True)
    memory = next(n for n, line in enumerate(lines) if line.startswith("memory  "))
    assert lines[memory].endswith(" \\"), lines  # `--` alone would commit the staged fix too


def test_a_failed_loop_s_apply_says_force_in_a_comment_a_shell_never_runs() -> None:
    def run(console: Console) -> None:
        RichReporter(console).loop_finished(finished(status="failed", stop_reason="limit"))

    assert_copies_whole(
        run, [f"ralph apply {LOOP_ID} --force", MEMORY], ("it still fails its checks",)
    )


def test_apply_s_commands_paste_whole() -> None:
    done = ApplyOutcome(LOOP_ID, 2, "d" * 40, BRANCH, ["src/a.py"], [], True, MEMORY)
    assert_copies_whole(
        lambda console: console.print(done, crop=False),
        ["git diff --cached", "git commit", MEMORY],
        ("ralph's summary of the loop, in git's SQUASH_MSG",),
    )


def test_init_s_comment_after_ralph_run_is_never_a_line_a_shell_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ralph.cli import project
    from ralph.errors import RalphError
    from ralph.memory.store import MemoryStore

    def no_actor(**_: Any) -> Any:
        raise RalphError("no actor")

    monkeypatch.setattr("ralph.actors.registry.auto_actor", no_actor)
    deep = tmp_path / "projects" / "a-library-with-a-long-name"
    deep.mkdir(parents=True)
    store = MemoryStore(deep)
    monkeypatch.chdir(tmp_path)

    def init(console: Console) -> None:
        project._next_steps(console, store, store.base / "config.yaml")

    assert_copies_whole(
        init,
        ['ralph run "TASK"', 'git commit -m "ralph init"'],
        ("no actor found yet: `ralph doctor` says what each one needs",),
    )
    assert '  ralph run "TASK"' in drawn(init, terminal=True)  # alone: it runs as it is


def test_reflections_show_s_trace_command_pastes_whole() -> None:
    shown = ShownRecord(record(1), f"trace (0 steps): ralph trace {LOOP_ID} 1", None, None)
    assert_copies_whole(
        lambda console: console.print(shown, crop=False), [f"ralph trace {LOOP_ID} 1"]
    )


def test_a_quoted_argument_is_never_cut_where_a_break_would_put_the_indent_into_it() -> None:
    from ralph.rendering import Wrapped

    command = 'ralph run "fix the failing prerelease comparison tests" -a cmd:./agent.sh'
    for width in (50, 60):
        out = io.StringIO()
        Console(file=out, force_terminal=True, width=width, color_system=None).print(
            Wrapped(command, hang=4, shell=True), crop=False
        )
        lines = out.getvalue().splitlines()
        quoted = '"fix the failing prerelease comparison tests"'
        assert len(lines) > 1 and any(quoted in line for line in lines), lines
        assert " ".join(" ".join(pasted(lines)).split()) == command, lines


def test_prune_wraps_between_words_under_its_indent_at_80_columns_and_says_its_records() -> None:
    from ralph.loop.handoff import Pruned, PruneItem

    item = PruneItem(LOOP_ID, "completed", "2026-01-01", branch=BRANCH, branch_commit="b9" * 20)
    records = Path("/work/trial3/semver-tty/.aiwg/ralph/reflections")
    for dry_run in (True, False):
        pruned = Pruned(dry_run, [item], records)
        lines = printed(pruned, terminal=True)
        assert all(len(line) <= 80 for line in lines) and len(lines) > 2, lines
        assert all(line.startswith("  ") for line in lines[1:2]), lines  # its indent kept
        assert "b9b9b9b9b9b9)" in " ".join(lines).split(), lines
        assert dry_run or lines[-1] == f"  {records}", lines
        piped = printed(pruned, terminal=False)
        assert " ".join(lines).split() == " ".join(piped).split()  # no word cut, none lost
    assert piped[-1] == f"1 loop pruned; its records stay in {records}"
    two = Pruned(False, [item, item], records)
    said = printed(two, terminal=False)[-1]
    assert said.startswith("2 loops pruned; their records stay"), said


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("terminal", [True, False])
def test_an_error_and_its_hint_wrap_between_words_on_a_terminal_and_stay_whole_in_a_pipe(
    monkeypatch: pytest.MonkeyPatch, terminal: bool
) -> None:
    from ralph.cli import app
    from ralph.errors import PreflightError

    err = Tty() if terminal else io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)
    error = PreflightError(
        f"loop {LOOP_ID} is already completed",
        hint="commit or unstage them first (git restore --staged): apply stages the loop's work "
        "for a commit of its own",
    )
    with pytest.raises(SystemExit) as exit_:
        app.fail(error)
    assert exit_.value.code == 2
    lines = err.getvalue().splitlines()
    whole = [f"ralph: error: {error.message}", f"hint: {error.hint}"]
    if not terminal:
        assert lines == whole
        return
    assert all(len(line) <= 80 for line in lines) and len(lines) == 4, lines
    assert lines[1] == "  already completed" and lines[3].startswith("  "), lines
    assert " ".join(lines).split() == " ".join(whole).split()  # no word cut, none lost


def test_ralph_check_s_diagnostics_wrap_under_their_indent_at_80_columns() -> None:
    from types import SimpleNamespace

    from ralph.cli.check_view import CheckReport
    from ralph.records import Diagnostic

    message = "Import block is un-sorted or un-formatted (fixable: ruff check --fix)"
    error = Diagnostic("lint", message, file="docs/advanced/coerce.py", line=1, rule="I001")
    evaluation: Any = SimpleNamespace(
        outcomes=[], output=SimpleNamespace(errors=[error]), passed=False, reward=0.5
    )
    lines = printed(CheckReport(evaluation), terminal=True)
    start = next(n for n, line in enumerate(lines) if "coerce.py:1" in line)
    assert lines[start].startswith("  docs/advanced/coerce.py:1  Import block"), lines
    assert lines[start + 1].startswith("    ") and "[I001]" in lines[start + 1], lines
    assert all(len(line) <= 80 for line in lines), lines


def test_apply_s_help_says_it_merges_the_edits_the_loop_started_from() -> None:
    """Trial 3: the help said apply refuses uncommitted changes to a file the loop changed; with
    `--allow-dirty` it merges the edit the loop started from (the file ends `MM`)."""
    from ralph.cli.finish import apply

    said = " ".join((apply.__doc__ or "").split())
    assert "(--allow-dirty) are merged with its work" in said
    assert "Refuses staged changes, any other uncommitted change to a file the loop" in said


def test_the_command_that_gives_a_user_s_work_back_is_on_a_line_of_its_own_that_pastes() -> None:
    """`--allow-dirty`'s note and `yours` line end with the command that brings the user's work
    back: wrapped as prose, its `git stash apply` could start a line of its own."""
    note = (
        "your uncommitted changes on main are saved as they were (staged, unstaged, untracked) "
        "in `git stash list`; the loop gives them back when it ends, or: git switch main && "
        "git stash apply --index 73ffcaa4f929"
    )
    command = "git switch main && git stash apply --index 73ffcaa4f929"

    def run(console: Console) -> None:
        reporter = RichReporter(console)
        reporter.note(note)
        reporter.block(f"yours   {note}")

    assert_copies_whole(run, [command])
    lines = drawn(run, terminal=True)
    assert f"  {command}" in lines and f"        {command}" in lines, lines
    short = drawn(
        lambda c: RichReporter(c).block("yours   to get them back: git switch a"), terminal=True
    )
    assert short == ["yours   to get them back: git switch a"]  # one line while it fits


def test_the_way_back_of_a_loop_that_did_no_better_pastes_whole() -> None:
    base = "feature/prerelease-ordering-of-long-numeric-identifiers-compared"
    unchanged = finished(
        status="aborted", stop_reason="aborted by user", best_reward=0.06, base_branch=base
    )
    assert_copies_whole(
        lambda console: RichReporter(console).loop_finished(unchanged), [f"git switch {base}"]
    )


@pytest.mark.parametrize("improved", [True, False])
def test_a_loop_started_on_a_detached_head_switches_back_with_detach(improved: bool) -> None:
    """`git switch <sha>` is refused by git ("a branch is expected"): the way back to a
    detached start says --detach."""
    result = finished(base_branch=None, best_reward=1.0 if improved else 0.1)
    lines = next_steps(result)
    back = f"git switch --detach {'a' * 12}"
    assert any(back in line for line in lines), lines
    assert not any("git switch aaaa" in line for line in lines), lines


def test_doctor_s_install_commands_paste_whole_in_its_table_and_when_stacked() -> None:
    from types import SimpleNamespace

    from ralph.actors.agents import PRESETS
    from ralph.cli.diagnosis import Diagnosis
    from ralph.cli.doctor import _agent_row

    rows = [
        _agent_row(SimpleNamespace(path=None, name=name, install=PRESETS[name].install))
        for name in ("opencode", "claude", "codex")
    ]
    long_path = "/opt/tools/" + "nested/" * 7 + "bin/python"  # leaves no room for the table
    stacked = [*rows, Row("check", "mypy", "pass, guard", f"passes (1.0s); {long_path} -m mypy")]
    installs = [
        "npm install -g opencode-ai",
        "curl -fsSL https://opencode.ai/install | bash",
        "npm install -g @anthropic-ai/claude-code",
        "npm install -g @openai/codex",
        "brew install codex",
    ]

    def doctor(found: list[Row]) -> Callable[[Console], Any]:
        return lambda console: console.print(Diagnosis.of(found), crop=False)

    assert_copies_whole(doctor(rows), installs)
    assert_copies_whole(doctor(stacked), installs)
    assert any(line.startswith(" agent ") for line in printed(Diagnosis.of(rows), terminal=True))
    narrow = printed(Diagnosis.of(stacked), terminal=True)
    assert "    npm install -g opencode-ai" in narrow, narrow  # stacked, not a table


def test_the_batch_summary_on_a_terminal_wraps_its_apply_commands_to_paste_whole() -> None:
    from rich.live import Live

    from ralph.cli.batch_view import LiveView
    from ralph.loop.batch import Entry
    from ralph.loop.tasks_file import BatchTask

    calc = [{"path": "calc.py", "added": 1, "removed": 1}]
    done = Entry(BatchTask("prerelease", "fix it"), LOOP_ID, status="completed")
    failed = Entry(BatchTask("prerelease-too", "fix it"), f"{LOOP_ID}2", status="failed")
    for entry in (done, failed):
        entry.branch, entry.changed_files, entry.changes_read = BRANCH, calc, True

    def end(console: Console) -> None:
        view = LiveView()
        view.console, view.live = console, Live(console=console)
        view.entries = [done, failed]
        view.end([done, failed])

    commands = [f"ralph apply {LOOP_ID}", f"ralph apply {LOOP_ID}2 --force"]
    assert_copies_whole(end, commands)
    lines = drawn(end, terminal=True)
    assert not any(re.match(r"\d\d:\d\d:\d\d ", line) for line in lines), lines
    assert lines[-1] == "batch: 1/2 loops green"
