"""Secrets never reach records, logs or the reflector; ids, names and YAML cannot be abused."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from ralph.errors import RalphError
from ralph.memory.store import MemoryStore
from ralph.templates import render

from ..conftest import RunCli
from ..fakes.provider_server import FakeProvider
from ..test_loop import REFLECTION
from .conftest import args, assert_invariants, git, heuristic, plan, write

ENV_SECRET = "planted-env-secret-4f8a9b1c"
SHAPED = {
    "openai": "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3",
    "github": "ghp_" + "Zx9" * 12,
    "aws": "AKIA" + "QWERTYUIOPASDFGH",
}
SECRETS = [ENV_SECRET, *SHAPED.values()]

LEAKY_TEST = f"""\
import os


def test_prints_its_credentials() -> None:
    print("token", os.environ["MY_SERVICE_TOKEN"], "and {SHAPED["openai"]}")
    assert False, f"service said no to {{os.environ['MY_SERVICE_TOKEN']}} / {SHAPED["aws"]}"
"""


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProvider]:
    with FakeProvider(default_text=json.dumps(REFLECTION)) as fake:
        for name, value in fake.environ().items():
            monkeypatch.setenv(name, value)
        yield fake


def test_planted_secrets_reach_no_record_log_or_reflector_prompt(
    ralph: RunCli, project: Path, provider: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", ENV_SECRET)
    (project / "tests" / "test_leak.py").write_text(LEAKY_TEST)
    git(project, "add", "-A")
    git(project, "commit", "-qm", "a test that prints credentials")
    (project / "creds.local").write_text(f"github={SHAPED['github']}\nenv={ENV_SECRET}\n")
    source = f'TOKEN = "{SHAPED["github"]}"\n{write("partial")["write"]["calc.py"]}'
    plan(project, {"default": {"read": "creds.local", "write": {"calc.py": source}}})
    result = ralph(*args("--reflector", "openai:fake-model", "--max-iterations", "2"), cwd=project)
    assert result.code == 1, result.err
    assert provider.chat_requests, "the reflector was asked"
    sent = "\n".join(json.dumps(r.body) for r in provider.chat_requests)
    assert "REDACTED" in sent  # the secrets were there to leak, and were replaced
    written = {
        str(path): path.read_text(errors="replace")
        for path in MemoryStore(project).base.rglob("*")
        if path.is_file()
    }
    assert any("REDACTED" in text for text in written.values())
    for secret in SECRETS:
        assert secret not in sent, secret
        assert secret not in result.out and secret not in result.err, secret
        for path, text in written.items():
            assert secret not in text, (secret, path)
    (project / "creds.local").unlink()
    assert_invariants(project)


@pytest.mark.parametrize(
    "argv",
    [
        ["resume", "../../../etc"],
        ["status", "ralph-../../x"],
        ["abort", "/etc/passwd"],
        ["reflections", "show", "../ralph-x"],
        ["reflections", "list", "--loop", "ralph-a/../../b"],
    ],
)
def test_loop_ids_cannot_traverse_paths(argv: list[str], ralph: RunCli, project: Path) -> None:
    (project / ".aiwg" / "ralph").mkdir(parents=True)
    result = ralph(*argv, cwd=project)
    assert result.code == 2 and "invalid loop id" in result.err, result.err


def test_run_with_a_traversing_loop_id_is_refused(ralph: RunCli, project: Path) -> None:
    result = ralph(*heuristic("--loop-id", "ralph-x/../../../escape"), cwd=project)
    assert result.code == 2 and "invalid loop id" in result.err
    assert not (project.parent / "escape").exists()


@pytest.mark.parametrize("name", ["../actor", "/etc/passwd", "actor/../../x", "", "ACTOR"])
def test_template_names_cannot_traverse_paths(name: str, project: Path) -> None:
    with pytest.raises(RalphError):
        render(name, {}, project_root=project)


def test_yaml_is_loaded_safely(ralph: RunCli, project: Path) -> None:
    config = project / ".aiwg" / "ralph" / "config.yaml"
    config.parent.mkdir(parents=True)
    pwned = project.parent / "pwned"
    config.write_text(f'max_iterations: !!python/object/apply:os.system ["touch {pwned}"]\n')
    result = ralph(*heuristic(), cwd=project)
    assert result.code == 2 and "cannot read YAML" in result.err
    script = project.parent / "script.yaml"
    script.write_text(f'- !!python/object/apply:os.system ["touch {pwned}"]\n')
    config.unlink()
    result = ralph("run", "x", "--actor", f"script:{script}", "--test", "false", cwd=project)
    assert result.code == 2 and "YAML" in result.err, result.err
    assert not pwned.exists()
