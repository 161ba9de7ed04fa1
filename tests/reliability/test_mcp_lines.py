"""`ralph mcp` answers every line: one that is not JSON gets a JSON-RPC parse error, one that is
JSON but no message an invalid-request error (with its id), and the end of input right after
either ends the server cleanly (it was "internal error: ExceptionGroup")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}


def serve(tmp_path: Path, *lines: str) -> tuple[int, list[dict[str, object]], str]:
    done = subprocess.run(
        [sys.executable, "-m", "ralph", "mcp", "--project", str(tmp_path)],
        input="".join(line + "\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=120,
    )
    answers = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return done.returncode, answers, done.stderr


def test_a_line_that_does_not_parse_gets_a_parse_error_and_eof_ends_cleanly(
    tmp_path: Path,
) -> None:
    code, answers, err = serve(tmp_path, "this is not json {")
    assert code == 0, err
    assert answers == [
        {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32700, "message": "Parse error: the line is not JSON"},
        }
    ]
    assert "ExceptionGroup" not in err and "internal error" not in err


def test_json_that_is_no_message_is_an_invalid_request_and_the_session_goes_on(
    tmp_path: Path,
) -> None:
    code, answers, err = serve(tmp_path, '{"id": 7, "hello": 1}', json.dumps(INITIALIZE), "[[[")
    assert code == 0, err
    assert [(a.get("id"), a.get("error", {}).get("code")) for a in answers] == [  # type: ignore[union-attr]
        (7, -32600),
        (1, None),
        (None, -32700),
    ]
    assert answers[1]["result"]
