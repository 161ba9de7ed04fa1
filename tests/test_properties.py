"""Property-based tests: the record round-trip, the edit parser and applier, the Ω window, the stop
policy and the reflection parser hold for every input hypothesis can think of, not just ours."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ralph import schemas
from ralph.actors.edits import apply_edits, parse_edit_blocks
from ralph.ids import validate_loop_id
from ralph.loop.policy import Attempt, Spend, StopPolicy
from ralph.loop.window import POLICIES, reflection_tokens, select_window
from ralph.memory.store import MemoryStore
from ralph.records import (
    ERROR_TYPES,
    FAILURE_CATEGORIES,
    Action,
    ActorOutput,
    Changes,
    CreditAssignment,
    Diagnostic,
    EvaluatorOutput,
    IterationRecord,
    MemoryMetadata,
    PerformanceDelta,
    RalphExtension,
    SelfReflection,
    TotalChanges,
    Usage,
    to_json,
)
from ralph.reflection.parsing import parse_reflection

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

text = st.text(max_size=30)
words = st.text(min_size=1, max_size=30).filter(lambda s: s.strip() != "")
count = st.integers(0, 10_000)
unit = st.floats(0, 1, allow_nan=False)


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | strategy


loop_ids = st.from_regex(r"ralph-[a-z0-9-]{1,20}", fullmatch=True)
actions = st.builds(
    Action,
    type=st.sampled_from(
        ["code_modification", "file_creation", "file_deletion", "test_execution", "other"]
    ),
    description=text,
    file_path=maybe(text),
    changes=maybe(st.builds(Changes, maybe(count), maybe(count), maybe(text))),
    command=maybe(text),
)
diagnostics = st.builds(
    Diagnostic,
    type=st.sampled_from(ERROR_TYPES),
    message=text,
    file=maybe(text),
    line=maybe(count),
    column=maybe(count),
    severity=maybe(st.sampled_from(["error", "warning", "info"])),
    rule=maybe(text),
)
reflections = st.builds(
    SelfReflection,
    reflection_text=words,
    credit_assignment=maybe(
        st.builds(
            CreditAssignment,
            maybe(st.lists(count, max_size=3)),
            maybe(text),
            maybe(st.sampled_from(FAILURE_CATEGORIES)),
        )
    ),
    causal_reasoning=maybe(text),
    actionable_insights=maybe(st.lists(text, max_size=3)),
    lessons_learned=maybe(st.lists(text, max_size=3)),
    confidence=maybe(unit),
    related_reflections=maybe(st.lists(count, max_size=3)),
)


@st.composite
def records(draw: st.DrawFn, loop_id: str | None = None, iteration: int | None = None) -> Any:
    passed = draw(st.booleans())
    return IterationRecord(
        loop_id=loop_id or draw(loop_ids),
        iteration=iteration if iteration is not None else draw(st.integers(0, 2000)),
        timestamp="2026-01-02T03:04:05Z",
        actor_output=ActorOutput(
            actions=draw(st.lists(actions, max_size=3)),
            rationale=draw(text),
            files_modified=draw(maybe(st.lists(text, max_size=3))),
            total_changes=draw(maybe(st.builds(TotalChanges, count, count, count))),
        ),
        evaluator_output=EvaluatorOutput(
            passed=passed,
            verification_type=draw(st.sampled_from(["unit_tests", "lint", "combined"])),
            errors=draw(maybe(st.lists(diagnostics, max_size=3))),
            reward_signal=1.0 if passed else draw(st.floats(0, 0.99, allow_nan=False)),
        ),
        self_reflection=draw(reflections),
        memory_metadata=MemoryMetadata(
            omega_capacity=draw(st.integers(1, 10)),
            current_memory_size=draw(count),
            window_policy=draw(maybe(st.sampled_from(POLICIES))),
        ),
        task_description=draw(maybe(text)),
        performance_delta=draw(
            maybe(st.builds(PerformanceDelta, maybe(unit), maybe(st.integers()), st.booleans()))
        ),
        notes=draw(maybe(text)),
        ralph=draw(
            maybe(
                st.builds(
                    RalphExtension,
                    reflection_source=st.sampled_from(["llm", "heuristic", "success"]),
                    quality_flags=st.lists(text, max_size=2),
                    usage=st.builds(Usage, maybe(count), maybe(count), maybe(count), maybe(count)),
                    error_fingerprint=maybe(text),
                )
            )
        ),
    )


# -- records ---------------------------------------------------------------------------------


@FAST
@given(records())
def test_a_record_survives_the_disk_unchanged(record: IterationRecord) -> None:
    assert schemas.errors(schemas.RECORD, record.to_json()) == []
    with tempfile.TemporaryDirectory() as tmp:
        store = MemoryStore(Path(tmp))
        path = store.write_record(record)
        assert store.read_record(record.loop_id, record.iteration) == record
        assert json.loads(path.read_text("utf-8")) == to_json(record)
        assert store.record_paths(record.loop_id) == [(record.iteration, path)]


@FAST
@given(st.text(max_size=40))
def test_only_well_formed_loop_ids_reach_a_path(candidate: str) -> None:
    try:
        loop_id = validate_loop_id(candidate)
    except Exception:
        return
    store = MemoryStore(Path("/srv/project"))
    for path in (store.reflections_dir(loop_id), store.loop_dir(loop_id)):
        assert path.parent in (store.base / "reflections", store.base / "loops")
        assert path.name == loop_id and "/" not in loop_id and ".." not in Path(loop_id).parts


# -- edits -----------------------------------------------------------------------------------

SAFE_NAME = st.from_regex(r"[a-z][a-z0-9_]{0,8}(\.py|\.txt)?", fullmatch=True)
HOSTILE_PATHS = st.sampled_from(
    [
        "../outside.txt", "../../etc/passwd", "/tmp/abs.txt", "~/home.txt", "link/escape.txt",
        "link", ".git/config", "sub/../../outside.txt", "C:/win.txt", "a\\..\\..\\outside.txt",
        "inside.txt", "sub/inside.txt", ".aiwg/ralph/state.json",
    ]
)  # fmt: skip
LINE = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=20)


def block(path: str, search: str, replace: str) -> str:
    return f"{path}\n<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n"


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


@FAST
@given(st.lists(st.tuples(HOSTILE_PATHS, st.lists(LINE, max_size=3)), min_size=1, max_size=4))
def test_edits_never_touch_anything_outside_the_repository(
    edits: list[tuple[str, list[str]]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        outer = Path(tmp)
        root = outer / "repo"
        (root / ".git").mkdir(parents=True)
        (root / ".git" / "config").write_text("[core]\n")
        (root / "sub").mkdir()
        (outer / "outside.txt").write_text("outside\n")
        os.symlink(outer, root / "link")
        before = snapshot(outer)
        answer = "".join(block(path, "", "".join(f"{x}\n" for x in lines)) for path, lines in edits)
        report = apply_edits(answer, root)
        after = snapshot(outer)
        changed = {
            name for name in before.keys() | after.keys() if before.get(name) != after.get(name)
        }
        allowed = {"repo/inside.txt", "repo/sub/inside.txt"}
        assert changed <= allowed, changed
        assert set(report.created + report.applied) <= {"inside.txt", "sub/inside.txt"}


@FAST
@given(
    SAFE_NAME,
    st.lists(LINE.filter(lambda s: s.strip() != ""), min_size=1, max_size=6, unique=True),
    st.data(),
)
def test_a_block_parses_back_and_applies_exactly(name: str, lines: list[str], data: Any) -> None:
    assume(
        not any(
            line.lstrip().startswith(("<<<<<<<", "=======", ">>>>>>>", "```")) for line in lines
        )
    )
    content = "".join(f"{line}\n" for line in lines)
    index = data.draw(st.integers(0, len(lines) - 1))
    new_line = data.draw(LINE.filter(lambda s: not s.lstrip().startswith(("<", "=", ">", "`"))))
    search, replace = f"{lines[index]}\n", f"{new_line}\n"
    parsed, failures = parse_edit_blocks(block(name, search, replace))
    assert failures == [] and len(parsed) == 1
    assert (parsed[0].path, parsed[0].search, parsed[0].replace) == (name, search, replace)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / name).write_text(content)
        report = apply_edits(block(name, search, replace), root)
        assert report.ok and report.applied == [name]
        expected = [*lines[:index], new_line, *lines[index + 1 :]]
        assert (root / name).read_text() == "".join(f"{line}\n" for line in expected)


@FAST
@given(
    SAFE_NAME,
    st.lists(LINE, min_size=1, max_size=5),
    st.lists(st.booleans(), min_size=2, max_size=4),
)
def test_a_file_is_never_half_edited(name: str, lines: list[str], matches: list[bool]) -> None:
    content = "".join(f"line {i}: {line}\n" for i, line in enumerate(lines))
    blocks = "".join(
        block(
            name,
            f"line {i % len(lines)}: {lines[i % len(lines)]}\n" if ok else "no such line\n",
            "x\n",
        )
        for i, ok in enumerate(matches)
    )
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / name).write_text(content)
        report = apply_edits(blocks, root)
        if not all(matches):
            assert (root / name).read_text() == content
            assert report.failures


@FAST
@given(st.text(max_size=300))
def test_the_parser_takes_any_text(answer: str) -> None:
    blocks, failures = parse_edit_blocks(answer)
    assert all(b.path for b in blocks)
    assert all(f.describe() for f in failures)


# -- the Ω window ----------------------------------------------------------------------------


@st.composite
def histories(draw: st.DrawFn) -> list[IterationRecord]:
    """Light records (what the window reads), consistent as the loop writes them."""
    history = []
    for i in range(draw(st.integers(0, 10))):
        passed = draw(st.booleans())
        history.append(
            IterationRecord(
                loop_id="ralph-prop",
                iteration=i + 1,
                timestamp="2026-01-02T03:04:05Z",
                actor_output=ActorOutput(actions=[], rationale="r"),
                evaluator_output=EvaluatorOutput(
                    passed, "unit_tests", reward_signal=1.0 if passed else draw(unit)
                ),
                self_reflection=SelfReflection(
                    draw(st.text("abc def\n", min_size=1, max_size=600)),
                    actionable_insights=draw(st.lists(st.text("xyz ", max_size=80), max_size=3)),
                ),
                memory_metadata=MemoryMetadata(omega_capacity=3, current_memory_size=0),
                ralph=RalphExtension(reflection_source="success" if passed else "llm"),
            )
        )
    return history


@FAST
@given(histories(), st.integers(1, 10), st.sampled_from(POLICIES), st.integers(1, 3000))
def test_the_window_is_bounded_ordered_and_made_of_failures(
    history: list[IterationRecord], omega: int, policy: str, budget: int
) -> None:
    window = select_window(history, omega=omega, policy=policy, token_budget=budget)
    eligible = [
        r.iteration
        for r in history
        if not r.evaluator_output.passed and r.self_reflection.reflection_text.strip()
    ]
    iterations = [r.iteration for r in window]
    assert len(window) <= omega
    assert iterations == sorted(set(iterations))
    assert set(iterations) <= set(eligible)
    assert sum(reflection_tokens(r) for r in window) <= budget
    if policy != "relevance_weighted":
        assert set(iterations) <= set(eligible[-omega:])
    if eligible and policy == "recency" and budget >= 16:
        assert eligible[-1] in iterations  # the latest failure is kept, truncated if need be


# -- the stop policy -------------------------------------------------------------------------

attempts = st.lists(
    st.tuples(st.floats(0, 1, allow_nan=False), st.booleans(), st.sampled_from(["a", "b"])),
    max_size=12,
)


@FAST
@given(
    attempts,
    st.integers(1, 10),
    st.integers(1, 5),
    maybe(st.floats(1, 100)),
    st.floats(0, 200),
)
def test_the_stop_policy(
    raw: list[tuple[float, bool, str]],
    max_iterations: int,
    patience: int,
    timeout: float | None,
    seconds: float,
) -> None:
    history = [Attempt(i + 1, 1.0 if ok else r, ok, fp) for i, (r, ok, fp) in enumerate(raw)]
    baseline = Attempt(0, 0.0, False, "a")
    policy = StopPolicy(max_iterations, patience, timeout=timeout)
    decision = policy.decide(history, baseline, Spend(seconds=seconds))
    if history and history[-1].passed:
        assert decision.action == "success"  # the checks decide, and only they do
    else:
        assert decision.action != "success"
    if decision.action == "continue":
        assert len(history) < max_iterations
        assert timeout is None or seconds < timeout
    if len(history) >= max_iterations or (timeout is not None and seconds >= timeout):
        assert decision.stop
    if decision.action == "stalled":
        assert policy.stalled_run(history, baseline) >= patience
        best_before = max([a.reward for a in history[:-patience]] + [0.0])
        assert all(a.reward <= best_before for a in history[-patience:])


def stalled_by_definition(history: list[Attempt], baseline: Attempt | None) -> int:
    """The plateau as first written (quadratic): each attempt against all before it."""
    run = 0
    for index in range(len(history) - 1, -1, -1):
        attempt, earlier = history[index], history[:index]
        previous = earlier[-1] if earlier else baseline
        best_before = max(
            [a.reward for a in earlier] + ([baseline.reward] if baseline else []), default=0.0
        )
        same = previous is not None and previous.fingerprint == attempt.fingerprint
        if attempt.passed or attempt.reward > best_before or not same:
            break
        run += 1
    return run


@FAST
@given(attempts, st.booleans(), st.floats(0, 1, allow_nan=False))
def test_the_plateau_is_counted_in_one_pass_as_defined(
    raw: list[tuple[float, bool, str]], with_baseline: bool, start: float
) -> None:
    """Counted in one pass, asked twice per iteration; the same count as defined."""
    history = [Attempt(i + 1, r, ok, fp) for i, (r, ok, fp) in enumerate(raw)]
    baseline = Attempt(0, start, False, "a") if with_baseline else None
    expected = stalled_by_definition(history, baseline)
    assert StopPolicy().stalled_run(history, baseline) == expected


# -- the reflector's answer ------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "reflection_text",
                    "confidence",
                    "credit_assignment",
                    "root_cause",
                    "failure_category",
                    "actionable_insights",
                    "lessons_learned",
                    "related_reflections",
                    "failing_action_indices",
                    "causal_reasoning",
                    "self_reflection",
                    "other",
                ]
            ),
            children,
            max_size=6,
        )
    ),
    max_leaves=20,
)


@FAST
@given(json_values | st.text(max_size=200))
def test_any_answer_gives_a_valid_reflection_or_a_reason(answer: Any) -> None:
    text = answer if isinstance(answer, str) else json.dumps(answer)
    reflection, problems = parse_reflection(text)
    if reflection is None:
        assert problems
        return
    record = {
        "loop_id": "ralph-prop",
        "iteration": 1,
        "timestamp": "2026-01-02T03:04:05Z",
        "actor_output": {"actions": [], "rationale": "r"},
        "evaluator_output": {"passed": False, "verification_type": "combined"},
        "self_reflection": to_json(reflection),
        "memory_metadata": {"omega_capacity": 1, "current_memory_size": 0},
    }
    assert schemas.errors(schemas.RECORD, record) == []
    assert len(json.dumps(record)) < 64_000


# Pieces of every credential shape, and their near misses, so generated text holds real hits.
CREDENTIAL_PIECES = st.sampled_from(
    [
        *("sk-", "sk-ant-", "ghp_", "github_pat_", "AKIA", "ASIA", "xoxb-", "AIza", "eyJ", ".eyJ"),
        *("Bearer ", "BEARER\t", "bearer", "aws_secret_access_key=", "AWS_SECRET_ACCESS_KEY: '"),
        *("-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----", "task-", "\n"),
        *("abcdefghij", "ABCDEFGHIJKLMNOP", "0123456789", "_-", "/+=", " "),
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(CREDENTIAL_PIECES | st.text(max_size=5), max_size=40).map("".join))
def test_the_quick_look_for_credentials_agrees_with_the_full_pattern(text: str) -> None:
    from ralph.redact import CREDENTIAL_SHAPES, _may_hold_credential

    assert _may_hold_credential(text) is (CREDENTIAL_SHAPES.search(text) is not None)
