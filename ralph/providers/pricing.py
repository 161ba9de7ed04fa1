"""List prices of common hosted models, so budgets can be enforced in dollars.

An unknown model costs None (unknown), never 0. Prices are USD per million tokens at standard
(non-batch, non-cached) rates, from the providers' pricing pages; long-context surcharges (Claude
Sonnet 4 above 200K input tokens) are ignored because ralph's prompts stay far below that.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Price:
    input: float  # USD per million input tokens
    output: float  # USD per million output tokens


PRICES: dict[str, Price] = {
    # OpenAI (platform.openai.com/docs/pricing)
    "gpt-4o": Price(2.50, 10.00),
    "gpt-4o-mini": Price(0.15, 0.60),
    "gpt-4.1": Price(2.00, 8.00),
    "gpt-4.1-mini": Price(0.40, 1.60),
    "gpt-4.1-nano": Price(0.10, 0.40),
    "o1": Price(15.00, 60.00),
    "o3": Price(2.00, 8.00),
    "o4-mini": Price(1.10, 4.40),
    "gpt-5": Price(1.25, 10.00),
    "gpt-5-mini": Price(0.25, 2.00),
    "gpt-5-nano": Price(0.05, 0.40),
    # Anthropic (docs.anthropic.com/en/docs/about-claude/pricing)
    "claude-opus-4-5": Price(5.00, 25.00),
    "claude-opus-4-1": Price(15.00, 75.00),
    "claude-opus-4": Price(15.00, 75.00),
    "claude-opus-4-0": Price(15.00, 75.00),
    "claude-sonnet-4-5": Price(3.00, 15.00),
    "claude-sonnet-4": Price(3.00, 15.00),
    "claude-sonnet-4-0": Price(3.00, 15.00),
    "claude-haiku-4-5": Price(1.00, 5.00),
    "claude-3-7-sonnet": Price(3.00, 15.00),
    "claude-3-5-sonnet": Price(3.00, 15.00),
    "claude-3-5-haiku": Price(0.80, 4.00),
    "claude-3-opus": Price(15.00, 75.00),
    "claude-3-haiku": Price(0.25, 1.25),
}

# What may follow a known id and still name the same model: a snapshot date or `-latest`.
# Anything else is a different model: `claude-opus-4-6` must not be billed as `claude-opus-4`.
_SNAPSHOT = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2}|latest)")


def price(model: str) -> Price | None:
    """The list price of `model`: by exact id, else by the longest known id plus a snapshot."""
    name = model.strip().lower().rsplit("/", 1)[-1]  # "openai/gpt-4o" as routers spell it
    if name in PRICES:
        return PRICES[name]
    for known in sorted(PRICES, key=len, reverse=True):
        if name.startswith(known) and _SNAPSHOT.fullmatch(name[len(known) :]):
            return PRICES[known]
    return None


def cost(model: str, tokens_in: int | None, tokens_out: int | None) -> float | None:
    """USD for one call, or None when the model or either token count is unknown."""
    known = price(model)
    if known is None or tokens_in is None or tokens_out is None:
        return None
    return (tokens_in * known.input + tokens_out * known.output) / 1_000_000
