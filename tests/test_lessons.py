"""Lessons across loops: a failure like an earlier loop's brings that loop's lessons along."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from ralph import schemas
from ralph.config import lessons_cutoff
from ralph.errors import ConfigError
from ralph.memory import merit
from ralph.memory.lessons import SIMILARITY_THRESHOLD, Failure, Lesson, lesson_texts
from ralph.memory.retrieval import deduplicate, fit_lessons, retrieve_lessons
from ralph.memory.search import SearchIndex
from ralph.memory.store import MemoryStore
from ralph.records import (
    ActorOutput,
    Diagnostic,
    EvaluatorOutput,
    FailureScope,
    IterationRecord,
    MemoryMetadata,
    PerformanceDelta,
    RalphExtension,
    SelfReflection,
)

from .conftest import RunCli, copy_project, isolated_environment, ralph_subprocess
from .fakes.calc_project import git, make_calc_repo
from .fakes.provider_server import FakeProvider

NEGATIVE = Diagnostic(
    "test_failure",
    "AssertionError: negative inputs must give their absolute value assert -1 == 1",
    file="tests/test_calc.py",
    line=17,
    rule="tests/test_calc.py::test_negative",
)
IMPORT = Diagnostic(
    "lint_error", "`os` imported but unused", file="app/cli.py", line=3, rule="F401"
)
TYPE = Diagnostic(
    "type_error",
    'Argument 1 to "parse" has incompatible type "int"; expected "str"',
    file="dates/parser.py",
    line=12,
    rule="arg-type",
)


def record(
    loop_id: str,
    iteration: int,
    *,
    errors: list[Diagnostic] | None = None,
    lessons: list[str] | None = None,
    insights: list[str] | None = None,
    passed: bool = False,
    used: list[str] | None = None,
    improved: bool | None = None,
    timestamp: str = "2026-01-01T00:00:00Z",
    fingerprint: str | None = None,
    scope: list[Diagnostic] | None = None,
) -> IterationRecord:
    return IterationRecord(
        loop_id=loop_id,
        iteration=iteration,
        timestamp=timestamp,
        actor_output=ActorOutput(actions=[], rationale="r"),
        evaluator_output=EvaluatorOutput(
            passed=passed,
            verification_type="unit_tests",
            errors=[] if passed else list(errors or []),
            reward_signal=1.0 if passed else 0.5,
        ),
        self_reflection=SelfReflection(
            reflection_text=f"Attempt {iteration} of {loop_id}.",
            actionable_insights=insights,
            lessons_learned=lessons,
            confidence=0.8,
        ),
        memory_metadata=MemoryMetadata(omega_capacity=3, current_memory_size=0),
        performance_delta=PerformanceDelta(is_improvement=improved),
        ralph=RalphExtension(
            reflection_source="success" if passed else "llm",
            lessons_used=used or [],
            error_fingerprint=fingerprint,
            failures=None if scope is None else [FailureScope.of("tests", d) for d in scope],
        ),
    )


def save(store: MemoryStore, *records: IterationRecord) -> None:
    for r in records:
        store.write_record(r)


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    s = MemoryStore(tmp_path)
    s.ensure()
    return s


def texts(lessons: list[Lesson]) -> list[str]:
    return [lesson.text for lesson in lessons]


# --- similarity ----------------------------------------------------------------------------------


def test_the_same_failure_is_identical_and_an_unrelated_one_is_far() -> None:
    negative = Failure.of_diagnostics([NEGATIVE])
    assert negative.similarity(Failure.of_diagnostics([NEGATIVE])) == 1.0
    assert negative.similarity(Failure.of_diagnostics([IMPORT])) == 0.0
    assert Failure.of_diagnostics([]).similarity(negative) == 0.0


def test_another_test_in_the_same_file_is_below_the_threshold() -> None:
    other = Diagnostic(
        "test_failure",
        "assert 0 == 1 where 0 = f(1)",
        file="tests/test_calc.py",
        line=5,
        rule="tests/test_calc.py::test_one",
    )
    score = Failure.of_diagnostics([NEGATIVE]).similarity(Failure.of_diagnostics([other]))
    assert 0 < score < SIMILARITY_THRESHOLD


def test_the_same_failure_among_others_is_still_similar() -> None:
    score = Failure.of_diagnostics([NEGATIVE]).similarity(Failure.of_diagnostics([NEGATIVE, TYPE]))
    assert SIMILARITY_THRESHOLD <= score < 1.0


def test_shell_failures_compare_by_their_messages() -> None:
    boom = Diagnostic("other", "make: *** [build] Error 2 missing header config.h")
    same = Failure.of_diagnostics([boom])
    assert same.similarity(Failure.of_diagnostics([boom])) == 1.0
    other = Diagnostic("other", "connection refused while fetching dependencies")
    assert same.similarity(Failure.of_diagnostics([other])) < SIMILARITY_THRESHOLD


def test_lessons_of_a_record_fall_back_to_portable_insights_then_root_cause() -> None:
    assert lesson_texts({"lessons_learned": [" Read the tests first. ", ""]}) == [
        "Read the tests first."
    ]
    insights = ["Abandon the approach of iteration 2: same errors.", "Return abs(x)."]
    assert lesson_texts({"lessons_learned": [], "actionable_insights": insights}) == [
        "Return abs(x)."
    ]
    root = {"credit_assignment": {"root_cause": "The sign is ignored."}}
    assert lesson_texts(root) == ["The sign is ignored."]
    assert lesson_texts({}) == []


# --- retrieval -----------------------------------------------------------------------------------


def test_a_lesson_comes_from_another_loop_that_failed_the_same_way(store: MemoryStore) -> None:
    save(
        store,
        record("ralph-a", 1, errors=[NEGATIVE], lessons=["Negative inputs need abs()."]),
        record("ralph-b", 1, errors=[IMPORT], lessons=["Remove unused imports."]),
        record("ralph-c", 1, errors=[TYPE], lessons=["Parse strings, not ints."]),
    )
    found = retrieve_lessons(store, exclude_loop="ralph-now", current_errors=[NEGATIVE])
    assert texts(found) == ["Negative inputs need abs()."]
    assert found[0].id == "ralph-a#1.0" and found[0].source == "ralph-a#1"
    assert found[0].score == 1.0
    assert texts(retrieve_lessons(store, exclude_loop="ralph-now", current_errors=[IMPORT])) == [
        "Remove unused imports."
    ]


def test_lessons_before_a_time_come_only_from_older_records(store: MemoryStore) -> None:
    save(
        store,
        record("ralph-old", 1, errors=[NEGATIVE], lessons=["Old: use abs()."]),
        record(
            "ralph-new",
            1,
            errors=[NEGATIVE],
            lessons=["New: use abs()."],
            timestamp="2026-06-01T00:00:00Z",
        ),
    )
    everything = retrieve_lessons(store, exclude_loop="ralph-now", current_errors=[NEGATIVE])
    assert sorted(texts(everything)) == ["New: use abs().", "Old: use abs()."]
    cutoff = lessons_cutoff("2026-03-01T00:00:00Z")
    older = retrieve_lessons(
        store, exclude_loop="ralph-now", current_errors=[NEGATIVE], before=cutoff
    )
    assert texts(older) == ["Old: use abs()."]


def test_a_bad_lessons_before_is_one_line() -> None:
    with pytest.raises(ConfigError, match="lessons_before: 'yesterday' is not an ISO time"):
        lessons_cutoff("yesterday")


def test_no_lesson_when_the_failure_is_different(store: MemoryStore) -> None:
    save(store, record("ralph-a", 1, errors=[NEGATIVE], lessons=["Negative inputs need abs()."]))
    assert retrieve_lessons(store, exclude_loop="ralph-now", current_errors=[TYPE]) == []
    assert retrieve_lessons(store, exclude_loop="ralph-now", current_errors=[]) == []


def test_own_loop_success_notes_and_obsolete_reflections_are_never_injected(
    store: MemoryStore,
) -> None:
    save(
        store,
        record("ralph-now", 1, errors=[NEGATIVE], lessons=["Mine."]),
        record("ralph-a", 2, passed=True, lessons=["What worked: abs()."]),
        record("ralph-b", 1, errors=[NEGATIVE], lessons=["Obsolete advice."]),
    )
    assert store.mark_obsolete("ralph-b", 1, obsolete=True)
    assert retrieve_lessons(store, exclude_loop="ralph-now", current_errors=[NEGATIVE]) == []
    assert store.mark_obsolete("ralph-b", 1, obsolete=False)
    again = retrieve_lessons(store, exclude_loop="ralph-now", current_errors=[NEGATIVE])
    assert texts(again) == ["Obsolete advice."]


def test_the_same_fingerprint_counts_as_the_same_failure(store: MemoryStore) -> None:
    save(store, record("ralph-a", 1, errors=[IMPORT, TYPE], lessons=["Same."], fingerprint="fp-1"))
    found = retrieve_lessons(
        store, exclude_loop="ralph-now", current_errors=[TYPE], fingerprint="fp-1"
    )
    assert texts(found) == ["Same."] and found[0].score == 1.0


def test_the_same_fingerprint_without_a_shared_failure_offers_nothing(store: MemoryStore) -> None:
    # two loops of one batch see the same failing set (the same fingerprint), each with its own
    # target: a lesson for the other's failure is not for this loop
    save(store, record("ralph-a", 1, errors=[IMPORT], lessons=["Same."], fingerprint="fp-1"))
    found = retrieve_lessons(
        store, exclude_loop="ralph-now", current_errors=[TYPE], fingerprint="fp-1"
    )
    assert found == []


def test_a_lesson_is_only_for_the_failure_its_record_had_to_work_on(store: MemoryStore) -> None:
    # loop a's record also lists a guard's old failure (IMPORT, "not your task" there): its
    # lesson is for NEGATIVE alone, and it says so
    save(
        store,
        record("ralph-a", 1, errors=[NEGATIVE, IMPORT], lessons=["Use abs()."], scope=[NEGATIVE]),
    )
    assert retrieve_lessons(store, exclude_loop="ralph-now", current_errors=[IMPORT]) == []
    found = retrieve_lessons(store, exclude_loop="ralph-now", current_errors=[IMPORT, NEGATIVE])
    assert texts(found) == ["Use abs()."]
    assert found[0].failure == "tests: tests/test_calc.py::test_negative"
    assert found[0].view()["failure"] == found[0].failure


def test_a_record_without_scope_is_for_its_diagnostics(store: MemoryStore) -> None:
    save(store, record("ralph-a", 1, errors=[TYPE], lessons=["Parse strings."]))
    assert retrieve_lessons(store, exclude_loop="ralph-now", current_errors=[IMPORT]) == []
    found = retrieve_lessons(store, exclude_loop="ralph-now", current_errors=[TYPE])
    assert texts(found) == ["Parse strings."] and found[0].failure == "type_error: arg-type"


def test_near_identical_lessons_count_once_and_the_newest_wording_wins(
    store: MemoryStore,
) -> None:
    save(
        store,
        record(
            "ralph-a",
            1,
            errors=[NEGATIVE],
            lessons=["Check negative inputs before returning a value."],
            timestamp="2026-01-01T00:00:00Z",
        ),
        record(
            "ralph-b",
            1,
            errors=[NEGATIVE],
            lessons=["Check negative inputs before returning the value!"],
            timestamp="2026-03-01T00:00:00Z",
        ),
        record("ralph-c", 1, errors=[NEGATIVE], lessons=["Run the tests first."]),
    )
    found = retrieve_lessons(store, exclude_loop="ralph-now", current_errors=[NEGATIVE])
    assert sorted(texts(found)) == [
        "Check negative inputs before returning the value!",
        "Run the tests first.",
    ]


def test_top_n_and_token_budget(store: MemoryStore) -> None:
    lessons = [f"Lesson number {word} about negatives." for word in ("one", "two", "three")]
    save(store, record("ralph-a", 1, errors=[NEGATIVE], lessons=[*lessons, "x " * 2000]))
    found = retrieve_lessons(store, exclude_loop="ralph-now", current_errors=[NEGATIVE], limit=5)
    assert len(found) == 4
    assert max(len(lesson.text) for lesson in found) <= 120 * 4
    assert len(retrieve_lessons(store, exclude_loop=None, current_errors=[NEGATIVE], limit=2)) == 2
    assert retrieve_lessons(store, exclude_loop=None, current_errors=[NEGATIVE], limit=0) == []
    small = retrieve_lessons(
        store, exclude_loop=None, current_errors=[NEGATIVE], limit=5, token_budget=12
    )
    assert 1 <= len(small) < 4 and sum(len(lesson.text) for lesson in small) <= 12 * 4


def test_fit_lessons_skips_what_does_not_fit_but_keeps_smaller_ones() -> None:
    ranked = [Lesson("a", "x" * 200, "s"), Lesson("b", "short", "s")]
    assert [lesson.id for lesson in fit_lessons(ranked, limit=3, token_budget=10)] == ["b"]
    assert deduplicate([Lesson("a", "!!!", "s")]) == []


# --- usage and `helped` --------------------------------------------------------------------------


def test_usage_counts_retrievals_and_helped_is_the_improvement_of_the_user(
    store: MemoryStore,
) -> None:
    save(
        store,
        record("ralph-a", 1, errors=[NEGATIVE], lessons=["L1", "L2"]),
        record("ralph-b", 2, errors=[NEGATIVE], used=["ralph-a#1.0", "ralph-a#1.1"], improved=True),
        record("ralph-c", 2, errors=[NEGATIVE], used=["ralph-a#1.0"], improved=False),
        record("ralph-c", 3, errors=[NEGATIVE], used=["ralph-a#1.1"], improved=None),
        record("ralph-d", 2, passed=True, used=["ralph-b#2.0"], improved=True),
    )
    with SearchIndex(store) as index:
        usage = index.usage("ralph-a", 1)
        assert (usage.retrieved, usage.helped) == (3, 1)
        assert usage.used_by == ["ralph-b#2", "ralph-c#2", "ralph-c#3"]
        assert (index.usage("ralph-b", 2).retrieved, index.usage("ralph-b", 2).helped) == (1, 1)
        assert index.usage("ralph-c", 2).retrieved == 0


def test_obsolete_mark_is_schema_valid_and_reversible(store: MemoryStore, ralph: RunCli) -> None:
    save(store, record("ralph-a", 1, errors=[NEGATIVE], lessons=["L"]))
    path = store.record_path("ralph-a", 1)
    before = json.loads(path.read_text())
    result = ralph("reflections", "obsolete", "ralph-a", "1", cwd=store.root)
    assert result.code == 0 and "obsolete" in result.out
    data = json.loads(path.read_text())
    assert data["ralph"]["obsolete"] is True and schemas.errors(schemas.RECORD, data) == []
    assert store.read_record("ralph-a", 1).ralph.obsolete is True  # type: ignore[union-attr]
    assert "already" in ralph("reflections", "obsolete", "ralph-a", "1", cwd=store.root).out
    shown = ralph("reflections", "show", "ralph-a", "1", cwd=store.root)
    assert "obsolete: its lessons are never injected" in shown.out
    assert ralph("reflections", "obsolete", "ralph-a", "1", "--undo", cwd=store.root).code == 0
    assert json.loads(path.read_text()) == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ralph-a", "9"], "has no iteration 9"),
        (["ralph-nope", "1"], "unknown loop 'ralph-nope'"),
        (["../etc", "1"], "invalid loop id"),
    ],
)
def test_obsolete_bad_input_is_one_line(
    store: MemoryStore, ralph: RunCli, args: list[str], message: str
) -> None:
    save(store, record("ralph-a", 1, errors=[NEGATIVE], lessons=["L"]))
    result = ralph("reflections", "obsolete", *args, cwd=store.root)
    assert result.code == 2 and message in result.err and "Traceback" not in result.err


def test_an_unusable_index_costs_a_rebuild_not_the_lessons(store: MemoryStore) -> None:
    save(store, record("ralph-a", 1, errors=[NEGATIVE], lessons=["Keep going."]))
    assert retrieve_lessons(store, exclude_loop=None, current_errors=[NEGATIVE])
    index_file = store.base / "search.sqlite"
    for suffix in ("-wal", "-shm"):
        Path(str(index_file) + suffix).unlink(missing_ok=True)
    index_file.write_bytes(b"not a database at all" * 100)
    assert texts(retrieve_lessons(store, exclude_loop=None, current_errors=[NEGATIVE])) == [
        "Keep going."
    ]
    assert "search.sqlite" in (store.base / ".gitignore").read_text()


# --- end to end: loop A teaches loop B -----------------------------------------------------------

ACTOR = r"""
import json, os, sys
from pathlib import Path
iteration = os.environ["RALPH_ITERATION"]
prompt = Path(os.environ["RALPH_PROMPT_FILE"]).read_text()
plan = json.loads(Path(os.environ["PLAN"]).read_text())
step = plan.get(iteration) or {}
for path, text in step.get("write", {}).items():
    Path(path).write_text(text)
print("done")
"""
VERSIONS = {
    "zero": "def f(x: int) -> int:\n    return 0\n",
    "no-sign": "def f(x: int) -> int:\n    return x\n",  # only test_negative fails
    "only-sign": "def f(x: int) -> int:\n    return -x if x < 0 else 0\n",  # all but negative
    "full": "def f(x: int) -> int:\n    return abs(x)\n",
}
TESTS = """\
from calc import f


def test_one() -> None:
    assert f(1) == 1


def test_two() -> None:
    assert f(2) == 2


def test_negative() -> None:
    assert f(-1) == 1, "negative inputs must give their absolute value"
"""
LESSON = "MARKER-lesson: negative inputs need abs(), check the sign first"
REFLECTION = {
    "reflection_text": "I returned x unchanged, so f(-1) gives -1.",
    "credit_assignment": {
        "root_cause": "calc.py ignores the sign",
        "failure_category": "logic_error",
    },
    "actionable_insights": ["Return abs(x) in calc.py"],
    "lessons_learned": [LESSON],
    "confidence": 0.9,
}


def loop_args(steps: dict[str, str], *extra: str) -> list[str]:
    """`ralph run` arguments; the actor writes calc.py versions by iteration (into PLAN)."""
    plan = {k: {"write": {"calc.py": VERSIONS[v]}} for k, v in steps.items()}
    Path(os.environ["PLAN"]).write_text(json.dumps(plan))
    actor = f"cmd:{sys.executable} {Path(os.environ['PLAN']).parent / 'actor.py'}"
    test = f"{sys.executable} -m pytest -q -p no:cacheprovider tests"
    return ["run", "make f pass", "--actor", actor, "--test", test, "--json", *extra]


def tools(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (folder / "actor.py").write_text(ACTOR)
    monkeypatch.setenv("PLAN", str(folder / "plan.json"))
    monkeypatch.setenv("CI", "true")


@pytest.fixture(scope="module")
def after_loop_a(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """Loop A, run once for the module: fails only test_negative, reflects (fake LLM) with
    LESSON, then succeeds. Each test copies the project it leaves."""
    folder = tmp_path_factory.mktemp("loop-a")
    with isolated_environment(tmp_path_factory) as monkeypatch:
        root = make_calc_repo(
            folder / "repo", calc=VERSIONS["zero"], tests=TESTS, monkeypatch=monkeypatch
        )
        tools(folder, monkeypatch)
        with FakeProvider(default_text=json.dumps(REFLECTION)) as fake:
            for name, value in fake.environ().items():
                monkeypatch.setenv(name, value)
            args = loop_args({"1": "no-sign", "2": "full"}, "--reflector", "openai:gpt-4o-mini")
            result = ralph_subprocess(*args, cwd=root)
    assert result.code == 0, result.err
    a = json.loads(result.out)
    assert a["stop_reason"] == "success" and a["iterations"] == 2
    return root, str(a["loop_id"])


@pytest.fixture
def project(
    after_loop_a: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    root = copy_project(after_loop_a[0], tmp_path / "repo")
    for role in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{role}_NAME", "t")
        monkeypatch.setenv(f"GIT_{role}_EMAIL", "t@example.invalid")
    tools(tmp_path, monkeypatch)
    return root


@pytest.fixture
def loop_a(after_loop_a: tuple[Path, str]) -> str:
    return after_loop_a[1]


def run_loop(ralph: RunCli, project: Path, steps: dict[str, str], *extra: str) -> dict[str, Any]:
    """One `ralph run` from a clean main branch."""
    git(project, "checkout", "-q", "main")
    result = ralph(*loop_args(steps, *extra), cwd=project)
    assert result.code in (0, 1), result.err
    summary: dict[str, Any] = json.loads(result.out)
    return summary


def prompt(project: Path, loop_id: str, iteration: int) -> str:
    return (MemoryStore(project).artifacts_dir(loop_id, iteration) / "prompt.md").read_text()


def test_loop_b_failing_like_loop_a_gets_its_lesson_and_it_helped(
    ralph: RunCli, project: Path, loop_a: str
) -> None:
    a_id = loop_a
    b = run_loop(ralph, project, {"1": "no-sign", "2": "full"}, "--reflector", "heuristic")
    assert b["stop_reason"] == "success"
    # the baseline already fails test_negative among others: the first attempt gets it too
    for iteration in (1, 2):
        text = prompt(project, b["loop_id"], iteration)
        assert "# Lessons from earlier loops in this project" in text
        assert f"- {LESSON} (for the failure tests: " in text
        assert f"::test_negative; from {a_id}#1)" in text
        used = MemoryStore(project).read_record(b["loop_id"], iteration).ralph
        assert used is not None and used.lessons_used == [f"{a_id}#1.0"]
    shown = ralph("reflections", "show", a_id, "1", cwd=project)
    assert "used by other loops: 2 times, helped 2" in " ".join(shown.out.split())
    found = json.loads(ralph("reflections", "search", "sign abs", "--json", cwd=project).out)
    assert (found[0]["loop_id"], found[0]["iteration"]) == (a_id, 1)
    assert (found[0]["retrieved"], found[0]["helped"]) == (2, 2)


@pytest.mark.parametrize("case", ["different failure", "obsolete", "--lessons 0"])
def test_loop_b_gets_no_lesson(ralph: RunCli, project: Path, loop_a: str, case: str) -> None:
    a_id = loop_a
    extra = ["--reflector", "heuristic"]
    steps = {"1": "no-sign", "2": "full"}
    if case == "different failure":
        steps = {"1": "only-sign", "2": "full"}
    elif case == "obsolete":
        assert ralph("reflections", "obsolete", a_id, "1", cwd=project).code == 0
    else:
        extra += ["--lessons", "0"]
    b = run_loop(ralph, project, steps, *extra)
    assert b["stop_reason"] == "success" and b["iterations"] == 2
    assert "Lessons from earlier loops" not in prompt(project, b["loop_id"], 2)
    assert LESSON not in prompt(project, b["loop_id"], 2)
    used = MemoryStore(project).read_record(b["loop_id"], 2).ralph
    assert used is not None and used.lessons_used == []


# --- lessons earn their place (memory/merit.py) ------------------------------------------------


def offered_to(loop_id: str, n: int, *, passed: bool = False) -> list[IterationRecord]:
    """`n` attempts of `loop_id` given ralph-a#1's lesson, still failing NEGATIVE unless passed."""
    return [
        record(
            loop_id,
            i,
            errors=[NEGATIVE],
            scope=[] if passed else [NEGATIVE],
            used=["ralph-a#1.0"],
            improved=False,
            passed=passed,
            timestamp=f"2026-02-0{i}T00:00:00Z",
        )
        for i in range(1, n + 1)
    ]


def test_a_lesson_offered_three_times_without_helping_is_retired(store: MemoryStore) -> None:
    save(store, record("ralph-a", 1, errors=[NEGATIVE], lessons=["Use abs()."], scope=[NEGATIVE]))
    save(store, *offered_to("ralph-b", 2))
    (found,) = retrieve_lessons(store, exclude_loop="ralph-now", current_errors=[NEGATIVE])
    assert (found.text, found.offered, found.helped) == ("Use abs().", 2, 0)
    save(store, *offered_to("ralph-b", 3))
    assert texts(retrieve_lessons(store, exclude_loop="ralph-now", current_errors=[NEGATIVE])) == []
    # configurable: with five offers allowed it is still offered
    again = retrieve_lessons(
        store, exclude_loop="ralph-now", current_errors=[NEGATIVE], retire_after=5
    )
    assert texts(again) == ["Use abs()."]
    # a person brings it back: offers before that no longer count
    merit.restore(store, "ralph-a", 1)
    assert texts(retrieve_lessons(store, exclude_loop="ralph-now", current_errors=[NEGATIVE])) == [
        "Use abs()."
    ]


def test_a_lesson_that_helped_is_not_retired_and_ranks_first(store: MemoryStore) -> None:
    save(
        store,
        record("ralph-a", 1, errors=[NEGATIVE], lessons=["Use abs()."], scope=[NEGATIVE]),
        record("ralph-c", 1, errors=[NEGATIVE], lessons=["Read the sign."], scope=[NEGATIVE]),
    )
    save(store, *offered_to("ralph-b", 4)[:3], *offered_to("ralph-d", 1, passed=True))
    found = retrieve_lessons(store, exclude_loop="ralph-now", current_errors=[NEGATIVE])
    assert texts(found) == ["Use abs().", "Read the sign."]
    assert (found[0].offered, found[0].helped) == (4, 1)


def test_duplicate_lessons_merge_their_counts(store: MemoryStore) -> None:
    scope = [NEGATIVE]
    save(
        store,
        record("ralph-a", 1, errors=[NEGATIVE], lessons=["Use abs() on the input."], scope=scope),
        record("ralph-c", 1, errors=[NEGATIVE], lessons=["Use abs() on the input!"], scope=scope),
    )
    save(store, *offered_to("ralph-b", 2))
    save(store, record("ralph-e", 1, errors=[NEGATIVE], scope=scope, used=["ralph-c#1.0"]))
    # 2 + 1 offers of the same advice for the same failure: retired together at three
    assert retrieve_lessons(store, exclude_loop="ralph-now", current_errors=[NEGATIVE]) == []


def test_reflections_lessons_lists_what_the_memory_teaches(
    ralph: RunCli, store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    save(
        store,
        record("ralph-a", 1, errors=[NEGATIVE], lessons=["Use abs()."], scope=[NEGATIVE]),
        record("ralph-c", 1, errors=[TYPE], lessons=["Parse strings first."], scope=[TYPE]),
        *offered_to("ralph-b", 3),
    )
    monkeypatch.delenv("RALPH_LESSON_RETIRE_AFTER", raising=False)
    shown = json.loads(ralph("reflections", "lessons", "--json", cwd=store.root).out)
    assert [(r["lesson"], r["failure"]) for r in shown] == [
        ("Parse strings first.", "tests: arg-type")
    ]
    every = json.loads(ralph("reflections", "lessons", "--all", "--json", cwd=store.root).out)
    retired = next(r for r in every if r["lesson"] == "Use abs().")
    assert (retired["offered"], retired["helped"], retired["retired"]) == (3, 0, True)
    assert retired["failure"] == "tests: tests/test_calc.py::test_negative"
    assert retired["source"] == "ralph-a#1"
    # the variable: four offers allowed, so it is still taught
    monkeypatch.setenv("RALPH_LESSON_RETIRE_AFTER", "4")
    shown = json.loads(ralph("reflections", "lessons", "--json", cwd=store.root).out)
    assert {r["lesson"] for r in shown} == {"Use abs().", "Parse strings first."}
    # a person brings it back
    monkeypatch.delenv("RALPH_LESSON_RETIRE_AFTER")
    assert ralph("reflections", "obsolete", "ralph-a", "1", "--undo", cwd=store.root).code == 0
    shown = json.loads(ralph("reflections", "lessons", "--json", cwd=store.root).out)
    assert {r["lesson"] for r in shown} == {"Use abs().", "Parse strings first."}
    assert "helped/offered" in ralph("reflections", "lessons", cwd=store.root).out


def test_analyze_reports_lessons_added_merged_retired_and_helped(
    ralph: RunCli, store: MemoryStore
) -> None:
    scope = [NEGATIVE]
    save(
        store,
        record("ralph-a", 1, errors=[NEGATIVE], lessons=["Use abs() on the input."], scope=scope),
        record("ralph-c", 1, errors=[NEGATIVE], lessons=["Use abs() on the input!"], scope=scope),
        record("ralph-e", 1, errors=[TYPE], lessons=["Parse strings first."], scope=[TYPE]),
        *offered_to("ralph-b", 3),
        *offered_to("ralph-d", 1, passed=True),
    )
    result = ralph("analyze", "--json", cwd=store.root)
    lessons = json.loads(result.out)["summary"]["lessons"]
    assert lessons == {
        "added": 3,
        "merged": 1,
        "retired": 0,
        "offered": 4,
        "helped": 1,
        "helped_share": 0.25,
    }
    text = ralph("analyze", cwd=store.root).out
    assert "lessons 3 added, 1 merged, 0 retired, helped 25% of 4 offers" in " ".join(text.split())
