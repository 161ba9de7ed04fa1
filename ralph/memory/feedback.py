"""Human feedback is memory too: a person's verdict on a finished loop, kept and reused.

`ralph feedback LOOP --accept|--reject [--note TEXT]` writes `loops/LOOP/feedback.json`
(validated against `schemas/feedback.schema.json`). What it changes later:

- a rejected loop becomes a lesson ("a person rejected this fix: NOTE") offered to later loops
  whose failure resembles the one the rejected loop set out to fix (same baseline fingerprint,
  or similar diagnostics), ranked above every machine reflection (`FEEDBACK_BOOST`);
- an accepted loop's reflections count as confirmed: their lessons rank higher
  (`CONFIRMED_BOOST`);
- `analyze` reports the acceptance rate next to the success rate.

Implicit signals use the same file with a weaker source: `apply` (a successful loop's work was
applied: accepted) and `prune` (its branch was dropped unapplied: not taken). An implicit signal
never replaces a person's explicit verdict, and applying a loop that failed is no verdict: such
an `apply` is not written, and one written by an earlier version confirms nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ralph import schemas
from ralph.errors import ConfigError, StoreError
from ralph.files import atomic_write_json, read_json
from ralph.ids import validate_loop_id
from ralph.records import utc_now
from ralph.redact import redact

if TYPE_CHECKING:
    from ralph.memory.lessons import Failure, Lesson
    from ralph.memory.store import MemoryStore

Verdict = Literal["accepted", "rejected", "not_taken"]
SUCCEEDED = ("success", "already_green")  # the stop reasons of a loop whose checks passed
FeedbackSource = Literal["explicit", "apply", "prune"]
SCHEMA = "feedback.schema.json"
FEEDBACK_FILE = "feedback.json"
FEEDBACK_BOOST = 1.0  # machine lessons score at most 1: a person's verdict ranks above them all
CONFIRMED_BOOST = 0.25
MAX_ROWS = 50


def feedback_path(store: MemoryStore, loop_id: str) -> Path:
    return store.loop_dir(loop_id) / FEEDBACK_FILE


def record_feedback(
    store: MemoryStore,
    loop_id: str,
    verdict: Verdict,
    *,
    note: str | None = None,
    source: FeedbackSource = "explicit",
) -> dict[str, Any] | None:
    """Write the verdict (validated, atomically); None when an implicit signal is ignored
    because a person already gave their verdict."""
    state = store.read_state(loop_id)  # names an unknown loop
    status = store.effective_status(state)
    if status in ("running", "paused", "crashed"):
        raise StoreError(
            f"loop {loop_id} is {status}: feedback is for a finished loop",
            hint=f"let it finish, or `ralph abort {loop_id}` first",
        )
    earlier = read_feedback(store, loop_id)
    if source != "explicit" and earlier is not None and earlier["source"] == "explicit":
        return None
    if source == "apply" and state.stop_reason not in SUCCEEDED:
        return None  # applying a failed loop's work says nothing good about its lessons
    data: dict[str, Any] = {
        "loop_id": loop_id,
        "verdict": verdict,
        "source": source,
        # redacted as it comes in, like a task: the file, the screen and --json show the same
        "note": redact(note.strip()) if note and note.strip() else None,
        "timestamp": utc_now(),
        "task": state.task,
        "loop_status": state.stop_reason or state.status,
        "fingerprint": state.baseline.error_fingerprint if state.baseline else None,
        "failure": failure_rows(store, loop_id),
    }
    problems = schemas.errors(SCHEMA, data)
    if problems:
        raise StoreError(f"feedback for {loop_id} not written: {problems[0]}")
    atomic_write_json(feedback_path(store, loop_id), data)
    return data


def give_feedback(
    store: MemoryStore, loop_id: str, *, accept: bool, reject: bool, note: str | None
) -> dict[str, Any]:
    """`ralph feedback`: exactly one of --accept and --reject."""
    if accept == reject:
        raise ConfigError(
            "give exactly one verdict", hint="ralph feedback LOOP --accept|--reject [--note TEXT]"
        )
    data = record_feedback(
        store, validate_loop_id(loop_id), "accepted" if accept else "rejected", note=note
    )
    assert data is not None  # an explicit verdict is always written
    return data


def describe(fb: dict[str, Any]) -> str:
    """One line for `reflections show` and `ralph feedback`."""
    who = "by a person" if fb["source"] == "explicit" else f"implicitly ({fb['source']})"
    note = f": {fb['note']}" if fb.get("note") else ""
    return f"feedback: {fb['verdict']} {who} at {fb['timestamp']}{note}"


def read_feedback(store: MemoryStore, loop_id: str) -> dict[str, Any] | None:
    """The loop's verdict, or None (no file, or a file that is not valid feedback)."""
    path = feedback_path(store, loop_id)
    if not path.is_file():
        return None
    try:
        data = read_json(path)
    except StoreError:
        return None
    return data if not schemas.errors(SCHEMA, data) else None


def all_feedback(store: MemoryStore) -> list[dict[str, Any]]:
    loops = store.base / "loops"
    if not loops.is_dir():
        return []
    found = (read_feedback(store, p.parent.name) for p in sorted(loops.glob(f"*/{FEEDBACK_FILE}")))
    return [f for f in found if f is not None]


def failure_rows(store: MemoryStore, loop_id: str) -> list[list[str | None]]:
    """What the loop set out to fix, as (type, file, rule, message): its records' failures and
    its baseline's failure keys (a loop green at once has no failing record)."""
    rows: list[list[str | None]] = []
    for record in store.valid_records(loop_id):
        for e in record.evaluator_output.errors or []:
            rows.append([e.type, e.file, e.rule, e.message])
    try:
        baseline = read_json(store.baseline_path(loop_id))
    except StoreError:
        baseline = {}
    for check in (baseline or {}).get("checks") or []:
        if check.get("role") != "target":
            continue
        for key in check.get("failing") or []:
            rows.append(_key_row(str(key)))
    return [[str(v) if v is not None else None for v in row] for row in rows[:MAX_ROWS]]


def _key_row(key: str) -> list[str | None]:
    """A baseline failure key (judging.failure_key) back as a diagnostic's parts."""
    if "|" not in key:  # a test id
        return ["test_failure", key.split("::")[0], key, key]
    file, rule, message = [*key.split("|", 2), "", ""][:3]
    return ["other", file or None, rule or None, message]


def feedback_lessons(
    store: MemoryStore,
    *,
    exclude_loop: str | None,
    current: Failure,
    fingerprint: str | None,
    threshold: float,
) -> list[Lesson]:
    """People's verdicts on loops whose failure resembles `current`, as lessons ranked first."""
    from ralph.memory.lessons import Failure as FailureShape
    from ralph.memory.lessons import Lesson

    lessons = []
    for fb in all_feedback(store):
        if fb["loop_id"] == exclude_loop or fb["verdict"] == "not_taken":
            continue
        if fb["verdict"] == "accepted" and not fb.get("note"):
            continue  # nothing to say beyond "confirmed", which boosts its own lessons
        same = bool(fingerprint) and fb.get("fingerprint") == fingerprint
        rows = [tuple(r) for r in fb.get("failure") or []]
        shape = FailureShape.of((str(t), f, r, str(m or "")) for t, f, r, m in rows)
        score = 1.0 if same else current.similarity(shape)
        if score < threshold:
            continue
        lessons.append(
            Lesson(
                id=f"{fb['loop_id']}#feedback",
                text=lesson_text(fb),
                source=f"{fb['loop_id']}#feedback",
                score=round(FEEDBACK_BOOST + score, 4),
            )
        )
    return lessons


def lesson_text(fb: dict[str, Any]) -> str:
    what = "rejected" if fb["verdict"] == "rejected" else "accepted"
    status = "a success" if fb.get("loop_status") == "success" else "the result"
    note = fb.get("note") or "no reason given"
    task = fb.get("task") or "a similar task"
    return f"A person {what} {status} of the loop for {task!r}: {note}"


def boost_confirmed(store: MemoryStore, lessons: Iterable[Lesson]) -> list[Lesson]:
    """Lessons from loops a person accepted rank higher (their reflections are confirmed)."""
    confirmed = {f["loop_id"] for f in all_feedback(store) if confirms(f)}
    return [
        replace(lesson, score=round(lesson.score + CONFIRMED_BOOST, 4))
        if lesson.source.split("#")[0] in confirmed and not lesson.id.endswith("#feedback")
        else lesson
        for lesson in lessons
    ]


def confirms(fb: dict[str, Any]) -> bool:
    """An accepted verdict confirms a loop's reflections: a person's, or an `apply` of a loop
    that succeeded (older versions also wrote one when a failed loop was applied)."""
    if fb["verdict"] != "accepted":
        return False
    return fb["source"] == "explicit" or fb.get("loop_status") in SUCCEEDED


def acceptance(store: MemoryStore, loop_ids: Sequence[str]) -> dict[str, Any]:
    """Counts of verdicts over `loop_ids` and the acceptance rate (accepted / reviewed)."""
    counts = {"accepted": 0, "rejected": 0, "not_taken": 0}
    for loop_id in loop_ids:
        fb = read_feedback(store, loop_id)
        if fb is not None:
            counts[fb["verdict"]] += 1
    reviewed = sum(counts.values())
    rate = counts["accepted"] / reviewed if reviewed else None
    return {"reviewed": reviewed, **counts, "acceptance_rate": rate}
