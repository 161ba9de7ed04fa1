"""A provider that rate-limits forever, errors, truncates, answers nonsense or answers 10 MB."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from ralph.memory.store import MemoryStore
from ralph.testing import FakeChat, make_loop
from ralph.testing import write as fake_write

from ..conftest import RunCli
from ..fakes.provider_server import FakeProvider
from ..test_loop import REFLECTION
from .conftest import args, assert_invariants, check_command, plan, write

EDIT = """I make f return the absolute value.

calc.py
<<<<<<< SEARCH
    return 0
=======
    return abs(x)
>>>>>>> REPLACE
"""
LOOP_ID = "ralph-fake-1"


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProvider]:
    with FakeProvider(default_text=json.dumps(REFLECTION)) as fake:
        for name, value in fake.environ().items():
            monkeypatch.setenv(name, value)
        yield fake


def llm_actor(*extra: str) -> list[str]:
    return [
        "run", "make f pass its tests", "--actor", "openai:fake-model", "--reflector",
        "heuristic", "--test", check_command(), "--json", *extra,
    ]  # fmt: skip


def rate_limit_forever(provider: FakeProvider, count: int = 40, wait_ms: int = 300) -> None:
    """429s asking for `wait_ms` (`retry-after-ms` wins over ralph's own backoff)."""
    for _ in range(count):
        provider.script(status=429, headers={"retry-after-ms": str(wait_ms)}, message="slow down")


def test_429_forever_ends_at_the_time_budget_with_exit_3(
    ralph: RunCli, project: Path, provider: FakeProvider
) -> None:
    rate_limit_forever(provider)  # 5 waits of 0.3 s: the 1 s budget ends before 6 attempts
    result = ralph(*llm_actor("--timeout", "1"), cwd=project)
    assert result.code == 3, result.err
    summary = json.loads(result.out)
    assert summary["stop_reason"] == "budget" and summary["status"] == "failed"
    assert len(provider.chat_requests) >= 2  # it did retry
    assert_invariants(project)


def test_provider_giving_up_pauses_the_loop_and_resume_continues(
    ralph: RunCli, project: Path, provider: FakeProvider
) -> None:
    rate_limit_forever(provider, count=6, wait_ms=20)  # every attempt used, no time waited out
    result = ralph(*llm_actor(), cwd=project)
    assert result.code == 2, result.err
    assert "ralph: error: openai" in result.err and "429" in result.err
    assert "Traceback" not in result.err
    loop_id = MemoryStore(project).loop_ids()[0]
    state = MemoryStore(project).read_state(loop_id)
    assert state.status == "paused" and (state.stop_reason or "").startswith("error: openai")
    assert_invariants(project, finished=False)
    provider.answers(EDIT)
    resumed = ralph("resume", loop_id, "--json", cwd=project)
    assert resumed.code == 0, resumed.err
    assert json.loads(resumed.out)["reward_history"] == [1.0]
    assert_invariants(project)


def test_server_errors_are_retried(ralph: RunCli, project: Path, provider: FakeProvider) -> None:
    provider.script(status=500, headers={"retry-after-ms": "50"}).script(
        status=503, headers={"retry-after-ms": "50"}
    )
    plan(project, {"1": write("partial"), "2": write("full")})
    result = ralph(*args("--reflector", "openai:fake-model"), cwd=project)
    assert result.code == 0, result.err
    first = assert_invariants(project)[0]
    assert first["ralph"]["reflection_source"] == "llm"


BAD_REFLECTIONS = [  # tests/test_properties.py tries arbitrary JSON; these go end to end
    '{"reflection_text": "I looked at calc.py and the fix is to',  # truncated JSON
    '["a list, not an object"]',
    '{"reflection_text": 42, "confidence": "very"}',
    '{"confidence": 0.5, "credit_assignment": {"failure_category": "bad luck"}}',
    "",
]


def test_reflections_failing_the_schema_in_every_way_fall_back(tmp_path: Path) -> None:
    """In process (the provider's HTTP path is the other tests' here): each bad answer and its
    bad repair give a heuristic reflection, and the loop goes on to its success."""
    chat = FakeChat(*[answer for bad in BAD_REFLECTIONS for answer in (bad, bad)])
    n = len(BAD_REFLECTIONS)
    steps = {"default": fake_write("partial"), n + 1: fake_write("full")}
    loop = make_loop(tmp_path, steps, chat=chat, patience=20, max_iterations=20)
    assert loop.start().exit_code == 0
    records = [loop.store.read_record(LOOP_ID, i) for i in range(1, n + 2)]
    assert [r.ralph.reflection_source for r in records[:n] if r.ralph] == ["heuristic"] * n
    assert records[n].evaluator_output.passed and not chat.answers  # every bad answer was asked
    assert len(chat.requests) == 2 * n  # the answer and one repair, no more


def test_a_10_mb_answer_is_bounded(ralph: RunCli, project: Path, provider: FakeProvider) -> None:
    huge = dict(REFLECTION, reflection_text="calc.py is wrong. " + "x" * (10 << 20))
    provider.answers(json.dumps(huge), json.dumps(huge))
    plan(project, {"1": write("partial"), "2": write("full")})
    result = ralph(*args("--reflector", "openai:fake-model"), cwd=project)
    assert result.code == 0, result.err
    assert_invariants(project)
    memory = MemoryStore(project).base
    assert max(p.stat().st_size for p in memory.rglob("*.json")) < 1 << 20
