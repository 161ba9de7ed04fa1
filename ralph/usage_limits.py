"""Usage limits: an agent CLI or a model provider saying the plan's quota is spent, and when it
comes back. The one place that reads them (the loop waits them out: loop/limits.py).

Each agent preset names its signals (`actors/agents.py`, `Preset.limits`): JSON events such as
Claude Code's `rate_limit_event` with `status: "rejected"` and `resetsAt` in epoch seconds, and
patterns over what it printed as an error, each saying how its reset is written: an epoch
(`Claude AI usage limit reached|1767225600`), seconds (codex's `"resets_in_seconds": 13872`),
a time of day with its zone (`You've hit your limit · resets 1pm (Europe/Lisbon)`), a date
(`try again at Sep 18th, 2026 12:04 AM`, local time), a duration (`try again in 5 days 22
hours`), the next midnight of a zone (Gemini's daily quota: Google resets it at midnight
Pacific time), or no reset at all (a spend limit, access disabled by an admin). Only error
text is read (the parsed error, stderr, the final answer of a failed run), never the agent's
own work, so a project that talks about limits does not stop its loop. HTTP providers: a 429
with `retry-after` or Anthropic's `anthropic-ratelimit-*-reset` headers (`from_http`).
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ralph.errors import ProviderError

MAX_MESSAGE = 300  # characters of the CLI's own message kept


@dataclass(frozen=True)
class UsageLimit:
    """A limit reached: who said so, in its own words, and when it resets (Unix seconds; None
    when it gave no reset time: a spend limit, access disabled)."""

    source: str
    message: str
    resets_at: float | None = None


class UsageLimited(ProviderError):
    """An attempt or a model call stopped by a usage limit: the loop waits it out or pauses.
    A ProviderError, so whatever falls back from a failing provider falls back from this."""

    def __init__(self, limit: UsageLimit) -> None:
        super().__init__(f"{limit.source}: usage limit reached: {limit.message}")
        self.limit = limit


@dataclass(frozen=True)
class Signal:
    """A pattern over an error text and how its reset is written: the groups `epoch`,
    `seconds`, `after` (a duration in words) or `clock` (with an optional `zone`) are read;
    `reset="none"`: a limit without a reset; `reset="midnight:ZONE"`: the next midnight there."""

    pattern: str
    reset: str = "text"


@dataclass(frozen=True)
class EventSignal:
    """A JSON event line: `{"type": kind, info: {status: rejected, epoch: ...}}`."""

    kind: str
    info: str
    status: tuple[str, str]
    epoch: str


@dataclass(frozen=True)
class LimitSignals:
    """One CLI's ways of saying it is limited (`Preset.limits`)."""

    texts: tuple[Signal, ...] = ()
    events: tuple[EventSignal, ...] = ()


def recognise(
    source: str,
    signals: LimitSignals,
    *,
    stdout: str,
    errors: Iterable[str | None],
    now: float | None = None,
) -> UsageLimit | None:
    """The limit an attempt ran into, or None: a rejecting event in `stdout`'s JSON lines, or
    a signal's pattern in one of `errors` (the parsed error, stderr, a failed run's answer)."""
    current = time.time() if now is None else now
    texts = [text for text in errors if text and text.strip()]
    for event in _json_lines(stdout) if signals.events else ():
        for kind in signals.events:
            limit = _from_event(source, kind, event, texts)
            if limit is not None:
                return limit
    for rule in signals.texts:
        for text in texts:
            found = re.search(rule.pattern, text, re.MULTILINE | re.IGNORECASE)
            if found:
                return UsageLimit(source, _line(text, found), _reset(rule, found, current))
    return None


def _json_lines(stdout: str) -> Iterable[dict[str, Any]]:
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith("{") and '"' in line:
            try:
                value = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if isinstance(value, dict):
                yield value


def _from_event(
    source: str, rule: EventSignal, event: dict[str, Any], texts: list[str]
) -> UsageLimit | None:
    info = event.get(rule.info)
    key, rejected = rule.status
    if event.get("type") != rule.kind or not isinstance(info, dict) or info.get(key) != rejected:
        return None
    epoch = _epoch(info.get(rule.epoch))
    said = next((_one_line(t) for t in texts), None)
    window = info.get("rateLimitType")
    message = said or f"{rule.kind}: {key} {rejected}" + (f" ({window})" if window else "")
    return UsageLimit(source, message, epoch)


def _epoch(value: Any) -> float | None:
    number: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
    if number is None or not math.isfinite(number) or number <= 0:
        return None
    return number / 1000 if number > 1e12 else number  # milliseconds, from some writers


def _reset(rule: Signal, found: re.Match[str], now: float) -> float | None:
    if rule.reset == "none":
        return None
    if rule.reset.startswith("midnight:"):
        return next_midnight(rule.reset.removeprefix("midnight:"), now)
    groups = {k: v for k, v in found.groupdict().items() if v}
    if "epoch" in groups:
        return _epoch(groups["epoch"])
    if "seconds" in groups:
        return now + float(groups["seconds"])
    if "after" in groups:
        seconds = duration_seconds(groups["after"])
        return None if seconds is None else now + seconds
    if "clock" in groups:
        return clock_time(groups["clock"], groups.get("zone"), now)
    return None


UNITS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
DURATION_PART = re.compile(
    r"(\d+(?:\.\d+)?)\s*(ms|d(?:ays?)?|h(?:ours?|rs?)?|m(?:in(?:ute)?s?)?|s(?:ec(?:ond)?s?)?)"
    r"(?![a-z])",
    re.IGNORECASE,
)


def duration_seconds(text: str) -> float | None:
    """`5 days 22 hours`, `2 days 17 hours 14 minutes`, `3h2m1.5s`, `90s` as seconds."""
    parts = DURATION_PART.findall(text.replace(",", " "))
    if not parts:
        return None
    total = 0.0
    for number, unit in parts:
        unit = unit.lower()
        total += float(number) * UNITS["ms" if unit == "ms" else unit[0]]
    return total


CLOCK = re.compile(
    r"(?:(?P<month>[A-Za-z]{3})[a-z]*\.?\s+(?P<day>\d{1,2})(?:st|nd|rd|th)?,?\s+"
    r"(?:(?P<year>\d{4}),?\s+)?)?(?:at\s+)?(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?\s*"
    r"(?P<half>[ap])\.?m\b",
    re.IGNORECASE,
)
MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")


def clock_time(text: str, zone: str | None, now: float) -> float | None:
    """A reset written as a time of day, maybe with a date (`1pm`, `1:30pm`, `Dec 3, 1pm`,
    `Sep 18th, 2026 12:04 AM`) in `zone` (an IANA name; else this machine's local time), as
    Unix seconds: the next such moment after `now` when no date or year pins it."""
    found = CLOCK.search(text)
    if found is None:
        return None
    hour = int(found["hour"]) % 12 + (12 if found["half"].lower() == "p" else 0)
    minute = int(found["minute"] or 0)
    place = _zone(zone)
    today = datetime.fromtimestamp(now, place) if place else datetime.fromtimestamp(now)
    try:
        day = today.replace(hour=hour, minute=minute, second=0, microsecond=0)
        if found["month"]:
            month = MONTHS.index(found["month"][:3].lower()) + 1
            year = int(found["year"] or today.year)
            day = day.replace(year=year, month=month, day=int(found["day"]))
    except ValueError:  # a month ralph does not know, a 31st of June
        return None
    if place is None:
        day = day.astimezone()  # the naive local time, as this machine's zone says
    stamp = day.timestamp()
    if not found["month"] and stamp <= now:
        stamp = (day + timedelta(days=1)).timestamp()
    elif found["month"] and not found["year"] and stamp < now - 86400:
        stamp = day.replace(year=day.year + 1).timestamp()
    return stamp


def _zone(name: str | None) -> tzinfo | None:
    if not name:
        return None
    try:
        return ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError):
        return None  # a zone this machine does not know: its own local time


def next_midnight(zone: str, now: float) -> float:
    """The next midnight in `zone` after `now`, as Unix seconds."""
    place = _zone(zone)
    here = datetime.fromtimestamp(now, place) if place else datetime.fromtimestamp(now)
    midnight = (here + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    if place is None:
        midnight = midnight.astimezone()
    return midnight.timestamp()


def iso(when: float) -> str:
    return datetime.fromtimestamp(when, UTC).isoformat(timespec="seconds")


def clock_text(when: float) -> str:
    """A moment as this machine's local time: `13:05 UTC`, with the date when not today."""
    moment = datetime.fromtimestamp(when).astimezone()
    today = datetime.now().astimezone().date()
    shape = "%H:%M %Z" if moment.date() == today else "%Y-%m-%d %H:%M %Z"
    return moment.strftime(shape)


def span(seconds: float) -> str:
    """`4h 59m`, `12m 5s`, `40s`."""
    whole = max(int(seconds), 0)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m" if minutes else f"{hours}h"
    return (f"{minutes}m {secs:02d}s" if secs else f"{minutes}m") if minutes else f"{secs}s"


# HTTP providers -------------------------------------------------------------------------------

RESET_HEADER = re.compile(r"^anthropic-ratelimit-(?P<name>[a-z-]+)-reset$")


def from_http(
    provider: str,
    status: int,
    headers: Mapping[str, str],
    message: str,
    *,
    retry_after: float | None,
    quota_gone: bool = False,
    now: float | None = None,
) -> UsageLimit | None:
    """The limit a provider's answer reports, or None: a 429 whose `retry_after` (seconds,
    read by the HTTP layer) or latest `anthropic-ratelimit-*-reset` (RFC 3339; of the limits
    with nothing remaining, when the headers say which) says when; `quota_gone`: an exhausted
    account (OpenAI's `insufficient_quota`), which no wait refills."""
    if status != 429:
        return None
    current = time.time() if now is None else now
    text = _one_line(message) or f"HTTP {status}"
    if quota_gone:
        return UsageLimit(provider, text, None)
    if retry_after is not None:
        return UsageLimit(provider, text, current + retry_after)
    resets = anthropic_resets(headers)
    return UsageLimit(provider, text, max(resets) if resets else None)


def anthropic_resets(headers: Mapping[str, str]) -> list[float]:
    """The reset times of Anthropic's rate limits with nothing remaining (all of them when no
    `-remaining` header says 0), as Unix seconds."""
    lowered = {name.lower(): value.strip() for name, value in headers.items()}
    resets: dict[str, float] = {}
    for name, value in lowered.items():
        found = RESET_HEADER.match(name)
        if found:
            try:
                resets[found["name"]] = datetime.fromisoformat(value).timestamp()
            except ValueError:
                continue
    left = {name: lowered.get(f"anthropic-ratelimit-{name}-remaining") for name in resets}
    spent = [at for name, at in resets.items() if left[name] == "0"]
    return spent or list(resets.values())


def _line(text: str, found: re.Match[str]) -> str:
    """The line of `text` the pattern matched, as one short line."""
    start = text.rfind("\n", 0, found.start()) + 1
    end = text.find("\n", found.end())
    return _one_line(text[start : end if end >= 0 else len(text)])


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= MAX_MESSAGE else flat[: MAX_MESSAGE - 1] + "…"
