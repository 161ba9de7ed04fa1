"""The sandbox's options (`--sandbox`, `--sandbox-network`, `--sandbox-write`, `--pass-env`),
shared by `run`, `resume`, `batch` and `bench` (ralph/sandbox.py says what they do)."""

from __future__ import annotations

import os
from typing import Annotated, Any

import typer

SandboxOpt = Annotated[
    str | None,
    typer.Option(
        "--sandbox",
        metavar="MODE",
        envvar="RALPH_SANDBOX",
        show_default="auto",
        help="Run the agent and the checks in a sandbox: bwrap (bubblewrap; refused where it "
        "cannot run), none (as before), or auto (bwrap where it can run, else none with a "
        "warning).",
    ),
]

SandboxNetworkOpt = Annotated[
    str | None,
    typer.Option(
        "--sandbox-network",
        metavar="WHO",
        envvar="RALPH_SANDBOX_NETWORK",
        show_default="actor",
        help="Who keeps the network in the sandbox: actor (it calls its model; the checks do "
        "not), checks, all or none.",
    ),
]

SandboxWriteOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--sandbox-write",
        metavar="PATH",
        show_default="the agent's own directories",
        help="A path the agent may write besides the tree and its TMPDIR; repeatable; replaces "
        "the agent's own (~/.claude, ~/.codex, ...).  [env var: RALPH_SANDBOX_WRITE]",
    ),
]

PassEnvOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--pass-env",
        metavar="NAME",
        help="A variable of ralph's environment the sandboxed agent and checks also get (by "
        "default only the agent's own credentials and ralph's RALPH_*); repeatable.  "
        "[env var: RALPH_PASS_ENV]",
    ),
]


def sandbox_flags(
    sandbox: str | None,
    network: str | None = None,
    write: list[str] | None = None,
    pass_env: list[str] | None = None,
) -> dict[str, Any]:
    """The options as settings keys (None: not given, so the config and variables win)."""
    return {
        "sandbox": sandbox,
        "sandbox_network": network,
        "sandbox_write": list(write) if write else None,
        "pass_env": list(pass_env) if pass_env else None,
    }


def export_sandbox(flags: dict[str, Any]) -> None:
    """`batch` and `bench` run each loop as a `ralph run` process: the sandbox options reach
    them as the RALPH_* variables those read."""
    for key, value in flags.items():
        if value is not None:
            shown = " ".join(value) if isinstance(value, list) else str(value)
            os.environ["RALPH_" + key.upper()] = shown
