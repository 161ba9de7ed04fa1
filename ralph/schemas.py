"""The packaged JSON schemas: loading through importlib.resources, validation, readable errors."""

from __future__ import annotations

import functools
import json
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

    import jsonschema

RECORD = "reflection-memory.schema.json"
LOOP_STATE = "loop-state.schema.json"
CONFIG = "config.schema.json"


def package_data(folder: str) -> Traversable:
    """`prompts/` or `schemas/`: inside the wheel under `ralph/`, beside the package in a checkout.

    The wheel force-includes the top-level folders into the package; an editable install or a
    plain checkout keeps them at the repository root, one level above `ralph/`.
    """
    packaged = resources.files("ralph").joinpath(folder)
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parent.parent / folder


@functools.cache
def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(package_data("schemas").joinpath(name).read_text("utf-8"))
    return data


@functools.cache
def validator(name: str) -> jsonschema.protocols.Validator:
    import jsonschema

    schema = load(name)
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def errors(name: str, instance: Any) -> list[str]:
    """Every violation as `$.json.path: reason`, sorted by path; empty when valid."""
    found = sorted(validator(name).iter_errors(instance), key=lambda e: list(map(str, e.path)))
    return [f"{e.json_path}: {_reason(e)}" for e in found]


def _reason(error: jsonschema.ValidationError) -> str:
    message = str(error.message)
    return message if len(message) <= 200 else message[:197] + "..."
