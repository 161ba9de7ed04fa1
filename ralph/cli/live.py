"""Reporters for the loop's events: a rich live view, plain timestamped lines, and CI extras.

Human output goes to stderr so that `ralph run --json` prints exactly one JSON object on stdout.
It knows nothing about git or how checks run: it only formats what the loop tells it.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time
import typing
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ralph.cli.waiting import announce
from ralph.glyphs import changed_text, clip, plural, sparkline
from ralph.records import known_sum
from ralph.redact import redact
from ralph.rendering import Wrapped

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.live import Live

    from ralph.evaluators.base import CheckOutcome, Evaluation
    from ralph.loop.policy import Decision
    from ralph.loop.result import LoopResult
    from ralph.memory.store import LoopState
    from ralph.records import Diagnostic, IterationRecord


def check_word(outcome: CheckOutcome) -> str:
    """A check's state in a word or three: a target's status; a guard held or got worse."""
    v = outcome.verdict
    if v is None or v.role == "target":
        return outcome.result.status
    if not v.judged:
        return "guard, not judged"
    if not v.ok:
        return f"guard worse (+{len(v.regressions)} new)"
    return f"guard ok ({v.preexisting} from before)" if v.preexisting else "guard ok"


def shown_errors(evaluation: Evaluation, limit: int = 3) -> list[Diagnostic]:
    """The failures a line lists: what the attempt broke first, then what is left to fix (the
    baseline's failures would hide the harm)."""
    broken = [d for o in evaluation.outcomes if o.verdict for d in o.verdict.regressions]
    gone = {id(d) for d in broken}
    rest = [d for d in evaluation.relevant_errors() if id(d) not in gone]
    return (broken + rest)[:limit]


def _status_of(outcome: CheckOutcome) -> str:
    """The colour key: a guard that held is green, whatever its findings from before."""
    v = outcome.verdict
    if v is not None and v.role == "guard":
        return "pass" if v.ok else "fail"
    return outcome.result.status


def is_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1") or not sys.stderr.isatty()


class PlainReporter:
    """One timestamped line per event, for CI logs and pipes."""

    def __init__(self, stream: TextIO | None = None, *, quiet: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.max_iterations = 0
        self.next_steps = True  # the final lines: the branch and what to do with it

    def line(self, text: str) -> None:
        if not self.quiet:
            stamp = datetime.now().strftime("%H:%M:%S")
            self.stream.write(f"{stamp} {redact(text)}\n")
            self.stream.flush()

    def loop_started(self, state: LoopState, resumed: bool) -> None:
        self.max_iterations = state.settings.max_iterations
        verb = "resumed" if resumed else "started"
        self.line(f"loop {state.loop_id} {verb}: {state.task}")

    def phase(self, iteration: int, name: str) -> None:
        where = "baseline" if iteration == 0 else f"iteration {iteration}/{self.max_iterations}"
        if name != "baseline":
            self.line(f"{where}: {name}")
        else:
            self.line("baseline: evaluating the untouched tree")

    def output(self, stream: str, text: str) -> None:
        """Agent and check output is in the logs; plain mode does not echo it."""

    def evaluated(self, iteration: int, evaluation: Evaluation) -> None:
        label = "baseline" if iteration == 0 else f"iteration {iteration}"
        checks = ", ".join(
            f"{o.spec.name} {check_word(o)} ({o.result.duration_ms or 0} ms)"
            for o in evaluation.outcomes
        )
        from ralph.evaluators.describe import harm_text

        harm = harm_text(evaluation)
        broke = f"{harm} — " if harm else ""
        self.line(f"{label}: reward {evaluation.reward:.2f} — {broke}{checks}")
        for error in shown_errors(evaluation):
            where = error.location() or "-"
            self.line(f"    {where}  {error.message.splitlines()[0] if error.message else ''}")

    def iteration_done(self, record: IterationRecord, decision: Decision) -> None:
        credit = record.self_reflection.credit_assignment
        text = record.self_reflection.reflection_text.strip().splitlines()
        if record.evaluator_output.passed:
            pass
        elif credit and credit.root_cause:  # what differs from the last attempt, first
            self.line(f"iteration {record.iteration}: root cause: {clip(credit.root_cause, 160)}")
        elif text:
            self.line(f"iteration {record.iteration}: reflection: {clip(text[0], 160)}")
        if decision.stop:
            self.line(f"stop: {decision.action} — {decision.reason}")

    def note(self, message: str) -> None:
        self.line(f"note: {message}")

    def waiting(self, state: LoopState, until: float, limit: str) -> None:
        """A usage limit waited out: a line with the time the loop goes on (`--notify` says
        so too; the live view counts down)."""
        self.line(announce(state, until, limit))

    def loop_finished(self, result: LoopResult) -> None:
        curve = sparkline(result.reward_history)
        best = "-" if result.best_reward is None else f"{result.best_reward:.2f}"
        self.line(
            f"loop {result.loop_id} {result.status} ({result.stop_reason}): "
            f"{plural(result.iterations, 'iteration')}, best reward {best}"
            + (f" {curve}" if curve else "")  # no trailing space without a curve
        )
        if result.message:
            self.line(result.message)
        if result.iterations:
            from ralph.loop.result import files_json

            self.line(f"changed: {changed_text(files_json(result.changed_files))}")
        if result.user_changes:  # --allow-dirty: where the user's own work is now
            self.block(f"yours   {result.user_changes}")
        for text in next_steps(result) if self.next_steps else []:
            self.block(text)
        if result.memory_hint and self.next_steps:  # the memory is meant to be committed
            self.block(f"memory  {result.memory_hint}")
        write_step_summary(result)

    def block(self, text: str) -> None:
        """A line to copy from (a command): no timestamp in front."""
        if not self.quiet:
            self.stream.write(f"{redact(text)}\n")
            self.stream.flush()


class RichReporter(PlainReporter):
    """A live view on a terminal: phase with spinner and elapsed time, checks, sparkline."""

    def __init__(self, console: Console) -> None:
        super().__init__(typing.cast(TextIO, console.file))
        self.console = console
        self.state: dict[str, Any] = {"iteration": 0, "phase": "", "checks": [], "rewards": []}
        self.last_output = ""  # the newest line the actor or a check printed
        self.phase_started = time.monotonic()
        self.loop: LoopState | None = None  # the runner's, which it counts into
        self.live: Live | None = None

    def loop_started(self, state: LoopState, resumed: bool) -> None:
        self.loop = state
        super().loop_started(state, resumed)

    def line(self, text: str) -> None:
        self._prose(redact(text), 2)

    def block(self, text: str) -> None:
        """A final line: its value wraps under the value column, a command with a shell
        continuation, so it copies whole, and its `  # comment` on lines of its own when the
        line is too long for both."""

        if text.split(" ", 1)[0] not in COMMAND_LABELS:
            self._prose(redact(text), 8)
            return
        command, _, comment = redact(text).partition("  # ")
        self.console.print(
            Wrapped(command, hang=8, shell=True, comment=comment or None), crop=False
        )

    def _prose(self, text: str, hang: int) -> None:
        """A line of prose wrapped under `hang`; the command it ends with (`...: git switch main
        && git stash apply ...`), when the line is too long for both, on a line of its own that
        copies whole."""
        prose, command = tail_command(text)
        if not command or len(text) <= self.console.width:
            self.console.print(Wrapped(text, hang=hang), crop=False)
            return
        self.console.print(Wrapped(prose, hang=hang), crop=False)
        self.console.print(Wrapped(" " * hang + command, hang=hang + 2, shell=True), crop=False)

    def _view(self) -> RenderableType:
        from rich.console import Group
        from rich.spinner import Spinner
        from rich.text import Text

        s = self.state
        elapsed = time.monotonic() - self.phase_started
        header = f"iteration {s['iteration']}/{self.max_iterations}  {s['phase']}  {elapsed:4.0f}s"
        if s.get("until"):  # a usage limit: the time left, not the time spent
            from ralph.usage_limits import span

            left = span(s["until"] - time.time())
            header = f"iteration {s['iteration']}/{self.max_iterations}  usage limit: {left} left"
        if s["iteration"] == 0:
            header = f"baseline  {elapsed:4.0f}s"
        parts: list[RenderableType] = [Spinner("dots", text=Text(header))]
        if self.last_output:
            width = max(20, self.console.width - 4)
            parts.append(Text("  " + clip(self.last_output, width), style="dim"))
        if s["checks"]:
            parts.append(Text("  " + "   ".join(s["checks"])))
        usage = "" if self.loop is None else f"  {usage_text(self.loop)}"
        parts.append(Text(f"  rewards {sparkline(s['rewards'])}{usage}"))
        return Group(*parts)

    def _refresh(self) -> None:
        if self.live is None:
            from rich.live import Live

            self.live = Live(
                get_renderable=self._view, console=self.console, refresh_per_second=4,
                transient=True,
            )  # fmt: skip
            self.live.start()
        self.live.refresh()

    def phase(self, iteration: int, name: str) -> None:
        self.state.update(iteration=iteration, phase=name, until=None)
        self.phase_started = time.monotonic()
        self.last_output = ""
        self._refresh()

    def waiting(self, state: LoopState, until: float, limit: str) -> None:
        super().waiting(state, until, limit)
        self.state.update(iteration=state.iteration + 1, until=until)
        self.last_output = ""
        self._refresh()

    def output(self, stream: str, text: str) -> None:
        """Show that a long attempt is alive: its newest line, under the phase."""
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if lines:
            self.last_output = lines[-1]

    def evaluated(self, iteration: int, evaluation: Evaluation) -> None:
        colour = {"pass": "green", "fail": "red", "error": "yellow", "skip": "dim"}
        self.state["checks"] = [f"{o.spec.name} {check_word(o)}" for o in evaluation.outcomes]
        from rich.markup import escape

        from ralph.evaluators.describe import harm_text

        harm = harm_text(evaluation)
        from rich.text import Text

        self.console.print(
            Wrapped(
                Text.from_markup(
                    ("baseline" if iteration == 0 else f"iteration {iteration}")
                    + f": reward {evaluation.reward:.2f}  "
                    + (f"[red]{escape(harm)}[/]  " if harm else "")
                    + "  ".join(
                        f"[{colour.get(_status_of(o), 'white')}]{o.spec.name} {check_word(o)}[/]"
                        for o in evaluation.outcomes
                    )
                )
            ),
            crop=False,
        )
        for error in shown_errors(evaluation):
            where = error.location() or "-"
            first = error.message.splitlines()[0] if error.message else ""
            failure = Text.assemble(("    " + where, "dim"), "  " + redact(first))
            self.console.print(Wrapped(failure, hang=6), crop=False)

    def iteration_done(self, record: IterationRecord, decision: Decision) -> None:
        self.state["rewards"].append(record.reward)
        super().iteration_done(record, decision)

    def loop_finished(self, result: LoopResult) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None
        super().loop_finished(result)


def usage_text(state: LoopState) -> str:
    """The loop's totals as its state counts them: every record's and a judge's calls outside
    an iteration (`usage.unrecorded_calls`), earlier runs of a resumed loop too. Money by the
    one rule (`records.sum_costs`, as the state adds it): unknown as soon as a part is."""
    usage = state.usage
    if state.iteration == 0 and not usage.unrecorded_calls:
        return "tokens none yet  cost none yet"  # None here is nothing counted, not unknown
    tokens = known_sum((usage.tokens_in, usage.tokens_out))
    shown = "unknown" if tokens is None else f"{tokens:,}"
    cost = "unknown" if usage.cost_usd is None else f"${usage.cost_usd:.4f}"
    return f"tokens {shown}  cost {cost}"


class SilentReporter(PlainReporter):
    """`--quiet`: nothing on stderr but the GitHub step summary."""

    def __init__(self) -> None:
        super().__init__(quiet=True)


def make_reporter(*, quiet: bool) -> PlainReporter:
    if quiet:
        return SilentReporter()
    if is_ci():
        return PlainReporter()
    from rich.console import Console

    return RichReporter(Console(stderr=True))


@contextlib.contextmanager
def progress_bar(label: str, *, after: float = 0.3) -> Iterator[Callable[[int, int], None]]:
    """A `progress(done, total)` callback for long reads of the memory.

    A transient bar on stderr, only on a terminal and only once the work has taken `after`
    seconds, so quick runs never flicker and pipes and CI logs stay clean.
    """
    if is_ci():  # first: a pipe or CI never needs rich imported for this
        yield lambda done, total: None
        return
    from rich.console import Console

    console = Console(stderr=True)
    if not console.is_terminal:
        yield lambda done, total: None
        return
    from rich.progress import Progress

    started = time.monotonic()
    bar = Progress(console=console, transient=True)
    task: list[Any] = []

    def update(done: int, total: int) -> None:
        if not task:
            if time.monotonic() - started < after:
                return
            bar.start()
            task.append(bar.add_task(label, total=total))
        bar.update(task[0], completed=done, total=total)

    try:
        yield update
    finally:
        if task:
            bar.stop()


def tail_command(text: str) -> tuple[str, str]:
    """Prose ending in a git command (`...; to get them back: git switch main && git stash
    apply --index SHA`): the prose, to its colon, and the command; else the text and ""."""
    match = re.search(r"(?<=:) (git [^;()`]*)$", text)
    return (text[: match.start()], match.group(1)) if match else (text, "")


# final lines whose value is a command to copy (and, after `  # `, a comment on it)
COMMAND_LABELS = ("review", "apply", "or", "drop", "memory", "switch", "resume")


def next_steps(result: LoopResult) -> list[str]:
    """The final lines of a loop with a branch: where the work is and what to do with it."""
    if result.status == "paused":  # Ctrl-C: it continues, or you go back
        return result.way_back()
    if not result.branch or result.status in ("running", "crashed"):
        return []
    best = result.best_commit
    at_tip = best is not None and result.best_iteration == result.iterations
    shown = result.branch if at_tip or best is None else best[:12]
    base = result.base_branch or (result.base_commit or "HEAD")[:12]
    start = (result.base_commit or "HEAD")[:12]
    where = f"branch  {result.branch} (from {base})"
    back_to = result.base_branch or f"--detach {base}"  # git switch refuses a bare commit
    drop = "drop    ralph prune  # removes finished loops' branches, keeps records"
    improved = (
        best is not None
        and result.best_reward is not None
        and result.best_reward > (result.baseline_reward or 0.0)
    )
    back = [] if result.worktree or result.restored else [f"switch  git switch {back_to}"]
    if not improved:  # the checkout stays on the loop's branch: the way back comes last
        return [where, "best    no iteration did better than the starting point", drop, *back]
    assert best is not None
    switch = "" if result.worktree or result.restored else f"git switch {back_to} && "
    reward = "" if result.best_reward is None else f", reward {result.best_reward:.2f}"
    force = "" if result.status == "completed" else " --force  # it still fails its checks"
    # --allow-dirty: the loop's own work starts at its starting-point commit, which holds the
    # user's uncommitted changes; a diff or merge from the base branch would count them too
    review = f"{base}...{shown}" if result.user_changes is None else f"{start} {shown}"
    merge = [] if result.user_changes is not None else [f"or      git merge --squash {shown}"]
    return [
        where,
        f"best    iteration {result.best_iteration}{reward}, commit {best[:12]}",
        f"review  git diff {review}",
        *result.unstage_first(),
        f"apply   {switch}ralph apply {result.loop_id}{force}",
        *merge,
        drop,
    ]


def write_step_summary(result: LoopResult) -> None:
    """Append a markdown summary of the loop to $GITHUB_STEP_SUMMARY when it is set."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return
    best = "-" if result.best_reward is None else f"{result.best_reward:.2f}"
    lines = [
        f"### ralph: {result.loop_id}",
        "",
        f"**{result.status}** ({result.stop_reason}) after "
        f"{plural(result.iterations, 'iteration')}, best reward {best}",
        "",
        *_summary_branch(result),
        "| iteration | reward |",
        "| --- | --- |",
        *(f"| {i} | {r:.2f} |" for i, r in enumerate(result.reward_history, start=1)),
        "",
    ]
    try:
        with Path(target).open("a", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")
    except OSError:
        pass  # a summary is a courtesy; never fail a loop over it


def _summary_branch(result: LoopResult) -> list[str]:
    if not result.branch:
        return []
    base = f" from `{result.base_branch}`" if result.base_branch else ""
    best = f", best commit `{result.best_commit[:12]}`" if result.best_commit else ""
    return [f"Branch `{result.branch}`{base}{best}", ""]
