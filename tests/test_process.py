"""ralph.process: the one subprocess runner — timeouts kill whole groups, capture is capped."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ralph import process
from ralph.redact import redact

from .fakes.processes import alive


def test_wall_timeout_kills_the_grandchild(tmp_path: Path) -> None:
    command = "sh -c 'sleep 60 & echo $! > grandchild.pid; wait'; echo unreachable"
    result = process.run(command, cwd=tmp_path, wall_timeout=0.5)
    grandchild = int((tmp_path / "grandchild.pid").read_text())
    assert result.timed_out == "wall"
    assert not result.ok
    assert "unreachable" not in result.stdout
    assert not alive(grandchild)


def test_what_a_command_leaves_running_is_killed_when_it_exits(tmp_path: Path) -> None:
    result = process.run("sleep 60 & echo $! > left.pid", cwd=tmp_path, wall_timeout=30)
    assert result.exit_code == 0
    assert result.timed_out is None
    assert not alive(int((tmp_path / "left.pid").read_text()))


def test_idle_timeout_fires_when_output_stops(tmp_path: Path) -> None:
    result = process.run("echo started; sleep 60", cwd=tmp_path, idle_timeout=0.5, wall_timeout=30)
    assert result.timed_out == "idle"
    assert result.stdout == "started\n"


def test_steady_output_keeps_the_idle_timer_from_firing(tmp_path: Path) -> None:
    command = "for i in 1 2 3 4 5 6; do echo $i; sleep 0.1; done"
    result = process.run(command, cwd=tmp_path, idle_timeout=3, wall_timeout=30)
    assert result.timed_out is None
    assert result.stdout.split() == ["1", "2", "3", "4", "5", "6"]


def test_output_over_the_cap_keeps_head_and_tail_with_a_marker(tmp_path: Path) -> None:
    script = "import sys; sys.stdout.write('HEAD' + 'x' * 100000 + 'TAIL')"
    result = process.run([sys.executable, "-c", script], cwd=tmp_path, cap=1000)
    assert result.stdout.startswith("HEAD")
    assert result.stdout.endswith("TAIL")
    assert "bytes elided by ralph" in result.stdout
    elided = int(result.stdout.split("[... ")[1].split(" bytes")[0])
    assert elided == 100008 - 1000
    assert len(result.stdout) < 1100


def test_output_under_the_cap_is_kept_whole(tmp_path: Path) -> None:
    result = process.run("printf 'abc'; printf 'err' >&2", cwd=tmp_path, cap=1000)
    assert (result.stdout, result.stderr) == ("abc", "err")


def test_secret_environment_values_are_redacted(tmp_path: Path) -> None:
    secret = "hunter2-very-secret-value"
    result = process.run(
        'echo "key=$DEMO_API_KEY"; echo "$DEMO_API_KEY" >&2',
        cwd=tmp_path,
        env={"DEMO_API_KEY": secret},
    )
    assert secret not in result.stdout + result.stderr
    assert result.stdout == "key=[REDACTED:DEMO_API_KEY]\n"
    assert result.stderr == "[REDACTED:DEMO_API_KEY]\n"


def test_the_environment_is_read_again_once_it_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its secrets are kept between redactions, never past a change."""
    monkeypatch.setenv("DEMO_TOKEN", "first-secret-value")
    assert redact("a first-secret-value") == "a [REDACTED:DEMO_TOKEN]"
    monkeypatch.setenv("DEMO_TOKEN", "second-secret-value")
    assert redact("first-secret-value second-secret-value") == (
        "first-secret-value [REDACTED:DEMO_TOKEN]"
    )
    monkeypatch.delenv("DEMO_TOKEN")
    assert redact("second-secret-value") == "second-secret-value"


def test_credential_shapes_are_redacted_without_an_env_variable(tmp_path: Path) -> None:
    token = "sk-" + "A1b2C3d4" * 4
    result = process.run(f"echo {token}", cwd=tmp_path)
    assert token not in result.stdout
    assert "[REDACTED]" in result.stdout


def test_stdin_is_fed_to_the_command(tmp_path: Path) -> None:
    result = process.run("cat; echo done", cwd=tmp_path, stdin="hello\nworld\n")
    assert result.stdout == "hello\nworld\ndone\n"


def test_without_stdin_the_command_reads_end_of_file(tmp_path: Path) -> None:
    result = process.run("cat; echo eof", cwd=tmp_path, wall_timeout=10)
    assert result.timed_out is None
    assert result.stdout == "eof\n"


def test_output_is_streamed_while_the_command_runs(tmp_path: Path) -> None:
    # The command waits for a file that only the callback creates: with output delivered
    # at the end instead of as it comes, this would hit the wall timeout.
    seen: list[tuple[str, str]] = []

    def on_output(stream: str, chunk: str) -> None:
        seen.append((stream, chunk))
        if "first" in chunk:
            (tmp_path / "go").touch()

    command = "echo first; while [ ! -f go ]; do sleep 0.02; done; echo second; echo oops >&2"
    result = process.run(command, cwd=tmp_path, wall_timeout=20, on_output=on_output)
    assert result.timed_out is None
    assert "".join(chunk for stream, chunk in seen if stream == "stdout") == "first\nsecond\n"
    assert "".join(chunk for stream, chunk in seen if stream == "stderr") == "oops\n"


def test_exit_code_and_on_start_hook(tmp_path: Path) -> None:
    started: list[subprocess.Popen[bytes]] = []
    result = process.run("exit 7", cwd=tmp_path, on_start=started.append)
    assert result.exit_code == 7
    assert not result.ok
    assert len(started) == 1
    assert started[0].returncode == 7
    assert result.duration_ms >= 0


def test_a_ctrl_c_while_the_command_is_being_set_up_kills_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A starved main thread may still be in `on_start` or starting the output readers when
    the command is well under way and Ctrl-C comes (seen as a batch's agent outliving its
    interrupted loop): the command's group is killed then too, not left running."""
    import threading
    import types

    command = [sys.executable, "-c", "import time; time.sleep(60)"]
    started: list[subprocess.Popen[bytes]] = []

    def interrupt(proc: subprocess.Popen[bytes]) -> None:
        started.append(proc)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        process.run(command, cwd=tmp_path, on_start=interrupt)
    assert not alive(started[0].pid)

    class Reader(threading.Thread):
        def start(self) -> None:
            raise KeyboardInterrupt  # arrives as the readers start

    monkeypatch.setattr(process, "threading", types.SimpleNamespace(Thread=Reader))
    with pytest.raises(KeyboardInterrupt):
        process.run(command, cwd=tmp_path, on_start=started.append)
    assert not alive(started[1].pid)


def test_a_group_is_alive_while_a_member_runs_and_gone_once_none_is_left(tmp_path: Path) -> None:
    """`kill_group` asks this after every command; a group with no member at all is answered
    without reading /proc, one with a live member still counts."""
    leader = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        assert process._group_alive(leader.pid)
    finally:
        leader.kill()
        leader.wait()
    assert not process._group_alive(leader.pid)


COLOURED = (
    r"printf '\033[91mred\033[0m\r\nnext\033]0;title\007\n'; printf '\033[1mwarn\033[0m\n' >&2"
)


def test_output_arrives_without_terminal_escapes(tmp_path: Path) -> None:
    result = process.run(COLOURED, cwd=tmp_path, wall_timeout=20)
    assert (result.stdout, result.stderr) == ("red\nnext\n", "warn\n")


def test_live_chunks_are_clean_even_when_a_sequence_or_crlf_is_split(tmp_path: Path) -> None:
    # the escape sequence, the CRLF and a two-byte character each cut across two writes
    command = (
        r"printf '\033[9'; sleep 0.2; printf '1mred\r'; sleep 0.2; printf '\nv\303'; "
        r"sleep 0.2; printf '\251\033[0m\n'"
    )
    seen: list[str] = []
    result = process.run(
        command, cwd=tmp_path, wall_timeout=20, on_output=lambda s, c: seen.append(c)
    )
    assert "".join(seen) == "red\nvé\n" == result.stdout
    assert not any("\x1b" in chunk or "[" in chunk or "\ufffd" in chunk for chunk in seen)


def test_raw_output_keeps_its_control_characters(tmp_path: Path) -> None:
    result = process.run(r"printf 'a\000b\r\n'", cwd=tmp_path, wall_timeout=20, clean=False)
    assert result.stdout == "a\x00b\r\n"


def test_unset_variables_are_not_inherited(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    result = process.run(
        'echo "[${FORCE_COLOR-unset}]"', cwd=tmp_path, wall_timeout=20, unset=["FORCE_COLOR"]
    )
    assert result.stdout == "[unset]\n"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_a_contained_run_ends_what_left_its_session_and_spares_a_run_still_going(
    tmp_path: Path,
) -> None:
    """An actor's daemon (its own session, its environment scrubbed) is ended when the actor
    ends; a run going on beside it in another thread keeps its processes."""
    import threading
    import time

    beside: list[process.ProcessResult] = []
    started = tmp_path / "started"
    other = threading.Thread(
        target=lambda: beside.append(
            process.run(f"touch {started}; sleep 3; echo alive", cwd=tmp_path, contain=True)
        )
    )
    other.start()
    while not started.exists():
        time.sleep(0.01)
    pidfile = tmp_path / "daemon.pid"
    daemon = (
        f"env -i setsid sh -c 'echo $$ > {pidfile}; exec sleep 60' </dev/null >/dev/null 2>&1 &"
    )
    result = process.run(
        f"{daemon} while [ ! -s {pidfile} ]; do sleep 0.01; done", cwd=tmp_path, contain=True
    )
    pid = int(pidfile.read_text())
    assert not alive(pid)
    assert result.notes == ["ralph ended 1 program it left running"]
    other.join()
    assert beside[0].stdout.strip() == "alive"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a subreaper is Linux's")
def test_ralph_adopts_orphans_only_while_a_contained_run_is_under_way(tmp_path: Path) -> None:
    """Else an orphan of a check, killed with its group, would stay ralph's zombie for good."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)

    def adopting() -> int:
        flag = ctypes.c_int(-1)
        assert libc.prctl(37, ctypes.byref(flag), 0, 0, 0) == 0  # PR_GET_CHILD_SUBREAPER
        return flag.value

    seen: list[int] = []
    result = process.run(
        "true",
        cwd=tmp_path,
        contain=True,
        on_start=lambda proc: seen.append(adopting()),
    )
    assert result.exit_code == 0 and seen == [1]
    assert adopting() == 0
