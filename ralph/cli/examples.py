"""The Examples section of every command's `--help`: real command lines a person can copy.

One table, keyed by the command's path under `ralph`, so app.py attaches them all in one place
(`attach`) and a test can see that no registered command lacks them."""

from __future__ import annotations

from typing import Any

EXAMPLES: dict[str, tuple[str, ...]] = {
    "run": (
        'ralph run "make the date parser accept ISO weeks"',
        'ralph run "fix the failing tests" --actor claude --max-iterations 5',
        'ralph run "fix the type errors" --check mypy --dry-run',
        'ralph run "speed up the import" --worktree --json',
    ),
    "resume": ("ralph resume", "ralph resume ddbe9a81"),
    "status": ("ralph status", "ralph status ddbe9a81 --json", "ralph status --markdown"),
    "abort": ("ralph abort", "ralph abort ddbe9a81"),
    "check": ("ralph check", "ralph check --check mypy", 'ralph check --test "pytest -x" --json'),
    "doctor": ("ralph doctor", "ralph doctor --no-run", "ralph doctor --json"),
    "init": ("ralph init", "ralph init --no-run", "ralph init --force --interactive"),
    "demo": ("ralph demo", "ralph demo --keep /tmp/ralph-demo --actor script:fix"),
    "apply": ("ralph apply", "ralph apply ddbe9a81 --iteration 2", "ralph apply ddbe9a81 --force"),
    "prune": ("ralph prune --dry-run", "ralph prune --keep 3", "ralph prune ddbe9a81"),
    "trace": ("ralph trace ddbe9a81", "ralph trace ddbe9a81 2 --json"),
    "prompt": ("ralph prompt ddbe9a81", "ralph prompt ddbe9a81 2"),
    "feedback": (
        "ralph feedback ddbe9a81 --accept",
        'ralph feedback ddbe9a81 --reject --note "the fix broke the API contract"',
    ),
    "analyze": (
        "ralph analyze",
        "ralph analyze ddbe9a81 --json",
        "ralph analyze --html report.html",
    ),
    "batch": ("ralph batch TASKS.yaml", "ralph batch TASKS.yaml --jobs 2 --json"),
    "bench": (
        "ralph bench TASKS.yaml",
        "ralph bench TASKS.yaml --arm no-memory=omega=0 --arm omega1=omega=1 --repeats 3 --csv",
        "ralph bench TASKS.yaml --html bench.html",
    ),
    "mcp": ("ralph mcp", "ralph mcp --project ~/src/app"),
    "reflections list": ("ralph reflections list", "ralph reflections list --loop ddbe9a81 --json"),
    "reflections show": ("ralph reflections show ddbe9a81", "ralph reflections show ddbe9a81 2"),
    "reflections validate": (
        "ralph reflections validate",
        "ralph reflections validate .aiwg/ralph/loops/ddbe9a81",
    ),
    "reflections search": (
        'ralph reflections search "import error"',
        "ralph reflections search timezone --since 7d --json",
    ),
    "reflections obsolete": (
        "ralph reflections obsolete ddbe9a81 2",
        "ralph reflections obsolete ddbe9a81 2 --undo",
    ),
    "reflections lessons": (
        "ralph reflections lessons",
        "ralph reflections lessons --all --json",
    ),
    "reflections import": (
        "ralph reflections import memory.zip --dry-run",
        "ralph reflections import memory.zip",
    ),
    "reflections export": (
        "ralph reflections export --zip memory.zip",
        "ralph reflections export ddbe9a81 --dir exported/",
        "ralph reflections export --prov -o prov.json",
    ),
    "hook claude-stop": ("ralph hook claude-stop", "ralph hook claude-stop --max-blocks 5"),
    "hook install claude": ("ralph hook install claude", "ralph hook install claude --project ."),
}


def epilog(path: str) -> str:
    """The Examples section; click's `\\b` marker keeps each line as written, unwrapped."""
    return _section(list(EXAMPLES[path]))


def attach(app: Any, prefix: str = "") -> list[str]:
    """Give every command registered on `app` and its sub-apps its Examples section, and each
    group the first example of each of its commands; returns those first examples."""
    firsts: list[str] = []
    for info in app.registered_commands:
        path = f"{prefix}{info.name or info.callback.__name__.replace('_', '-')}"
        info.epilog = epilog(path)
        firsts.append(EXAMPLES[path][0])
    for group in app.registered_groups:
        inner = attach(group.typer_instance, f"{prefix}{group.name} ")
        group.epilog = _section(inner)
        firsts += inner
    return firsts


ROOT = (
    "ralph init",
    "ralph doctor",
    'ralph run "make the date parser accept ISO weeks"',
    "ralph status",
    "ralph apply",
)


def attach_all(app: Any) -> None:
    """Every command's, every group's and `ralph --help`'s Examples."""
    attach(app)
    app.info.epilog = _section(list(ROOT))


def _section(lines: list[str]) -> str:
    return "Examples:\n\n\b\n" + "\n".join(f"  {line}" for line in lines)
