"""Benchmark: reading an agent's trajectory from its stream, the cost per attempt.

    python bench/trace.py [--events 20000] [--result-kb 20] [--stored-steps 300000]

Builds a claude stream-json of EVENTS tool calls, each with a RESULT-KB tool result, plus the
same volume of non-JSON noise, and times `ralph.actors.tracing.parse_stream` (parse, redact,
trim, bound) and writing `trace.jsonl`. Prints the stream size, the time and the trace file's
size (bounded: it must stay in the tens of kilobytes whatever the stream's size). Then times
`ralph trace`'s reading and drawing of a stored `trace.jsonl` of STORED-STEPS steps (a corrupt
or foreign file: ralph writes at most a few hundred), which must take a second or two, not
minutes.
"""

from __future__ import annotations

import argparse
import io
import json
import tempfile
import time
from pathlib import Path

from ralph.actors import trace, tracing


def stream(events: int, result_kb: int) -> str:
    lines = []
    for i in range(events):
        block = {"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": f"ls {i}"}}
        message = {"content": [{"type": "text", "text": f"step {i}"}, block]}
        lines.append(json.dumps({"type": "assistant", "message": message}))
        result = {"type": "tool_result", "tool_use_id": f"t{i}", "content": "x" * result_kb * 1024}
        lines.append(json.dumps({"type": "user", "message": {"content": [result]}}))
    return "\n".join(lines)


def stored(folder: Path, steps: int) -> Path:
    step = {"thought": "look", "tool": "Bash", "kind": "command", "target": "ls", "ok": True}
    lines = [json.dumps({"meta": {"source": "claude", "steps": steps}})]
    lines += [json.dumps({"step": i, **step}) for i in range(1, steps + 1)]
    path = folder / trace.TRACE_FILE
    path.write_text("\n".join(lines) + "\n")
    return path


def shown(steps: int) -> None:
    from rich.console import Console

    from ralph.cli.trace_view import TraceView

    with tempfile.TemporaryDirectory() as tmp:
        path = stored(Path(tmp), steps)
        start = time.perf_counter()
        read = trace.read(path)
        reading = time.perf_counter() - start
        console = Console(file=io.StringIO(), force_terminal=True, width=120)
        start = time.perf_counter()
        console.print(TraceView("ralph-bench-00000000", 1, read))
        drawing = time.perf_counter() - start
        size = path.stat().st_size
    print(
        f"stored trace.jsonl of {steps} steps ({size / 1e6:.0f} MB): read in {reading:.2f} s "
        f"({len(read.steps)} steps, {read.unread} lines counted), drawn in {drawing:.2f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--result-kb", type=int, default=20)
    parser.add_argument("--stored-steps", type=int, default=300_000)
    args = parser.parse_args()
    text = stream(args.events, args.result_kb)
    start = time.perf_counter()
    trajectory = tracing.parse_stream("claude", text)
    parsed = time.perf_counter() - start
    assert trajectory is not None
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        path = trace.write(Path(tmp), trajectory)
        written = time.perf_counter() - start
        size = path.stat().st_size
    noise = "not json\n" * (len(text) // 9)
    start = time.perf_counter()
    tracing.parse_stream("claude", noise)
    skipped = time.perf_counter() - start
    print(f"stream {len(text) / 1e6:.0f} MB, {args.events} tool calls: parsed in {parsed:.2f} s")
    print(
        f"trace.jsonl {size / 1024:.0f} KB ({len(trajectory.steps)} steps, "
        f"{trajectory.dropped} dropped), written in {written * 1000:.0f} ms"
    )
    print(f"{len(noise) / 1e6:.0f} MB of non-JSON lines skipped in {skipped:.2f} s")
    shown(args.stored_steps)


if __name__ == "__main__":
    main()
