"""One redaction rule wherever a string leaves ralph: secrets in escaped forms, secret-shaped
tokens in the task, and pytest's JUnit reports that outlived a kill -9."""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

from ralph.memory.store import MemoryStore

from ..conftest import RunCli
from ..fakes.provider_server import FakeProvider
from ..test_loop import REFLECTION
from .conftest import (
    args,
    arm,
    assert_invariants,
    check_command,
    finish,
    git,
    heuristic,
    plan,
    start,
    write,
)

SECRETS = {
    "MY_SERVICE_TOKEN": 'hunter2"Quote99',
    "VAULT_PASSWORD": "C:\\vault\\Geheim77",
    "API_SECRET": "p@ss w/rd&x=1 ünï",
}
SHAPED = {
    "github": "ghp_" + "Qw3" * 12,
    "openai": "sk-" + "Zx8Yw7Vu6" * 3,
    "aws": "AKIA" + "ZXCVBNMASDFGHJKL",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJyYWxwaC10ZXN0In0.c2lnbmF0dXJlLXZhbHVl",
}


def printed_forms(value: str) -> list[str]:
    """How programs print a value: JSON-escaped, repr, URL-encoded, shell-quoted, and raw."""
    return [
        value,
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        repr(value)[1:-1],
        quote(value, safe=""),
        quote_plus(value),
        shlex.quote(value),
    ]


LEAKY_TEST = """\
import json, os, shlex
from urllib.parse import quote, quote_plus


def test_prints_its_credentials() -> None:
    for name in {names!r}:
        value = os.environ[name]
        print(json.dumps({{"token": value}}), repr(value), quote(value, safe=""))
        print(quote_plus(value), shlex.quote(value))
    assert False, json.dumps([os.environ[name] for name in {names!r}])
"""


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProvider]:
    with FakeProvider(default_text=json.dumps(REFLECTION)) as fake:
        for name, value in fake.environ().items():
            monkeypatch.setenv(name, value)
        yield fake


def test_secrets_in_every_printed_form_and_the_task_reach_nothing(
    ralph: RunCli,
    project: Path,
    provider: FakeProvider,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    (project / "tests" / "test_leak.py").write_text(LEAKY_TEST.format(names=sorted(SECRETS)))
    git(project, "add", "-A")
    git(project, "commit", "-qm", "a test that prints credentials")
    agent_says = tmp_path / "agent-says.txt"
    agent_says.write_text(
        "\n".join(
            [json.dumps({"type": "tool_result", "content": f"env: {v}"}) for v in SECRETS.values()]
            + [" ".join(printed_forms(v)) for v in SECRETS.values()]
        )
    )
    plan(project, {"default": {**write("partial"), "read": str(agent_says)}})
    task = f"make f pass; push with {SHAPED['github']} and {SHAPED['openai']}, " + (
        f"aws {SHAPED['aws']}, session {SHAPED['jwt']}"
    )
    provider.answers("no JSON here; the reflector is asked to repair its answer")
    argv = args("--reflector", "openai:fake-model", "--max-iterations", "2", task=task)
    result = ralph(*argv, cwd=project)
    assert result.code == 1, result.err
    assert len(provider.chat_requests) >= 3, "a reflection, its repair, another reflection"
    store = MemoryStore(project)
    written = {
        str(path): path.read_text(errors="replace")
        for path in store.base.rglob("*")
        if path.is_file()
    }
    seen = Path(os.environ["SEEN_DIR"])
    prompts = {str(p): p.read_text() for p in seen.glob("prompt-*.md")}
    assert prompts, "the agent got prompts"
    sent = {f"request {i}": r.raw.decode() for i, r in enumerate(provider.chat_requests)}
    places = {**written, **prompts, **sent, "stdout": result.out, "stderr": result.err}
    assert any("REDACTED" in text for text in written.values())
    for value in [*SECRETS.values(), *SHAPED.values()]:
        for form in printed_forms(value):
            for place, text in places.items():
                assert form not in text, (value, form, place)
    state = json.loads(store.state_path(json.loads(result.out)["loop_id"]).read_text())
    assert "[REDACTED]" in state["task"] and "make f pass" in state["task"]
    assert_invariants(project, finished=False)


def test_junit_reports_stay_in_the_private_folder_and_go_on_resume(
    ralph: RunCli, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kill -9 while pytest runs left `/tmp/ralph-junit-*.xml`, assertion text and all."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    killer = f"{sys.executable} {os.environ['KILLER']}"
    plan(project, {"1": write("partial")})
    arm("check", 2)  # the check of iteration 1 (the baseline is the first run)
    test = f"{killer} check; {check_command()}"
    code, _, err = finish(start(project, *heuristic("--test", test)))
    assert code == -signal.SIGKILL, err
    assert not list(temp.glob("*junit*")), "a JUnit report outside the loop's private folder"
    private = MemoryStore(project).base / "tmp"
    assert list(private.glob("ralph-*-junit-*.xml")), "the killed check's report is there"
    assert private.stat().st_mode & 0o077 == 0, "only the user can read it"
    loop_id = MemoryStore(project).loop_ids()[0]
    plan(project, {"default": write("full")})
    resumed = ralph("resume", loop_id, cwd=project)
    assert resumed.code == 0, resumed.err
    assert not list(private.glob("ralph-*")), "resume cleared the leftovers"
    assert_invariants(project)
