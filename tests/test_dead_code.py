"""No dead code: vulture at 80 % confidence finds nothing in ralph (what only tests used went)."""

from __future__ import annotations

from pathlib import Path

import vulture

PACKAGE = Path(__file__).resolve().parent.parent / "ralph"


def test_vulture_finds_no_dead_code() -> None:
    scan = vulture.Vulture()
    scan.scavenge([str(PACKAGE)])
    unused = [
        f"{item.filename}:{item.first_lineno}: {item.message}"
        for item in scan.get_unused_code(min_confidence=80)
    ]
    assert unused == []


def test_vulture_sees_an_unused_function(tmp_path: Path) -> None:
    """The scan above would find dead code: an unreachable line is reported at 100 %."""
    (tmp_path / "m.py").write_text("def f() -> int:\n    return 1\n    print('never')\n")
    scan = vulture.Vulture()
    scan.scavenge([str(tmp_path)])
    assert [item.message for item in scan.get_unused_code(min_confidence=80)] == [
        "unreachable code after 'return'"
    ]
