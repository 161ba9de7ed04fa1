"""The `judge` check: an LLM scores the loop's diff against criteria (Self-Refine's feedback).

For work without tests the judge is the check: it reads the task, the criteria and the diff
since the loop started, and answers one JSON object with a score 1-10 per dimension and
overall, issues (file:line where it can) and suggestions. The issues become diagnostics, so
the next prompt names them like any other check's failures. It passes at `overall >=
threshold` (default 8). A judge is always a target (judging.py): it adds requirements, it never
makes a failing test pass. A malformed answer is repaired once, as the reflector does; after
that the check reports an error, never a pass. A run's model calls go with its outcome
(`CheckOutcome.calls`): the loop counts their tokens and cost like the actor's and the
reflector's, in the record and against the budgets.
"""

from __future__ import annotations

import functools
import json
import re
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ralph import process
from ralph.config import CheckSpec
from ralph.errors import PreflightError, one_line
from ralph.evaluators.base import CheckOutcome, JudgeContext, OutputCallback
from ralph.process import DEFAULT_CAP, ProcessResult
from ralph.providers.answers import ask_json, extract_json_object, repair_context
from ralph.providers.base import Message
from ralph.providers.registry import make_client
from ralph.records import CheckResult, Diagnostic, ModelCall
from ralph.redact import redact
from ralph.templates import render
from ralph.workspace import hardened
from ralph.workspace.base import cap_diff

if TYPE_CHECKING:
    from ralph.providers.base import ChatClient

DEFAULT_THRESHOLD = 8.0
DEFAULT_DIMENSIONS = ("correctness", "completeness", "clarity")
DIFF_CHARS = 30_000
MAX_ANSWER_TOKENS = 1500
SYSTEM_PROMPT = (
    "You are the judge of a Self-Refine coding loop: you score a change against its task and "
    "criteria. You reply with exactly one JSON object and nothing else."
)
ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["overall"],
    "properties": {
        "overall": {"type": "number", "minimum": 1, "maximum": 10},
        "scores": {
            "type": "object",
            "additionalProperties": {"type": "number", "minimum": 1, "maximum": 10},
        },
        "issues": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["message"],
                "properties": {
                    "file": {"type": ["string", "null"]},
                    "line": {"type": ["integer", "null"], "minimum": 1},
                    "message": {"type": "string", "minLength": 1},
                },
            },
        },
        "suggestions": {"type": "array", "items": {"type": "string"}},
    },
}
SCORE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:/\s*10)?\s*$")


class JudgeCheck:
    """A check whose verdict is a model's: see the module docstring."""

    def __init__(
        self,
        spec: CheckSpec,
        *,
        timeout: float | None = None,
        cap: int = DEFAULT_CAP,
        context: JudgeContext | None = None,
    ) -> None:
        self.spec = spec
        self.timeout = timeout
        self.cap = cap
        self.bound = context is not None  # built by a loop, which gave its task and model
        self.task = context.task if context else ""
        # the reflector's, unless the spec names a model
        self.client: ChatClient | None = context.client if context else None
        # the diff is taken against it; HEAD at the first run
        self.base_commit: str | None = context.base_commit if context else None
        self._lock = threading.Lock()

    def tool(self) -> str:
        return "sh"  # no program to find: the model is asked when the check runs

    def preflight(self) -> None:
        """A judge needs a model: its own (`model:`, whose provider and key are checked here)
        or the loop's reflector's (`JudgeContext`, given when a loop builds it). Found out
        before an agent is paid for, not at the first attempt's evaluation. Outside a loop
        (`ralph check`, no context) a judge without its own model says so when it runs, as a
        check error."""
        if self.spec.model:
            self._client()
            return
        if self.bound and self.client is None:
            raise PreflightError(
                f"check {self.spec.name!r} is a judge with no model to ask",
                hint="set `model: PROVIDER:MODEL` on the check, or --reflector PROVIDER:MODEL",
            )

    def run(
        self,
        cwd: Path,
        *,
        baseline_errors: int | None = None,
        on_output: OutputCallback | None = None,
    ) -> CheckOutcome:
        started = time.monotonic()
        with self._lock:
            if self.base_commit is None:
                self.base_commit = _git(cwd, "rev-parse", "-q", "--verify", "HEAD").strip() or None
        diff = loop_diff(cwd, self.base_commit)
        if not diff.strip():
            return self._outcome(
                "fail", started, [_diagnostic("nothing to judge yet: no change since the start")]
            )
        calls: list[ModelCall] = []  # this run's, whatever the outcome: the loop counts them
        answers: list[str] = []  # this run's answers, as they came: the check's log
        outcome = self._judge(cwd, diff, started, calls, answers, on_output)
        outcome.calls = calls
        outcome.log = "".join(f"--- judge answer ---\n{text}\n" for text in answers)
        return outcome

    def _judge(
        self,
        cwd: Path,
        diff: str,
        started: float,
        calls: list[ModelCall],
        answers: list[str],
        on_output: OutputCallback | None,
    ) -> CheckOutcome:
        try:
            client = self._client()
            answer, problems = self._ask(client, diff, cwd, calls, answers)
        except Exception as exc:  # a provider failure is this check's error, never a pass
            return self._outcome("error", started, [_diagnostic(f"judge: {one_line(exc)}")])
        if answer is None:
            why = f"the judge's answer is invalid after one repair: {problems[0]}"
            return self._outcome("error", started, [_diagnostic(why, "runtime_error")])
        if on_output is not None:
            on_output(self.spec.name, json.dumps(answer) + "\n")
        return self.verdict(answer, started)

    def threshold(self) -> float:
        return self.spec.threshold if self.spec.threshold is not None else DEFAULT_THRESHOLD

    def verdict(self, answer: dict[str, Any], started: float) -> CheckOutcome:
        """Pass at overall >= threshold; the issues (and, failing, the score) as diagnostics."""
        overall = float(answer["overall"])
        passed = overall >= self.threshold()
        errors = [
            Diagnostic(
                type="logic_error",
                message=str(item["message"]).strip(),
                file=item.get("file") or None,
                line=item.get("line"),
                severity="error",
                rule="judge",
            )
            for item in answer.get("issues") or []
        ]
        if not passed:
            scores = ", ".join(f"{k} {v:g}" for k, v in (answer.get("scores") or {}).items())
            advice = "; ".join(answer.get("suggestions") or [])
            summary = f"the judge scored {overall:g}/10 (needs {self.threshold():g})"
            summary += f" [{scores}]" if scores else ""
            summary += f": {advice}" if advice else ""
            errors.append(_diagnostic(summary))
        outcome = self._outcome("pass" if passed else "fail", started, errors if not passed else [])
        outcome.score = round(overall / 10, 4)
        outcome.result.stdout = json.dumps(answer, indent=1)[:4000]
        return outcome

    def _client(self) -> ChatClient:
        if self.spec.model:
            with self._lock:
                if self.client is None or self.client.model != _model_of(self.spec.model):
                    self.client = make_client(self.spec.model)
        if self.client is None:
            raise PreflightError(
                "the judge has no model",
                hint="set `model: PROVIDER:MODEL` on the check, or --reflector PROVIDER:MODEL",
            )
        return self.client

    def _ask(
        self,
        client: ChatClient,
        diff: str,
        cwd: Path,
        calls: list[ModelCall],
        answers: list[str],
    ) -> tuple[dict[str, Any] | None, list[str]]:
        """One question and at most one repair (the reflector's treatment of bad answers)."""
        dimensions = list(self.spec.dimensions or DEFAULT_DIMENSIONS)
        context = {
            "task": self.task or "(no task given: judge the change by the criteria)",
            "criteria": self.spec.criteria or "the change does what the task asks, cleanly",
            "diff": diff,
            "dimensions": ", ".join(dimensions),
        }
        prompt = redact(render("judge", context, project_root=cwd))
        messages = [Message("system", SYSTEM_PROMPT), Message("user", prompt)]
        answer, problems, _ = ask_json(
            lambda turn: self._chat(client, turn, calls, answers),
            messages,
            parse_verdict,
            lambda text, wrong: render(
                "judge-repair", repair_context(text, wrong), project_root=cwd
            ),
        )
        return answer, problems

    def _chat(
        self,
        client: ChatClient,
        messages: list[Message],
        calls: list[ModelCall],
        answers: list[str],
    ) -> str:
        response = client.chat(messages, json_mode=True, max_tokens=MAX_ANSWER_TOKENS)
        calls.append(ModelCall(response.tokens_in, response.tokens_out, response.cost_usd))
        answers.append(response.text or "")
        return response.text or ""

    def _outcome(self, status: str, started: float, errors: list[Diagnostic]) -> CheckOutcome:
        res = ProcessResult(
            exit_code=0 if status == "pass" else 1,
            stdout="",
            stderr="",
            duration_ms=int((time.monotonic() - started) * 1000),
        )
        result = CheckResult(
            tool=self.spec.name,
            status=status,  # type: ignore[arg-type]
            exit_code=res.exit_code,
            duration_ms=res.duration_ms,
        )
        return CheckOutcome(self.spec, result, errors)


def _model_of(spec: str) -> str:
    return spec.split(":", 1)[1] if ":" in spec else spec


def _diagnostic(message: str, kind: str = "other") -> Diagnostic:
    return Diagnostic(type=kind, message=message, severity="error", rule="judge")  # type: ignore[arg-type]


def _git(cwd: Path, *args: str) -> str:
    safe = hardened.options(cwd)  # no hook, fsmonitor or filter of the tree's
    res = process.run(["git", *safe, *args], cwd=cwd, wall_timeout=60)
    return res.stdout if res.exit_code == 0 else ""


def loop_diff(cwd: Path, base: str | None, limit: int = DIFF_CHARS) -> str:
    """Tracked changes since `base` and new files' contents, ralph's memory left out; capped."""
    if base is None:
        return ""
    spec = ["--", ".", ":(exclude).aiwg/ralph"]
    diff = _git(cwd, "diff", "--no-color", "--no-ext-diff", "--no-textconv", base, *spec)
    for name in _git(cwd, "ls-files", "--others", "--exclude-standard", *spec).splitlines():
        path = cwd / name
        try:
            text = path.read_text("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        added = "".join(f"+{line}\n" for line in text.splitlines())
        diff += f"diff --git a/{name} b/{name}\nnew file\n--- /dev/null\n+++ b/{name}\n{added}"
    return cap_diff(diff, limit)


@functools.cache
def _validator() -> Any:
    import jsonschema

    return jsonschema.Draft202012Validator(ANSWER_SCHEMA)


def parse_verdict(text: str) -> tuple[dict[str, Any] | None, list[str]]:
    """The judge's answer, coerced (scores as "8/10", issues as strings) and validated."""
    data = extract_json_object(text or "")
    if data is None:
        return None, ["the answer contains no JSON object"]
    data = coerce_verdict(data)
    found = sorted(_validator().iter_errors(data), key=lambda e: list(map(str, e.path)))
    if found:
        return None, [f"{e.json_path}: {str(e.message)[:200]}" for e in found]
    return data, []


def coerce_verdict(data: dict[str, Any]) -> dict[str, Any]:
    out = dict(data)
    for key in ("overall", "overall_score", "score"):
        if key in data and key != "overall" and "overall" not in out:
            out["overall"] = data[key]
    scores = out.get("scores")
    if isinstance(scores, dict):
        out["scores"] = {str(k): _number(v) for k, v in scores.items()}
        if "overall" not in out and scores:
            values = [v for v in out["scores"].values() if isinstance(v, int | float)]
            if values:
                out["overall"] = round(sum(values) / len(values), 2)
    if "overall" in out:
        out["overall"] = _number(out["overall"])
    issues = out.get("issues")
    if isinstance(issues, str):
        issues = [issues]
    if isinstance(issues, list):
        out["issues"] = [_issue(i) for i in issues if i]
    suggestions = out.get("suggestions")
    if isinstance(suggestions, str):
        out["suggestions"] = [suggestions]
    elif isinstance(suggestions, list):
        out["suggestions"] = [str(s) for s in suggestions if s]
    return out


def _number(value: Any) -> Any:
    if isinstance(value, str):
        match = SCORE.match(value)
        return float(match.group(1)) if match else value
    return value


def _issue(item: Any) -> Any:
    if isinstance(item, str):
        return {"message": item}
    if not isinstance(item, dict):
        return item
    out = {k: item.get(k) for k in ("file", "line", "message") if k in item}
    if isinstance(out.get("line"), str) and str(out["line"]).strip().isdigit():
        out["line"] = int(str(out["line"]))
    where = out.get("file")
    if isinstance(where, str) and ":" in where and out.get("line") is None:
        path, _, line = where.rpartition(":")
        if line.isdigit():
            out["file"], out["line"] = path, int(line)
    return out
