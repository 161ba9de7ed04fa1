"""An agent CLI that cannot reach its model, told by the CLI's own lines.

An agent CLI whose model endpoint is unreachable (a wrong base URL, no network in the sandbox,
a proxy it was not given) does not exit: it retries with backoff, for minutes, printing one
line per try, and the attempt would end at its wall timeout as if the agent had worked. Where
ralph knows the CLI's line, it watches the agent's stderr: after `TRIES` such lines and no
answer of the model on stdout, the attempt is stopped and the actor raises a ProviderError
naming the CLI's own first line; the loop pauses there (`ralph resume` continues it).

gemini (0.61): "Attempt 1 failed. Retrying with backoff... Error: exception TypeError: fetch
failed sending request" (undici's message for a refused connection or an unknown host),
before its routing question and before each model turn; a rate limit says "failed with status
429" instead and is not this.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from ralph import process

UNREACHABLE: dict[str, re.Pattern[str]] = {
    "gemini": re.compile(
        r"Attempt \d+ failed\. Retrying with backoff\.\.\. .*(fetch failed|ECONNREFUSED|"
        r"ENOTFOUND|EAI_AGAIN|ETIMEDOUT|ECONNRESET|EHOSTUNREACH|ENETUNREACH|socket hang up)"
    ),
}
# a stdout line saying the model answered (then a failed try is the network's blip, not this)
ANSWERED: dict[str, re.Pattern[str]] = {
    "gemini": re.compile(r'"type":\s*"tool_use"|"role":\s*"assistant"'),
}
TRIES = 3  # the CLI's own retries first: a blip passes within one or two
# the variables that point an agent CLI at its model, named in the hint
ENDPOINTS = ("ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "GOOGLE_GEMINI_BASE_URL")


def hint(environ: Mapping[str, str], no_network: bool) -> str:
    """What to check: the endpoint variables set, and the sandbox's network when it is cut."""
    named = [name for name in ENDPOINTS if environ.get(name)]
    check = f"check {', '.join(f'{n}={environ[n]}' for n in named)}" if named else "check"
    if no_network:
        return f"{check}; the sandbox cut the agent's network (--sandbox-network actor gives it)"
    return f"{check} and the network or proxy; the attempt's output is in its actor.log"


class ModelWatch:
    """An `on_output` tee and `on_start` hook for one attempt of preset `name`."""

    def __init__(self, name: str, forward: Callable[[str, str], None]) -> None:
        self.pattern = UNREACHABLE.get(name)
        self.answer = ANSWERED.get(name)
        self.forward = forward
        self.partial = {"stdout": "", "stderr": ""}
        self.failures: list[str] = []
        self.answered = False
        self.proc: Any = None  # the process (`process.run`'s on_start)
        self.stopped = False

    def started(self, proc: Any) -> None:
        self.proc = proc

    def on_output(self, stream: str, text: str) -> None:
        self.forward(stream, text)
        if self.pattern is None or stream not in self.partial:
            return
        lines = (self.partial[stream] + text).split("\n")
        self.partial[stream] = lines.pop()[-4000:]
        for line in lines:
            self._line(stream, line)

    def _line(self, stream: str, line: str) -> None:
        if stream == "stdout":
            self.answered = self.answered or bool(self.answer and self.answer.search(line))
        elif self.pattern is not None and self.pattern.search(line):
            self.failures.append(" ".join(line.split())[:300])
        if len(self.failures) >= TRIES and not self.answered and not self.stopped:
            self.stopped = True
            if self.proc is not None:
                process.kill_group(self.proc)

    def unreachable(self) -> str | None:
        """The CLI's first line saying it could not reach its model, when it never did."""
        return self.failures[0] if self.failures and not self.answered else None
