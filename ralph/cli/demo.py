"""`ralph demo`: a small buggy repository and the real loop run on it, offline.

The repository has a date parser with failing tests, a type error and a lint error. By default
the actor is scripted (labelled as such) and the reflector heuristic, so no network and no key
are needed; the script finds the full fix only when the previous iteration's reflection is in
its prompt, which is what the demo is there to show. `--actor claude` (or any actor) runs the
same repository with a real agent.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from ralph import glyphs
from ralph.errors import PreflightError
from ralph.memory.shown import RecordView
from ralph.memory.store import MemoryStore
from ralph.process import capture
from ralph.rendering import Wrapped

TASK = "make the date parser accept every format its tests use, with clean mypy and ruff"

PARSER_BUGGY = '''\
"""Parse the date formats our users type."""

import os
from datetime import date, datetime


def parse_date(text: str) -> date:
    """ISO dates (2024-03-04), US dates (03/04/2024) and compact dates (20240304)."""
    text = text.strip()
    return datetime.strptime(text, "%Y-%m-%d").date()


def days_between(start: str, end: str) -> int:
    delta: str = parse_date(end) - parse_date(start)
    return delta.days
'''

PARSER_FIXED = '''\
"""Parse the date formats our users type."""

from datetime import date, datetime


def parse_date(text: str) -> date:
    """ISO dates (2024-03-04), US dates (03/04/2024) and compact dates (20240304)."""
    text = text.strip()
    if "/" in text:
        return datetime.strptime(text, "%m/%d/%Y").date()
    if text.isdigit() and len(text) == 8:
        return date(int(text[:4]), int(text[4:6]), int(text[6:]))
    year, month, day = text.split("-")
    return date(int(year), int(month), int(day))


def days_between(start: str, end: str) -> int:
    return (parse_date(end) - parse_date(start)).days
'''

TESTS = """\
from datetime import date

from dates.parser import days_between, parse_date


def test_iso() -> None:
    assert parse_date("2024-03-04") == date(2024, 3, 4)


def test_us_format_is_month_first() -> None:
    assert parse_date("03/04/2024") == date(2024, 3, 4)


def test_compact() -> None:
    assert parse_date("20240304") == date(2024, 3, 4)


def test_unpadded_iso() -> None:
    assert parse_date("2024-3-4") == date(2024, 3, 4)


def test_days_between() -> None:
    assert days_between("2024-03-01", "03/04/2024") == 3
"""

PYPROJECT = """\
[project]
name = "dates"
version = "0.0.1"

[tool.pytest.ini_options]
testpaths = ["tests"]
pythonpath = ["."]

[tool.mypy]
strict = true
files = ["dates"]

[tool.ruff]
line-length = 100
"""

# Iteration 1 fixes the lint and type errors and guesses at the formats: day-first slashes
# and no compact form. Iteration 2 finds the real fix only if the reflection on iteration 1
# (which names the failing tests and their locations) is in its prompt.
SCRIPT = {
    "iterations": [
        {
            "summary": "Removed the unused import, fixed the annotation, added slash dates.",
            "write": {
                "dates/parser.py": PARSER_FIXED.replace("%m/%d/%Y", "%d/%m/%Y").replace(
                    "    if text.isdigit() and len(text) == 8:\n"
                    "        return date(int(text[:4]), int(text[4:6]), int(text[6:]))\n",
                    "",
                )
            },
            "tokens_in": 1800,
            "tokens_out": 420,
        },
        {
            # Words of the reflection's insight, not of the diagnostics the prompt shows anyway.
            "when_prompt_contains": [
                "Reflections from your earlier attempts",
                "make tests/test_parser.py::test_us_format_is_month_first pass",
            ],
            "summary": "Used month-first slash dates and added compact YYYYMMDD dates, "
            "as my reflection on iteration 1 said.",
            "write": {"dates/parser.py": PARSER_FIXED},
            "tokens_in": 2300,
            "tokens_out": 380,
            "otherwise": {
                "summary": "Without my earlier notes I tried a different format order.",
                "write": {"dates/parser.py": PARSER_FIXED.replace("%m/%d/%Y", "%Y/%m/%d")},
                "tokens_in": 1900,
                "tokens_out": 350,
            },
        },
    ]
}


def build_repository(target: Path) -> Path:
    """Write the demo project, with its ralph config and scripted actor, as one git commit."""
    import yaml

    (target / "dates").mkdir(parents=True, exist_ok=True)
    (target / "tests").mkdir(exist_ok=True)
    (target / "dates" / "__init__.py").write_text("")
    (target / "dates" / "parser.py").write_text(PARSER_BUGGY)
    (target / "tests" / "test_parser.py").write_text(TESTS)
    (target / "pyproject.toml").write_text(PYPROJECT)
    (target / ".gitignore").write_text("__pycache__/\n.mypy_cache/\n.pytest_cache/\n.ruff_cache/\n")
    (target / "demo-actor.yaml").write_text(yaml.safe_dump(SCRIPT, sort_keys=False, width=100))
    python = sys.executable
    config = {
        "checks": [
            {"name": "pytest", "command": f"{python} -m pytest -q -p no:cacheprovider"},
            {"name": "mypy", "command": f"{python} -m mypy --no-incremental", "parser": "mypy"},
            {"name": "ruff", "command": f"{python} -m ruff check .", "parser": "ruff"},
        ],
        "max_iterations": 4,
    }
    (target / ".aiwg" / "ralph").mkdir(parents=True, exist_ok=True)
    (target / ".aiwg" / "ralph" / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    _git(target, "init", "-q", "-b", "main")
    _git(target, "add", "-A")
    _git(target, "commit", "-q", "-m", "demo: a date parser with failing checks")
    return target


def _git(cwd: Path, *args: str) -> None:
    identity = ["-c", "user.name=ralph demo", "-c", "user.email=demo@ralph.invalid"]
    done = capture(["git", *identity, *args], cwd=cwd)
    if done is None or done.exit_code != 0:
        why = done.stderr.decode("utf-8", "replace").strip() if done else "git did not start"
        raise PreflightError(f"git {args[0]} failed in the demo repository: {why}")


def require_tools() -> None:
    missing = [m for m in ("pytest", "mypy", "ruff") if not _importable(m)]
    if shutil.which("git") is None:
        missing.append("git")
    if missing:
        raise PreflightError(
            f"the demo needs {', '.join(missing)}",
            hint="pip install 'ralph-reflexion[test]' (or pip install pytest mypy ruff)",
        )


def _importable(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def prepare(keep: Path | None) -> Path:
    require_tools()
    if keep is not None:
        keep = keep.resolve()
        if keep.exists() and any(keep.iterdir()):
            raise PreflightError(f"{keep} is not empty", hint="give --keep a new or empty folder")
        keep.mkdir(parents=True, exist_ok=True)
        return build_repository(keep)
    return build_repository(Path(tempfile.mkdtemp(prefix="ralph-demo-")))


SCRIPTED_ACTOR = "script:demo-actor.yaml"


def flags_for(actor: str | None, reflector: str | None) -> dict[str, Any]:
    """The scripted actor and heuristic reflector unless a real actor is asked for.

    A real actor reflects with its own model by default (README, Actors).
    """
    if actor is None:
        return {"actor": SCRIPTED_ACTOR, "reflector": reflector or "heuristic"}
    return {"actor": actor, "reflector": reflector}


def show_outcome(root: Path, loop_id: str, console: Any, *, kept: bool = True) -> None:
    """The reflections the loop wrote and its learning curve: memory at work."""
    store = MemoryStore(root)
    records = store.valid_records(loop_id)
    for record in records:
        console.rule(f"iteration {record.iteration}")
        console.print(RecordView(record))
    state = store.read_state(loop_id)
    rewards = [state.baseline.reward if state.baseline else 0.0, *state.reward_history]
    console.rule("learning curve")
    console.print(
        f"reward  {glyphs.sparkline(rewards)}  "
        + " -> ".join(f"{r:.2f}" for r in rewards)
        + "   (baseline first)"
    )
    if kept:
        for label, path in (("repository:", root), ("records:", store.reflections_dir(loop_id))):
            # a long path goes whole onto the next line, never split by the terminal
            console.print(Wrapped(f"{label:<11} {path}"), crop=False)
    else:
        console.print(
            "the demo repository is removed now; `ralph demo --keep DIR` keeps it to look at",
            markup=False,
        )
