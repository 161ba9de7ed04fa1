"""JSON answers from a model: ask for one object, find it in a chatty reply, repair once.

The reflector and the judge ask for exactly one JSON object and get prose, fences or both. Both
go through `ask_json`: an unusable answer gets one repair turn naming what was wrong (the
template's context from `repair_context`), then the caller gives up (a heuristic reflection, a
judge error: never a pass).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, TypeVar

from ralph.providers.base import Message
from ralph.redact import redact
from ralph.templates import cap

FENCE = re.compile(r"```[a-zA-Z0-9_-]*[ \t]*\n(.*?)```", re.DOTALL)
REPAIR_ANSWER_CHARS = 4000
REPAIR_PROBLEMS = 10
T = TypeVar("T")


def extract_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in `text`: fenced blocks first, then any balanced {...} that parses."""
    decoder = json.JSONDecoder()
    for block in [*FENCE.findall(text), text]:
        for match in re.finditer(r"\{", block):
            try:
                value, _ = decoder.raw_decode(block, match.start())
            except (json.JSONDecodeError, RecursionError):  # RecursionError: nested too deep
                continue
            if isinstance(value, dict):
                return value
    return None


def repair_context(previous_answer: str, problems: list[str], **extra: str) -> dict[str, Any]:
    """What a repair template reads: the unusable answer (capped) and what is wrong with it."""
    return {
        "previous_answer": cap(previous_answer.strip(), REPAIR_ANSWER_CHARS) or "(empty answer)",
        "errors": problems[:REPAIR_PROBLEMS],
        **extra,
    }


def ask_json(
    chat: Callable[[list[Message]], str],
    messages: list[Message],
    parse: Callable[[str], tuple[T | None, list[str]]],
    repair: Callable[[str, list[str]], str],
) -> tuple[T | None, list[str], bool]:
    """(value, problems, repaired): the parsed answer, else after one repair turn that shows the
    model its answer and `repair(answer, problems)`; None and the problems when both fail."""
    answer = chat(messages)
    value, problems = parse(answer)
    if value is not None:
        return value, [], False
    followup = [
        *messages,
        Message("assistant", redact(answer) if answer.strip() else "(empty answer)"),
        Message("user", redact(repair(answer, problems))),
    ]
    value, problems = parse(chat(followup))
    return value, problems, value is not None
