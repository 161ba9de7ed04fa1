"""`script:FILE`: an offline actor that replays edits from a YAML file, for the demo and tests.

```yaml
iterations:
  - summary: first attempt, a partial fix
    edits: |
      src/dates.py
      <<<<<<< SEARCH
      ...
      >>>>>>> REPLACE
  - when_prompt_contains: ["time zone"]   # every string must be in the prompt
    write: {src/dates.py: "..."}
    delete: [old.py]
    tokens_in: 1200
    tokens_out: 300
    cost_usd: 0.004
    otherwise: {summary: "no idea", edits: "..."}
```

Iteration N plays item N (1-based); the last item repeats when there are fewer. An item whose
`when_prompt_contains` is not all in the prompt plays its `otherwise:` instead: this is how the
demo shows memory at work, because the full fix is only found once the previous reflection's
words reach the prompt.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ralph.actors.base import ActorContext, ActorResult, ToolCall
from ralph.actors.command import write_log, write_prompt
from ralph.actors.edits import UnsafePath, apply_edits, check_path, write_atomic
from ralph.errors import ConfigError
from ralph.providers.base import ChatClient

STEP_KEYS = frozenset(
    {"write", "edits", "delete", "summary", "tokens_in", "tokens_out", "cost_usd"}
)
ITEM_KEYS = STEP_KEYS | {"when_prompt_contains", "otherwise"}


@dataclass
class Step:
    """What one iteration does to the tree, and the usage it pretends to have spent."""

    write: dict[str, str] = field(default_factory=dict)
    edits: str = ""
    delete: list[str] = field(default_factory=list)
    summary: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: float | None = None


@dataclass
class ScriptItem:
    step: Step
    when_prompt_contains: list[str] = field(default_factory=list)
    otherwise: Step | None = None

    def choose(self, prompt: str) -> tuple[Step | None, str]:
        missing = [text for text in self.when_prompt_contains if text not in prompt]
        if not missing:
            return self.step, "when" if self.when_prompt_contains else "always"
        return self.otherwise, "otherwise"


def load_script(path: Path) -> list[ScriptItem]:
    """Read and validate a script file; any problem is a ConfigError naming the file."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"script {path}: cannot read ({exc.strerror})") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"script {path}: invalid YAML{at}: {problem}") from exc
    items = data.get("iterations") if isinstance(data, dict) else None
    if not isinstance(items, list) or not items:
        raise ConfigError(
            f"script {path}: needs a non-empty `iterations:` list",
            hint="see ralph/actors/scripted.py for the format",
        )
    return [_item(path, i, item) for i, item in enumerate(items, start=1)]


def _item(path: Path, number: int, raw: Any) -> ScriptItem:
    where = f"script {path}: iteration {number}"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: must be a mapping")
    _check_keys(where, raw, ITEM_KEYS)
    when = raw.get("when_prompt_contains") or []
    when = [when] if isinstance(when, str) else when
    if not isinstance(when, list) or not all(isinstance(w, str) for w in when):
        raise ConfigError(f"{where}: when_prompt_contains must be a list of strings")
    otherwise = raw.get("otherwise")
    if otherwise is not None and not isinstance(otherwise, dict):
        raise ConfigError(f"{where}: otherwise must be a mapping")
    return ScriptItem(
        step=_step(where, {k: v for k, v in raw.items() if k in STEP_KEYS}),
        when_prompt_contains=when,
        otherwise=_step(f"{where} otherwise", otherwise) if otherwise is not None else None,
    )


def _step(where: str, raw: dict[str, Any]) -> Step:
    _check_keys(where, raw, STEP_KEYS)
    write = raw.get("write") or {}
    if not isinstance(write, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in write.items()
    ):
        raise ConfigError(f"{where}: write must map paths to text")
    delete = raw.get("delete") or []
    if not isinstance(delete, list) or not all(isinstance(p, str) for p in delete):
        raise ConfigError(f"{where}: delete must be a list of paths")
    edits = raw.get("edits") or ""
    if not isinstance(edits, str):
        raise ConfigError(f"{where}: edits must be a text of SEARCH/REPLACE blocks")
    summary = raw.get("summary")
    return Step(
        write=write,
        edits=edits,
        delete=delete,
        summary=None if summary is None else str(summary),
        tokens_in=_count(_number(where, raw, "tokens_in")),
        tokens_out=_count(_number(where, raw, "tokens_out")),
        cost_usd=_number(where, raw, "cost_usd"),
    )


def _check_keys(where: str, raw: dict[str, Any], valid: frozenset[str]) -> None:
    unknown = sorted(set(raw) - valid)
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}", hint=f"valid: {sorted(valid)}")


def _number(where: str, raw: dict[str, Any], key: str) -> float | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ConfigError(f"{where}: {key} must be a non-negative number")
    return float(value)


def _count(value: float | None) -> int | None:
    return None if value is None else int(value)


class ScriptedActor:
    """Plays a script: deterministic, offline, no model."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.items = load_script(path)
        self.name = f"script:{path.name}"

    def preflight(self) -> None:
        """Everything was checked when the script was loaded."""

    def describe(self) -> str:
        return f"the scripted edits of {self.path} (offline, no model)"

    def act(self, prompt: str, ctx: ActorContext) -> ActorResult:
        started = time.monotonic()
        write_prompt(ctx, prompt)
        item = self.items[min(max(ctx.iteration, 1), len(self.items)) - 1]
        step, branch = item.choose(prompt)
        log = [f"script {self.path.name}: iteration {ctx.iteration}, branch {branch}"]
        calls: list[ToolCall] = []
        unmatched: list[str] = []
        if step is not None:
            play(step, ctx.workdir, log, calls, unmatched)
        text = "\n".join(log) + "\n"
        write_log(ctx, text)
        if ctx.on_output is not None:
            ctx.on_output("stdout", text)
        return ActorResult(
            output=text,
            exit_code=1 if unmatched else 0,
            duration_ms=int((time.monotonic() - started) * 1000),
            tokens_in=step.tokens_in if step else None,
            tokens_out=step.tokens_out if step else None,
            cost_usd=step.cost_usd if step else None,
            tool_calls=calls,
            summary=step.summary if step else "the script has nothing for this prompt",
            unmatched_edits=unmatched,
        )

    def chat_client(self) -> ChatClient | None:
        return None


def play(step: Step, workdir: Path, log: list[str], calls: list[ToolCall], bad: list[str]) -> None:
    """Apply one step: writes, then edit blocks, then deletions."""
    for rel, content in step.write.items():
        try:
            write_atomic(check_path(workdir, rel), content)
        except (UnsafePath, OSError) as exc:
            bad.append(f"{rel}: cannot write: {exc}")
            continue
        calls.append(ToolCall("write", rel))
        log.append(f"wrote {rel}")
    if step.edits.strip():
        report = apply_edits(step.edits, workdir)
        for rel in report.applied + report.created:
            calls.append(ToolCall("edit", rel))
            log.append(f"edited {rel}")
        bad.extend(report.unmatched())
    for rel in step.delete:
        try:
            target = check_path(workdir, rel)
            if target.is_file() or target.is_symlink():
                target.unlink()
                calls.append(ToolCall("delete", rel))
                log.append(f"deleted {rel}")
        except (UnsafePath, OSError) as exc:
            bad.append(f"{rel}: cannot delete: {exc}")
    log.extend(f"failed: {text}" for text in bad)
