"""Results render themselves: one JSON form (`rendering.to_data`), `__rich_console__` on a
terminal or a pipe, and the CLI only choosing between them (`cli/common.show`)."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
from rich.console import Console

from ralph.cli.common import show
from ralph.loop.result import LoopResult, LoopStatus
from ralph.memory.listing import InvalidIteration, IterationList, IterationRow, LoopList, LoopRow
from ralph.memory.shown import RecordView, ShownRecord
from ralph.memory.validation import Validation
from ralph.records import CheckResult
from ralph.rendering import Rows, to_data
from ralph.workspace.branches import ChangedFile
from tests.fakes.records import record


def drawn(result: Any, *, terminal: bool = False, width: int = 200) -> str:
    out = io.StringIO()
    console = Console(file=out, force_terminal=terminal, width=width, color_system=None)
    console.print(result, crop=False)  # as cli/common.show prints
    return out.getvalue()


@dataclass
class Inner:
    path: Path
    pair: tuple[int, int]


@dataclass
class Outer:
    json_fields: ClassVar[tuple[str, ...]] = ("b", "inner")
    a: str
    b: int
    inner: list[Inner]


def test_the_json_form_follows_json_fields_and_nests() -> None:
    data = to_data(Outer("left out", 2, [Inner(Path("x/y"), (1, 2))]))
    assert json.dumps(data) == '{"b": 2, "inner": [{"path": "x/y", "pair": [1, 2]}]}'


def status(**changes: Any) -> LoopStatus:
    fields: dict[str, Any] = dict(
        loop_id="ralph-1", task="fix [bold]it[/]", status="failed", stop_reason="limit",
        iteration=2, max_iterations=5, best_iteration=1, best_reward=0.5, baseline_reward=0.25,
        reward_history=[0.5, 0.4], usage={"tokens_in": 10, "tokens_out": 5, "cost_usd": 0.01},
        branch="ralph/ralph-1", base_branch="main", base_commit="a" * 40,
        best_commit="b" * 40, worktree=None, changed_files=[ChangedFile("a.py", 1, 2)],
        created_at="2026-01-01T00:00:00Z", updated_at="2026-01-01T00:01:00Z",
    )  # fmt: skip
    return LoopStatus(**{**fields, **changes})


def test_a_status_draws_itself_with_its_text_taken_literally() -> None:
    assert drawn(status()).splitlines() == [
        "ralph-1  failed",
        "  task        fix [bold]it[/]",
        "  iteration   2/5  best 0.50",
        "  rewards     ▅▄ [0.5, 0.4]",
        "  usage       10 in / 5 out tokens, cost $0.0100",
        f"  branch      ralph/ralph-1 (best commit {'b' * 12})",
        "  changed     1 file: a.py +1 -2",
        "  stopped     limit",
    ]
    assert "none yet" in drawn(status(iteration=0, usage={}))


def test_the_status_json_form_keeps_its_keys_in_order() -> None:
    assert list(to_data(status())) == [
        "loop_id", "task", "status", "stop_reason", "iteration", "max_iterations",
        "best_iteration", "best_reward", "baseline_reward", "reward_history", "usage", "branch",
        "base_branch", "base_commit", "best_commit", "worktree", "changed_files", "created_at",
        "updated_at", "worse", "pruned", "waiting_until", "waiting_for",
    ]  # fmt: skip
    assert to_data(status())["changed_files"] == [{"path": "a.py", "added": 1, "removed": 2}]


def test_a_loop_result_prints_what_run_json_always_printed() -> None:
    result = LoopResult(
        "ralph-1", "completed", "success", 0, 1, 1, 1.0, [1.0], {}, "dir",
        message="not in the JSON", worktree="/w", baseline_reward=0.5, changed_files=None,
    )  # fmt: skip
    data = to_data(result)
    assert list(data)[:4] == ["loop_id", "status", "stop_reason", "iterations"]
    assert "message" not in data and "worktree" not in data and "baseline_reward" not in data
    assert data["exit_code"] == 0 and data["changed_files"] is None


def test_listings_are_tab_separated_lines_off_a_terminal_at_any_width(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "20")  # a pipe must not get its rows cut at the width
    task = "a task long enough to pass any narrow terminal width"
    show(LoopList([LoopRow("ralph-1", task, "completed", 2, 1.0, "2026-01-01T00:00:00Z", None)]))
    assert capsys.readouterr().out.splitlines() == [
        "loop\ttask\tstatus\titer\tbest\tupdated",
        f"ralph-1\t{task}\tcompleted\t2\t1.00\t2026-01-01 00:00:00",
    ]


def test_a_listing_json_form_is_its_rows(capsys: pytest.CaptureFixture[str]) -> None:
    rows = IterationList(
        "ralph-1",
        [
            IterationRow(1, True, False, 0.5, None, "cause", "I failed."),
            InvalidIteration(2, False, "not JSON"),
        ],
    )
    show(rows, as_json=True)
    assert json.loads(capsys.readouterr().out) == [
        {
            "iteration": 1,
            "valid": True,
            "passed": False,
            "reward": 0.5,
            "failure_category": None,
            "root_cause": "cause",
            "reflection": "I failed.",
        },
        {"iteration": 2, "valid": False, "problem": "not JSON"},
    ]


def test_an_empty_listing_says_how_to_start() -> None:
    assert drawn(LoopList()) == 'no loops yet: start one with `ralph run "TASK"`\n'


def test_a_terminal_gets_a_table() -> None:
    text = drawn(Rows("loops", ["loop", "task"], [["ralph-1", "[red]x[/]"]]), terminal=True)
    assert "loops" in text and "[red]x[/]" in text and "\t" not in text


def test_a_record_shows_a_check_name_with_brackets_as_written() -> None:
    rec = record(1)
    rec.evaluator_output.results = [CheckResult(tool="[bold]lint[/]", status="fail")]
    assert "  [bold]lint[/]: fail" in drawn(RecordView(rec)).splitlines()


def test_show_adds_what_the_memory_knows() -> None:
    text = drawn(ShownRecord(record(1), "trace: ralph trace ralph-fake-1 1", "accepted", None))
    lines = text.splitlines()
    assert lines[0].startswith("ralph-fake-1 iteration 1  failed  reward 0.50")
    assert lines[-2:] == ["trace: ralph trace ralph-fake-1 1", "accepted"]


def test_a_validation_counts_and_exits_1_when_a_file_is_invalid() -> None:
    bad = Validation([Path("a.json"), Path("b.json")], {Path("b.json"): ["$: broken"]})
    assert drawn(bad).splitlines() == [
        "invalid b.json",
        "  $: broken",
        "1 valid, 1 invalid (2 files)",
    ]
    assert bad.exit_code == 1 and Validation([Path("a.json")]).exit_code == 0


def test_a_doctor_diagnosis_prints_ok_then_its_findings(capsys: pytest.CaptureFixture[str]) -> None:
    from ralph.cli.diagnosis import Diagnosis, Row

    diagnosis = Diagnosis.of([Row("git", "repository", "dirty", "a.py", False, "commit")])
    show(diagnosis, as_json=True)
    finding = {"area": "git", "name": "repository", "status": "dirty", "ok": False}
    expected = {**finding, "detail": "a.py", "hint": "commit"}
    assert (
        capsys.readouterr().out
        == json.dumps({"ok": False, "findings": [expected]}, indent=2) + "\n"
    )


def test_a_hint_wraps_between_words_on_a_terminal_never_inside_one() -> None:
    """doctor's final hint was one 163-character line the terminal split anywhere."""
    from ralph.cli.diagnosis import Diagnosis, Row

    hint = "run `ralph init` to detect them, or pass --test CMD / --check NAME|CMD " * 2
    for width in (80, 60, 40):
        out = io.StringIO()
        console = Console(file=out, force_terminal=True, width=width, color_system=None)
        console.print(Diagnosis.of([Row("check", "-", "none", "none", False, hint)]), crop=False)
        lines = out.getvalue().splitlines()
        start = next(n for n, line in enumerate(lines) if line.startswith("check -: "))
        hinted = lines[start : lines.index("a loop cannot start here: check -")]
        assert len(hinted) > 1 and all(len(line) <= width for line in hinted), hinted
        assert " ".join(hinted).split() == f"check -: {hint}".split()  # no word cut
        assert all(line.startswith("  ") for line in hinted[1:]), hinted


def test_prune_shows_what_went_and_its_json_leaves_out_where_records_are() -> None:
    from ralph.loop.handoff import Pruned, PruneItem

    item = PruneItem("ralph-1", "failed", "2026-01-01", branch="ralph/1", branch_commit="c" * 40)
    pruned = Pruned(False, [item], Path("/m/reflections"))
    assert drawn(pruned).splitlines() == [
        f"removed branch ralph/1 (was {'c' * 12})  [ralph-1, failed]",
        "1 loop pruned; its records stay in /m/reflections",
    ]
    assert list(to_data(pruned)) == ["dry_run", "loops"]
    assert to_data(pruned)["loops"][0]["branch"] == "ralph/1"


def test_an_apply_with_conflicts_names_them_and_how_to_undo() -> None:
    from ralph.loop.handoff import ApplyOutcome

    done = ApplyOutcome("ralph-1", 2, "d" * 40, "ralph/1", ["a.py"], ["a.py"], accepted=False)
    assert drawn(done).splitlines() == [
        f"applied iteration 2 of ralph-1 ({'d' * 12}): 1 file, staged, not committed",
        "  a.py",
        "conflicts in a.py: resolve them and commit, or undo with `git reset --merge`",
    ]
    assert to_data(done)["conflicts"] == ["a.py"]


def test_an_import_report_draws_its_lines_as_written() -> None:
    from ralph.memory.transfer import ImportReport

    report = ImportReport(dry_run=True, added=[("ralph-1", 1, "ci/[red]run")])
    assert drawn(report, terminal=True, width=30).splitlines() == report.lines()
    assert report.lines()[0] == "would add ralph-1#1 (from ci/[red]run)"


def test_search_hits_show_relevance_against_the_best_and_say_when_none_match() -> None:
    from ralph.memory.listing import SearchResults
    from ralph.memory.search import Hit

    def hit(n: int, score: float) -> Hit:
        return Hit(f"ralph-{n}", 1, score, "t", None, 0.5, False, n == 2, "I failed.", "cause")

    lines = drawn(SearchResults("date", [hit(1, 2.0), hit(2, 1.0)])).splitlines()
    assert lines[1:] == [
        "100%\tralph-1#1\t-\t0.50\t0/0\tcause",
        "50%\tralph-2#1\t-\t0.50\t0/0\t[obsolete] cause",
    ]
    assert drawn(SearchResults("date", [])) == "no reflection matches 'date'\n"


def test_a_trace_draws_itself_and_names_an_error_only_when_there_is_one() -> None:
    from ralph.actors.trace import READ_STEPS, Step, Trajectory
    from ralph.cli.trace_view import TraceView

    steps = [Step(thought="look", tool="Read", target="a.py", observation="ok\nmore")]
    view = TraceView("ralph-1", 2, Trajectory("claude", steps))
    data = to_data(view)
    assert list(data) == ["loop_id", "iteration", "source", "steps", "dropped", "unparsed"]
    assert data["steps"] == [
        {"step": 1, "thought": "look", "tool": "Read", "target": "a.py", "observation": "ok\nmore"}
    ]
    stopped = TraceView("ralph-1", 2, Trajectory("claude", steps, error="bad line", unread=3))
    assert list(to_data(stopped))[-2:] == ["error", "unread"]
    assert drawn(stopped).splitlines() == [
        "ralph-1 iteration 2: 1 step (claude)",
        "  1          thought: look",
        "             Read: a.py",
        "             → ok",
        "parsing stopped: bad line",
        f"3 more lines not read: a trace shows at most {READ_STEPS} steps",
    ]


def test_a_batch_result_json_is_its_fields_with_every_loop() -> None:
    from ralph.loop.batch import BatchResult, Entry
    from ralph.loop.tasks_file import BatchTask

    entry = Entry(BatchTask("one", "fix it"), "ralph-one-1", status="completed", iteration=2)
    data = to_data(BatchResult(Path("tasks.yaml"), [entry], interrupted=False))
    assert list(data) == ["tasks_file", "interrupted", "exit_code", "loops"]
    assert data["tasks_file"] == "tasks.yaml" and data["exit_code"] == 0
    assert data["loops"] == [entry.to_json()] and data["loops"][0]["task"] == "fix it"


def test_a_dry_run_draws_what_it_looked_at_and_its_json_has_all_of_it() -> None:
    from types import SimpleNamespace

    from ralph.loop.preview import Preview

    nothing_checked: Any = SimpleNamespace(outcomes=[], baseline=None)
    preview = Preview("fix it", "claude", "claude -p", None, nothing_checked, ["a [note]"])
    data = to_data(preview)
    assert list(data) == [
        "task", "actor", "command", "checks", "already_green", "prompt", "notes", "sandbox"
    ]  # fmt: skip
    assert data["already_green"] is True and data["checks"] == []
    assert drawn(preview, width=20).splitlines() == [
        "actor    claude",
        "command  claude -p",
        "checks (baseline on the untouched tree):",
        "note: a [note]",
        "nothing to do: every check passes already, so there is nothing for the loop to fix: "
        "name what must change with --check NAME or --test CMD, or use --strict (the loop would "
        "end at once, exit 0, already_green)",
    ]


def test_doctor_at_80_columns_never_splits_a_variable_or_a_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ralph.cli.diagnosis import Diagnosis, Row

    path = "/home/someone/projects/app/.aiwg/ralph/config.yaml"
    rows = [
        Row("actor", 'cmd:"./scripts/agent.sh --fast"', "ok", f"set OPENAI_API_KEY; see {path}"),
        Row("provider", "openai", "not configured", "OPENAI_API_KEY is not set", None),
    ]
    monkeypatch.setenv("COLUMNS", "80")
    out = io.StringIO()
    Console(file=out, force_terminal=True, color_system=None).print(Diagnosis.of(rows), crop=False)
    lines = out.getvalue().splitlines()
    assert all(len(line) <= 80 for line in lines if path not in line), lines
    for word in ("OPENAI_API_KEY", path, 'cmd:"./scripts/agent.sh'):
        assert sum(word in line for line in lines) >= 1, (word, lines)
    assert sum("OPENAI_API_KEY" in line for line in lines) == 2, lines
    # where every word fits, it is still the table
    wide = io.StringIO()
    Console(file=wide, force_terminal=True, width=160, color_system=None).print(
        Diagnosis.of(rows), crop=False
    )
    assert "detail" in wide.getvalue().splitlines()[0]


def test_a_listing_never_cuts_a_loop_id_or_a_path_at_80_columns() -> None:
    loop = "ralph-fix-the-date-parser-for-iso-weeks-3f9a1c2e"
    path = "/home/someone/projects/app/.aiwg/ralph/reflections/x.json"
    listing = Rows("loops", ["loop", "task", "file"], [[loop, "fix the parser " * 3, path]])
    for width in (80, 120, 200):
        lines = drawn(listing, terminal=True, width=width).splitlines()
        assert any(loop in line for line in lines), (width, lines)
        assert any(path in line for line in lines), (width, lines)
    # where the words fit, still the table: the header row names every column
    wide = drawn(listing, terminal=True, width=200).splitlines()
    assert any(line.split() == ["loop", "task", "file"] for line in wide), wide


def test_a_short_column_such_as_a_date_stays_on_one_line() -> None:
    """humanize's memory at 140 columns: `2026-11-26` above `07:26:31` in every row, while the
    long task column had room to wrap instead."""
    loop = "ralph-fix-the-failing-ordinal-and-naturalsize-291c6b36"
    row = [loop, "fix the failing ordinal and naturalsize tests", "failed", "2026-11-26 07:23:34"]
    listing = Rows("loops", ["loop", "task", "status", "updated"], [row])
    lines = drawn(listing, terminal=True, width=120).splitlines()
    assert any("2026-11-26 07:23:34" in line for line in lines), lines
    assert any(loop in line for line in lines), lines


LOOP_ID = "ralph-fix-the-failing-typedkey-tests-in-src-ca-50a704ae"
WORKTREE = "/work/trial2/cachetools/.git/ralph-worktrees/ralph-fix-typedkey-again-7e49599c"


def test_a_long_line_wraps_between_words_keeping_its_indent_at_80_and_60_columns() -> None:
    from ralph.rendering import Wrapped

    hint = (
        "actor auto: install one of claude, codex, aider, gemini, opencode; or set "
        'OPENAI_API_KEY, ANTHROPIC_API_KEY or OLLAMA_HOST; or pass --actor (e.g. cmd:"./a.sh")'
    )
    for width in (80, 60):
        lines = drawn(Wrapped(f"    {hint}"), terminal=True, width=width).splitlines()
        assert len(lines) > 1 and all(len(line) <= width for line in lines), lines
        assert all(line.startswith("      ") for line in lines[1:]), lines  # its indent kept
        assert " ".join(" ".join(lines).split()) == hint  # every word whole, none lost
    # a pipe gets the line whole
    assert drawn(Wrapped(hint), width=20) == hint + "\n"


def test_a_command_wraps_with_a_continuation_and_a_word_too_long_for_any_line_stays_whole() -> None:
    from ralph.rendering import Wrapped

    command = f"apply   git switch main && ralph apply {LOOP_ID}"
    lines = drawn(Wrapped(command, hang=8, shell=True), terminal=True, width=80).splitlines()
    assert lines == ["apply   git switch main && ralph apply \\", f"        {LOOP_ID}"]
    status = f"  worktree    {WORKTREE}"
    assert drawn(Wrapped(status, hang=14), terminal=True, width=60).splitlines() == [status]


def test_status_of_a_worktree_loop_keeps_its_path_whole_under_its_label_at_80_and_60() -> None:
    task = "fix the failing typedkey tests in src/cachetools/keys.py and nothing else at all"
    shown = status(loop_id=LOOP_ID, worktree=WORKTREE, task=task)
    for width in (80, 60):
        lines = drawn(shown, terminal=True, width=width).splitlines()
        assert f"  worktree    {WORKTREE}" in lines, lines  # not cut, not at column 0
        start = lines.index(next(line for line in lines if line.startswith("  task ")))
        assert lines[start + 1].startswith(" " * 14), lines  # the task wraps under its value
        assert all(len(line) <= width for line in lines if WORKTREE not in line), lines


def test_apply_wraps_its_first_line_and_says_the_commit_message_is_prefilled() -> None:
    from ralph.loop.handoff import ApplyOutcome

    done = ApplyOutcome(LOOP_ID, 2, "d" * 40, "ralph/1", ["src/a.py"], [], accepted=True)
    lines = drawn(done, terminal=True, width=80).splitlines()
    assert all(len(line) <= 80 for line in lines), lines
    assert lines[0].startswith("applied iteration 2 of ") and LOOP_ID in lines[0] + lines[1]
    assert "prefilled" in " ".join(lines) and "SQUASH_MSG" in " ".join(lines)


def test_the_run_s_lines_wrap_at_words_and_keep_their_indent_at_80_columns() -> None:
    from types import SimpleNamespace

    from ralph.cli.live import RichReporter
    from ralph.records import Diagnostic

    out = io.StringIO()
    reporter = RichReporter(Console(file=out, force_terminal=True, width=80, color_system=None))
    message = (
        "AssertionError: (1.0,) unexpectedly found in Cache({(0,): 0, (1,): 1}, maxsize=3, "
        "currsize=2) [at tests/test_cached.py]"
    )
    error = Diagnostic("test_failure", message, file="tests/test_cached.py", line=65)
    evaluation: Any = SimpleNamespace(
        outcomes=[], baseline=None, reward=0.36, relevant_errors=lambda: [error]
    )
    reporter.evaluated(0, evaluation)
    reporter.note(f"working in the git worktree {WORKTREE}")
    reporter.block(f"apply   git switch main && ralph apply {LOOP_ID}")
    lines = out.getvalue().splitlines()
    failure = lines.index(next(line for line in lines if "tests/test_cached.py:65" in line))
    assert lines[failure].startswith("    tests/test_cached.py:65  AssertionError:"), lines
    assert lines[failure + 1].startswith("      ") and "[at tests/test_cached.py]" in out.getvalue()
    assert f"  {WORKTREE}" in lines, lines  # the path whole, indented under the note
    assert lines[-2:] == ["apply   git switch main && ralph apply \\", f"        {LOOP_ID}"]
    assert all(len(line) <= 80 for line in lines), lines


def test_a_shown_reflection_wraps_under_its_indent_at_80_columns() -> None:
    rec = record(1)
    words = "I changed typedkey in src/cachetools/keys.py but hashkey now appends the marker "
    rec.self_reflection.reflection_text = words * 3 + "\nNext I keep hashkey as it was."
    lines = drawn(RecordView(rec), terminal=True, width=80).splitlines()
    start = lines.index("reflection") + 1
    paragraph = lines[start : start + 5]
    assert all(line.startswith("  ") and len(line) <= 80 for line in paragraph), paragraph
    assert "  Next I keep hashkey as it was." in lines, lines


def test_a_listing_in_a_pipe_keeps_the_reflection_whole_and_a_terminal_clips_it() -> None:
    cause = "tests/test_cached.py:595: AssertionError: " + "{(0, <class 'cachetools'>): (0,)} " * 4
    rows = IterationList("ralph-1", [IterationRow(1, True, False, 0.1, "logic_error", cause, "")])
    piped = drawn(rows).splitlines()
    assert piped[1].split("\t")[-1] == cause.strip() and "…" not in piped[1]
    assert "…" in drawn(rows, terminal=True, width=200)


def test_search_leaves_out_hits_of_no_relevance_and_says_why() -> None:
    from ralph.memory.listing import SearchResults
    from ralph.memory.search import Hit

    def hit(n: int, score: float) -> Hit:
        return Hit(f"ralph-{n}", 1, score, "t", None, 0.5, False, False, "I failed.", "cause")

    lines = drawn(SearchResults("typedkey", [hit(1, 2.0), hit(2, 0.0001)]), terminal=True)
    assert any("ralph-1#1" in line for line in lines.splitlines())
    assert "ralph-2#1" not in lines and " 0%" not in lines
    assert "1 more hit left out" in lines
    common = drawn(SearchResults("typedkey", [hit(1, 0.0), hit(2, 0.0)]), terminal=True)
    assert "ralph-2#1" in common and "0%" not in common and "add a rarer word" in common


def test_init_s_next_steps_wrap_a_command_with_a_continuation_at_80_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ralph.cli.project import _next_steps
    from ralph.memory.store import MemoryStore

    deep = tmp_path / "projects" / "a-library-with-a-long-name"
    deep.mkdir(parents=True)
    store = MemoryStore(deep)
    monkeypatch.chdir(tmp_path)  # init says paths relative to where it runs: long ones here
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=80, color_system=None)
    _next_steps(console, store, store.base / "config.yaml")
    lines = out.getvalue().splitlines()
    assert all(len(line) <= 80 for line in lines), lines
    start = next(n for n, line in enumerate(lines) if line.startswith("  git add "))
    assert lines[start].endswith(" \\") and lines[start + 1].startswith("    "), lines
    command = " ".join(line.rstrip("\\").strip() for line in lines[start : start + 3])
    assert 'git commit -m "ralph init"' in command, lines


def test_each_line_of_a_text_wraps_on_its_own() -> None:
    from ralph.rendering import Wrapped

    text = "first line\n" + "word " * 30 + "\n\nlast"
    lines = drawn(Wrapped(text), terminal=True, width=40).splitlines()
    assert lines[0] == "first line" and lines[1].startswith("word word")
    assert lines[2].startswith("  word") and lines[-2:] == ["", "last"], lines
