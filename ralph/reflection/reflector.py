"""The Reflector: turns a failed iteration into a first-person reflection for the next prompt.

An LLM is asked for one JSON object with the fields of `self_reflection`; its answer is parsed
leniently, coerced, validated against the record schema and, if invalid, repaired once. When
there is no model, or it fails or keeps answering garbage, a heuristic reflection is built from
the diagnostics instead: the loop always gets a valid reflection and a reflector never raises.
Everything sent to a model passes through `ralph.redact.redact`.

Parsing lives in `parsing`, the fallback in `heuristic`, the flags in `quality`, the prompt's
context in `context`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ralph.errors import one_line
from ralph.providers.answers import ask_json
from ralph.providers.base import ChatClient, ChatResponse, Message
from ralph.records import (
    ActorOutput,
    IterationRecord,
    ReflectionSource,
    SelfReflection,
    sum_costs,
)
from ralph.redact import redact
from ralph.reflection.base import ReflectionOutcome
from ralph.reflection.context import reflection_prompt_context
from ralph.reflection.heuristic import (
    category_follows_failure,
    heuristic_reflection,
    success_reflection,
)
from ralph.reflection.parsing import parse_reflection, reflection_repair_context
from ralph.reflection.quality import quality_flags
from ralph.templates import render

if TYPE_CHECKING:
    from ralph.evaluators.base import Evaluation

SYSTEM_PROMPT = (
    "You are the self-reflection component of a Reflexion coding loop. "
    "You reply with exactly one JSON object and nothing else."
)
MAX_ANSWER_TOKENS = 1500


class ModelReflector:
    """A `Reflector` that asks `client` for a reflection; None means heuristic reflections
    only."""

    def __init__(self, client: ChatClient | None, *, project_root: Path | None = None) -> None:
        self.client = client
        self.project_root = project_root

    def reflect(
        self,
        *,
        task: str,
        iteration: int,
        actor_output: ActorOutput,
        evaluation: Evaluation,
        earlier: list[IterationRecord],
        diff_summary: str = "",
        trajectory: str = "",
        protected_edits: Sequence[str] = (),
    ) -> ReflectionOutcome:
        if evaluation.passed:
            return ReflectionOutcome(success_reflection(evaluation, actor_output), "success")
        usage = _UsageSum()
        try:
            if self.client is None:
                return self._heuristic(
                    evaluation, actor_output, earlier, usage, None, trajectory, protected_edits
                )
            context = reflection_prompt_context(
                task=task,
                iteration=iteration,
                actor_output=actor_output,
                evaluation=evaluation,
                earlier=earlier,
                diff_summary=diff_summary,
                trajectory=trajectory,
                protected_edits=protected_edits,
            )
            prompt = redact(render("reflection", context, project_root=self.project_root))
            messages = [Message("system", SYSTEM_PROMPT), Message("user", prompt)]
            reflection, problems, repaired = ask_json(
                lambda turn: self._chat(turn, usage),
                messages,
                parse_reflection,
                lambda answer, wrong: render(
                    "repair",
                    reflection_repair_context(answer, wrong),
                    project_root=self.project_root,
                ),
            )
            if reflection is not None:
                source: ReflectionSource = "repaired" if repaired else "llm"
                return self._done(reflection, source, evaluation, usage)
            reason = f"reflection invalid after one repair: {problems[0]}"
        except Exception as exc:  # a reflector failure must never stop the loop
            reason = one_line(exc)
        return self._heuristic(
            evaluation, actor_output, earlier, usage, reason, trajectory, protected_edits
        )

    def _chat(self, messages: list[Message], usage: _UsageSum) -> str:
        assert self.client is not None
        response = self.client.chat(messages, json_mode=True, max_tokens=MAX_ANSWER_TOKENS)
        usage.add(response)
        return response.text or ""

    def _done(
        self,
        reflection: SelfReflection,
        source: ReflectionSource,
        evaluation: Evaluation,
        usage: _UsageSum,
    ) -> ReflectionOutcome:
        reflection = category_follows_failure(reflection, evaluation)
        flags = quality_flags(reflection, evaluation)
        return usage.outcome(reflection, source, flags, None)

    def _heuristic(
        self,
        evaluation: Evaluation,
        actor_output: ActorOutput,
        earlier: list[IterationRecord],
        usage: _UsageSum,
        error: str | None,
        trajectory: str = "",
        protected_edits: Sequence[str] = (),
    ) -> ReflectionOutcome:
        reflection = heuristic_reflection(
            evaluation, actor_output, earlier, trajectory, protected_edits
        )
        flags = quality_flags(reflection, evaluation)
        return usage.outcome(reflection, "heuristic", flags, error)


class _UsageSum:
    """Tokens and cost over the (at most two) calls; cost unknown if any call's cost is
    (`records.sum_costs`), and None without any call."""

    def __init__(self) -> None:
        self.tokens_in: int | None = None
        self.tokens_out: int | None = None
        self.costs: list[float | None] = []

    def add(self, response: ChatResponse) -> None:
        if response.tokens_in is not None:
            self.tokens_in = (self.tokens_in or 0) + response.tokens_in
        if response.tokens_out is not None:
            self.tokens_out = (self.tokens_out or 0) + response.tokens_out
        self.costs.append(response.cost_usd)

    def outcome(
        self,
        reflection: SelfReflection,
        source: ReflectionSource,
        flags: list[str],
        error: str | None,
    ) -> ReflectionOutcome:
        cost = sum_costs(*self.costs) if self.costs else None
        return ReflectionOutcome(
            reflection, source, flags, self.tokens_in, self.tokens_out, cost, error, len(self.costs)
        )


# --- parsing the model's answer ----------------------------------------------------------------
