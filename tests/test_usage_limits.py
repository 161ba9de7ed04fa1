"""Usage limits recognised (ralph/usage_limits.py, the signals on each preset): each CLI's own
output in the shapes its released versions print (Claude Code's stream-json rate_limit_event and
texts, codex's error events and usage_limit_reached JSON, gemini's quota error), read through
the preset as an attempt would be, and what is not a limit."""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ralph.actors.agents import CLAUDE_LIMITS, CODEX_LIMITS, GEMINI_LIMITS, PRESETS, AgentActor
from ralph.actors.base import ActorContext
from ralph.loop.result import waiting_text
from ralph.usage_limits import (
    UsageLimited,
    clock_time,
    duration_seconds,
    recognise,
)
from tests.fakes import AGENT_CREDENTIALS

NOW = datetime(2026, 11, 29, 8, 30, tzinfo=UTC).timestamp()  # a Sunday, 08:30 UTC
RESETS_AT = 1_796_000_000  # 2026-11-30T00:53:20Z


@pytest.fixture(autouse=True)
def _utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Codex writes its reset in this machine's local time: here, UTC."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def at(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def events(*items: dict[str, Any]) -> str:
    return "".join(json.dumps(item) + "\n" for item in items)


CLAUDE_INIT = {"type": "system", "subtype": "init", "session_id": "s", "model": "claude-x"}


def claude_limited(text: str, info: dict[str, Any] | None) -> str:
    """What `claude -p --output-format stream-json --verbose` prints when a plan limit stops
    it: the limit as an assistant text with `error: rate_limit`, the rate_limit_event, and a
    result that is an error (exit 1)."""
    assistant = {
        "type": "assistant",
        "message": {"role": "assistant", "content": [{"type": "text", "text": text}]},
        "error": "rate_limit",
    }
    result = {"type": "result", "subtype": "success", "is_error": True, "result": text}
    limit = [{"type": "rate_limit_event", "rate_limit_info": info}] if info else []
    return events(CLAUDE_INIT, assistant, *limit, result)


REJECTED = {
    "status": "rejected",
    "resetsAt": RESETS_AT,
    "rateLimitType": "five_hour",
    "overageStatus": "rejected",
    "overageDisabledReason": "org_level_disabled",
    "isUsingOverage": False,
}


SAMPLES = json.loads((Path(__file__).parent / "fakes" / "limit_samples.json").read_text())
SIGNALS = {"claude": CLAUDE_LIMITS, "codex": CODEX_LIMITS, "gemini": GEMINI_LIMITS}


def expected(resets: Any) -> float | None:
    if isinstance(resets, dict):
        return NOW + resets["after"]
    return at(resets) if isinstance(resets, str) else resets


@pytest.mark.parametrize(
    "sample", SAMPLES["samples"], ids=lambda s: f"{s['cli']}: {s['text'][:40]}"
)
def test_each_clis_limit_text_and_its_reset(sample: dict[str, Any]) -> None:
    """Claude Code, codex and gemini as they say it; codex writes local time (UTC here);
    Google resets gemini's daily quota at midnight Pacific time."""
    text = sample["text"]
    limit = recognise("agent", SIGNALS[sample["cli"]], stdout="", errors=[None, text], now=NOW)
    assert limit is not None and limit.resets_at == expected(sample["resets"])
    assert limit.message == " ".join(text.split())


@pytest.mark.parametrize(
    "text",
    [
        "the tests failed: assert f(-1) == 1",
        "API Error: 500 Internal server error",
        "I fixed the rate limiter so it no longer reports 'usage limit reached'",
    ],
)
def test_an_error_that_is_no_limit(text: str) -> None:
    for signals in (CLAUDE_LIMITS, GEMINI_LIMITS):
        assert recognise("agent", signals, stdout="", errors=[text], now=NOW) is None


def test_the_rejected_rate_limit_event_gives_the_reset() -> None:
    stdout = claude_limited("You've hit your limit · resets 2pm (Asia/Shanghai)", REJECTED)
    limit = recognise("claude", CLAUDE_LIMITS, stdout=stdout, errors=["x"], now=NOW)
    assert limit is not None and limit.resets_at == RESETS_AT
    bare = recognise("claude", CLAUDE_LIMITS, stdout=stdout, errors=[], now=NOW)
    assert bare is not None and bare.message == "rate_limit_event: status rejected (five_hour)"
    allowed = stdout.replace('"rejected", "resetsAt"', '"allowed_warning", "resetsAt"')
    assert recognise("claude", CLAUDE_LIMITS, stdout=allowed, errors=[], now=NOW) is None


def test_time_readers() -> None:
    assert duration_seconds("3h2m1.5s") == 3 * 3600 + 2 * 60 + 1.5
    assert duration_seconds("no duration") is None
    # a zone this machine does not know: its own local time (UTC here)
    assert clock_time("1pm", "Mars/Olympus", NOW) == at("2026-11-29T13:00Z")
    assert clock_time("Feb 31, 1pm", "UTC", NOW) is None
    assert clock_time("Jan 2, 9:15am", "UTC", NOW) == at("2027-01-02T09:15Z")  # next year's


# through the preset, as an attempt: the CLI's whole output and its exit code ----------------


def fake_cli(tmp_path: Path, name: str, stdout: str, code: int) -> dict[str, str]:
    """`name` on a PATH of its own: prints `stdout`, exits `code`."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    (tmp_path / f"{name}.out").write_text(stdout)
    script = folder / name
    script.write_text(
        f"#!{sys.executable}\nimport sys\nsys.stdin.read()\n"
        f"sys.stdout.write(open({str(tmp_path / f'{name}.out')!r}).read())\nsys.exit({code})\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return {"PATH": f"{folder}{os.pathsep}{os.environ['PATH']}", **AGENT_CREDENTIALS}


def attempt(tmp_path: Path, name: str, stdout: str, code: int) -> Any:
    actor = AgentActor(PRESETS[name], environ=fake_cli(tmp_path, name, stdout, code))
    artifacts = tmp_path / "001"
    artifacts.mkdir(exist_ok=True)
    ctx = ActorContext(loop_id="ralph-x-1", iteration=1, workdir=tmp_path, artifacts_dir=artifacts)
    return actor.act("fix it", ctx)


def test_claude_stopped_by_its_plan_limit(tmp_path: Path) -> None:
    stdout = claude_limited("You've hit your limit · resets 1pm (Europe/Lisbon)", REJECTED)
    with pytest.raises(UsageLimited) as caught:
        attempt(tmp_path, "claude", stdout, 1)
    limit = caught.value.limit
    assert (limit.source, limit.resets_at) == ("claude", RESETS_AT)
    assert limit.message == "You've hit your limit · resets 1pm (Europe/Lisbon)"
    assert (tmp_path / "001" / "actor.log").is_file()  # its output kept, as any attempt's


def test_a_successful_run_that_talks_about_limits_is_no_limit(tmp_path: Path) -> None:
    """The agent's own answer is its work, not a limit: a run that succeeded is never one."""
    text = "Done: the banner now says You've hit your limit · resets 1pm (Europe/Lisbon)"
    stdout = events(
        CLAUDE_INIT,
        {"type": "rate_limit_event", "rate_limit_info": {**REJECTED, "status": "allowed"}},
        {"type": "result", "subtype": "success", "is_error": False, "result": text},
    )
    assert attempt(tmp_path, "claude", stdout, 0).summary == text


def test_codex_exec_json_usage_limit(tmp_path: Path) -> None:
    said = (
        "You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing) or "
        "try again in 3 hours 10 minutes."
    )
    stdout = events(
        {"type": "thread.started", "thread_id": "t"},
        {"type": "turn.started"},
        {"type": "error", "message": said},
        {"type": "turn.failed", "error": {"message": said}},
    )
    with pytest.raises(UsageLimited) as caught:
        attempt(tmp_path, "codex", stdout, 1)
    reset = caught.value.limit.resets_at
    assert (
        reset is not None
        and 3 * 3600 + 600 - 60 < reset - datetime.now(UTC).timestamp() <= 3 * 3600 + 600
    )


def test_gemini_stream_json_daily_quota(tmp_path: Path) -> None:
    stdout = events(
        {"type": "init", "session_id": "s", "model": "gemini-2.5-pro"},
        {
            "type": "result",
            "status": "error",
            "error": {
                "type": "TerminalQuotaError",
                "message": "[API Error: You have exhausted your daily quota on this model.]",
            },
            "stats": {"total_tokens": 0, "input_tokens": 0, "output_tokens": 0},
        },
    )
    with pytest.raises(UsageLimited) as caught:
        attempt(tmp_path, "gemini", stdout, 1)
    assert caught.value.limit.source == "gemini" and caught.value.limit.resets_at is not None


def test_status_says_waiting_until() -> None:
    assert waiting_text("2026-11-29T13:05:00+00:00").startswith("waiting until ")
    assert waiting_text("soon") == "waiting until soon"
