"""JSON answers from a model: find the object in a chatty reply, and the repair prompt's context.

The reflector and the judge ask for exactly one JSON object and get prose, fences or both; each
gets one repair turn naming what was wrong (`repair_context`), then gives up.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ralph.templates import cap

FENCE = re.compile(r"```[a-zA-Z0-9_-]*[ \t]*\n(.*?)```", re.DOTALL)
REPAIR_ANSWER_CHARS = 4000
REPAIR_PROBLEMS = 10


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
