"""Prompt text: pystache templates with user overrides, and the budget of what goes into them.

Templates live in the packaged `prompts/` folder; a file of the same name in
`.aiwg/ralph/prompts/` under the project root replaces it, so teams tune wording without forking.
Prompts are plain text, so HTML escaping is off and a missing key renders as nothing.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from ralph import schemas
from ralph.errors import ConfigError
from ralph.glyphs import plural

TEMPLATE_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")
OVERRIDE_DIR = Path(".aiwg") / "ralph" / "prompts"
TRUNCATION_MARKER = " [...]"


def template_source(name: str, *, project_root: Path | None) -> Traversable:
    """The user override in `.aiwg/ralph/prompts/` if present, else the packaged template."""
    if not TEMPLATE_NAME.fullmatch(name or ""):
        raise ConfigError(
            f"invalid prompt template name {name!r}",
            hint="template names are lowercase letters, digits, '-' and '_' (e.g. actor)",
        )
    if project_root is not None:
        override = project_root / OVERRIDE_DIR / f"{name}.mustache"
        if override.is_file():
            return override
    return schemas.package_data("prompts").joinpath(f"{name}.mustache")


def load_template(name: str, *, project_root: Path | None) -> str:
    source = template_source(name, project_root=project_root)
    if not source.is_file():
        raise ConfigError(
            f"no prompt template named {name!r}",
            hint="packaged templates: actor, reflection, repair",
        )
    try:
        return source.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"cannot read prompt template {source}: {exc}",
            hint="fix or delete the override to use the packaged template",
        ) from None


def render(name: str, context: Mapping[str, Any], *, project_root: Path | None = None) -> str:
    """Render template `name` with `context`; ConfigError for a bad name or a broken template."""
    text = load_template(name, project_root=project_root)
    try:
        rendered: str = _renderer().render(_parsed(text), dict(context))
    except Exception as exc:  # pystache raises its own ParsingError and plain errors
        where = template_source(name, project_root=project_root)
        raise ConfigError(
            f"prompt template {where} cannot be rendered: {exc}",
            hint="check the template's mustache tags ({{#x}} ... {{/x}} must pair up)",
        ) from None
    return rendered


@functools.cache
def _renderer() -> Any:
    import pystache

    # partials={} keeps `{{> x}}` from reading files relative to the working directory.
    return pystache.Renderer(escape=lambda s: s, missing_tags="ignore", partials={})


@functools.lru_cache(maxsize=8)
def _parsed(text: str) -> Any:
    """A template's text parsed once, not once per prompt (half of a render's time)."""
    import pystache

    return pystache.parse(text)


def cap(text: str, limit: int) -> str:
    """Keep head and tail of a long text; the middle is elided with a marker."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    return (
        f"{text[:head]}\n[... {plural(len(text) - limit, 'character')} elided ...]\n{text[-tail:]}"
    )


def estimate_tokens(text: str) -> int:
    """Rough token count (4 characters a token): good enough to bound a prompt's size."""
    return math.ceil(len(text) / 4)


FENCE_RUN = re.compile(r"`{3,}")


def fence(*texts: str) -> str:
    """A code fence longer than any run of backticks in `texts` (at least three), so notes
    from past attempts quoted between two of them cannot close the quote and speak as the
    prompt (they are data, never instructions)."""
    longest = max((len(m.group()) for t in texts for m in FENCE_RUN.finditer(t)), default=2)
    return "`" * max(3, longest + 1)
