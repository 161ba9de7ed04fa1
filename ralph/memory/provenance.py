"""Where every lesson came from, as W3C PROV: PROV-JSON (or PROV-JSON-LD) of loops' memory.

Per iteration: entities for the prompt, the commit (or the diff without git), the evaluation,
the reflection and its lessons; activities act, evaluate and reflect; agents for the actor
(CLI and model), the reflector and ralph. The prompt `wasDerivedFrom` the reflections of its
window and the lessons of other loops it was given, so a lesson's chain runs from loop A's
reflection to loop B's prompt. Written with the standard library (the `prov` package only
validates it, in the tests): no runtime dependency for an export format.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from ralph import __version__
from ralph.config import model_args
from ralph.errors import ConfigError, StoreError
from ralph.files import atomic_write_json
from ralph.ids import validate_loop_id
from ralph.memory.lessons import lesson_texts, parse_lesson_id
from ralph.memory.store import MemoryStore
from ralph.records import MAX_PHASE_MS, IterationRecord, to_json

NAMESPACE = "https://ralph-loop.dev/prov#"  # ralph's own terms and ids
JSONLD_CONTEXT = "https://openprovenance.org/prov-jsonld/context.jsonld"
TEXT_CHARS = 500
UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class ProvDocument:
    """PROV-JSON's sections, filled by `add_*`; relations get blank-node ids `_:rN`."""

    def __init__(self) -> None:
        self.sections: dict[str, dict[str, dict[str, Any]]] = {}
        self._ids = itertools.count(1)

    def node(self, section: str, ident: str, **attrs: Any) -> str:
        existing = self.sections.setdefault(section, {}).setdefault(ident, {})
        existing.update({k: v for k, v in attrs.items() if v is not None})
        return ident

    def relation(self, kind: str, **roles: Any) -> None:
        """`prov_entity="x"` -> `"prov:entity": "x"` (a Python name cannot hold the colon)."""
        data = {k.replace("_", ":", 1): v for k, v in roles.items() if v is not None}
        section = self.sections.setdefault(kind, {})
        if data not in section.values():  # the same delegation, once per loop, is one
            section[f"_:r{next(self._ids)}"] = data

    def to_json(self) -> dict[str, Any]:
        return {"prefix": {"ralph": NAMESPACE}, **self.sections}


def _id(*parts: Any) -> str:
    """`ralph:loop/3/prompt`; characters PROV-N cannot write become `-`."""
    return "ralph:" + "/".join(UNSAFE.sub("-", str(p)) for p in parts)


def _text(value: str | None) -> str | None:
    if value is None:
        return None
    return value if len(value) <= TEXT_CHARS else value[:TEXT_CHARS] + "…"


def _time(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


def _times(record: IterationRecord) -> list[str | None]:
    """End, reflect start, evaluate start and act start, as PROV times. The record is written
    after the reflection: times run back from its timestamp by the durations. What the record
    cannot tell (a timestamp that does not parse, a duration out of range or before year 1) is
    unknown, None, and left out of the document."""
    times: list[str | None] = [None] * 4
    try:
        when = datetime.fromisoformat(record.timestamp.replace("Z", "+00:00"))
    except ValueError:
        return times
    durations = record.ralph.duration_ms if record.ralph else {}
    for k, phase in enumerate(("", "reflect", "evaluate", "actor")):
        ms = durations.get(phase, 0) if phase else 0
        if not 0 <= ms <= MAX_PHASE_MS:
            break
        try:
            when -= timedelta(milliseconds=ms)
            times[k] = _time(when)
        except (OverflowError, ValueError):
            break
    return times


def _lesson_id(lesson: str) -> str | None:
    """`loop#iteration.k` -> the lesson entity's id in the loop it came from."""
    parsed = parse_lesson_id(lesson)
    if parsed is None:
        return None
    k = lesson.rsplit(".", 1)[-1] if "." in lesson.split("#", 1)[1] else "0"
    return _id(parsed[0], parsed[1], "lesson", k)


def _model(args: Sequence[Any]) -> str | None:
    found = model_args([str(a) for a in args])
    return found[-1] if found else None


def _agents(doc: ProvDocument, settings: dict[str, Any]) -> tuple[str, str]:
    actor = str(settings.get("actor") or "unknown")
    model = _model(settings.get("actor_args") or [])
    actor_id = doc.node(
        "agent",
        _id("agent", "actor", actor, model or "default"),
        **{"prov:type": "prov:SoftwareAgent", "ralph:actor": actor, "ralph:model": model},
    )
    reflector = str(settings.get("reflector") or actor)  # default: the actor's own model
    reflector_id = doc.node(
        "agent",
        _id("agent", "reflector", reflector, model if reflector == actor else "default"),
        **{"prov:type": "prov:SoftwareAgent", "ralph:reflector": reflector},
    )
    doc.relation(
        "actedOnBehalfOf", prov_delegate=reflector_id, prov_responsible=_id("agent", "ralph")
    )
    return actor_id, reflector_id


def add_loop(
    doc: ProvDocument,
    loop_id: str,
    records: Iterable[IterationRecord],
    settings: dict[str, Any],
) -> None:
    ralph = doc.node(
        "agent",
        _id("agent", "ralph"),
        **{"prov:type": "prov:SoftwareAgent", "ralph:version": __version__},
    )
    actor, reflector = _agents(doc, settings)
    for record in records:
        # a heuristic (or success) reflection is ralph's own work, not the reflector model's
        source = record.ralph.reflection_source if record.ralph else "heuristic"
        by = reflector if source in ("llm", "repaired") else ralph
        _iteration(doc, record, ralph=ralph, actor=actor, reflector=by)


def _iteration(
    doc: ProvDocument, record: IterationRecord, *, ralph: str, actor: str, reflector: str
) -> None:
    loop, i = record.loop_id, record.iteration
    ext = record.ralph
    end, reflect_start, evaluate_start, act_start = _times(record)

    act = doc.node(
        "activity",
        _id(loop, i, "act"),
        **{"prov:startTime": act_start, "prov:endTime": evaluate_start},
    )
    evaluate = doc.node(
        "activity",
        _id(loop, i, "evaluate"),
        **{"prov:startTime": evaluate_start, "prov:endTime": reflect_start},
    )
    reflect = doc.node(
        "activity",
        _id(loop, i, "reflect"),
        **{"prov:startTime": reflect_start, "prov:endTime": end},
    )
    for activity, agent in ((act, actor), (evaluate, ralph), (reflect, reflector)):
        doc.relation("wasAssociatedWith", prov_activity=activity, prov_agent=agent)

    prompt = doc.node(
        "entity",
        _id(loop, i, "prompt"),
        **{
            "prov:type": "ralph:Prompt",
            "ralph:sha256": ext.prompt_sha256 if ext else None,
            "ralph:task": _text(record.task_description),
        },
    )
    doc.relation("wasAttributedTo", prov_entity=prompt, prov_agent=ralph)
    doc.relation("used", prov_activity=act, prov_entity=prompt, prov_time=act_start)
    for j in record.previous_reflections_used or []:
        doc.relation(
            "wasDerivedFrom",
            prov_generatedEntity=prompt,
            prov_usedEntity=_id(loop, j, "reflection"),
        )
    for lesson in ext.lessons_used if ext else []:
        lesson_id = _lesson_id(lesson)
        if lesson_id is None:
            continue
        doc.node("entity", lesson_id, **{"prov:type": "ralph:Lesson"})
        doc.relation(
            "wasDerivedFrom",
            prov_generatedEntity=prompt,
            prov_usedEntity=lesson_id,
            **{"prov:type": "ralph:LessonInjected"},
        )

    changes = record.actor_output.total_changes
    code = doc.node(
        "entity",
        _id(loop, i, "commit" if ext and ext.git_commit else "diff"),
        **{
            "prov:type": "ralph:Commit" if ext and ext.git_commit else "ralph:Diff",
            "ralph:sha": ext.git_commit if ext else None,
            "ralph:files": ", ".join(record.actor_output.files_modified or []) or None,
            "ralph:linesAdded": changes.lines_added if changes else None,
            "ralph:linesDeleted": changes.lines_deleted if changes else None,
        },
    )
    doc.relation("wasGeneratedBy", prov_entity=code, prov_activity=act, prov_time=evaluate_start)
    doc.relation("wasAttributedTo", prov_entity=code, prov_agent=actor)
    doc.relation("used", prov_activity=evaluate, prov_entity=code)

    output = record.evaluator_output
    evaluation = doc.node(
        "entity",
        _id(loop, i, "evaluation"),
        **{
            "prov:type": "ralph:Evaluation",
            "ralph:passed": output.passed,
            "ralph:reward": record.reward,
            "ralph:errors": len(output.errors or []),
            "ralph:fingerprint": ext.error_fingerprint if ext else None,
        },
    )
    doc.relation(
        "wasGeneratedBy",
        prov_entity=evaluation,
        prov_activity=evaluate,
        prov_time=reflect_start,
    )
    doc.relation("wasAttributedTo", prov_entity=evaluation, prov_agent=ralph)
    doc.relation("used", prov_activity=reflect, prov_entity=evaluation)

    sr = record.self_reflection
    reflection = doc.node(
        "entity",
        _id(loop, i, "reflection"),
        **{
            "prov:type": "ralph:Reflection",
            "prov:value": _text(sr.reflection_text),
            "ralph:source": ext.reflection_source if ext else None,
        },
    )
    doc.relation("wasGeneratedBy", prov_entity=reflection, prov_activity=reflect, prov_time=end)
    doc.relation("wasAttributedTo", prov_entity=reflection, prov_agent=reflector)
    for k, text in enumerate(lesson_texts(to_json(sr))):
        lesson = doc.node(
            "entity",
            _id(loop, i, "lesson", k),
            **{"prov:type": "ralph:Lesson", "prov:value": _text(text)},
        )
        doc.relation("wasDerivedFrom", prov_generatedEntity=lesson, prov_usedEntity=reflection)
        doc.relation("wasAttributedTo", prov_entity=lesson, prov_agent=reflector)


def export(store: MemoryStore, loop_ids: Sequence[str]) -> dict[str, Any]:
    """PROV-JSON of `loop_ids` (default: every loop with records); unknown loops are an error."""
    store.require()
    ids = [validate_loop_id(i) for i in dict.fromkeys(loop_ids)] or [
        i for i in store.loop_ids() if store.record_paths(i)
    ]
    doc = ProvDocument()
    for loop_id in ids:
        records = store.valid_records(loop_id)
        if not records:
            raise StoreError(
                f"loop {loop_id} has no records", hint="`ralph reflections list` shows the loops"
            )
        settings: dict[str, Any] = {}  # imported records come without their state
        with contextlib.suppress(StoreError):
            settings = store.read_state(loop_id).settings.snapshot()
        add_loop(doc, loop_id, records, settings)
    if not ids:
        raise StoreError("no records to export", hint="`ralph reflections list` shows the loops")
    return doc.to_json()


JSONLD_TYPES = {
    "entity": "prov:Entity",
    "activity": "prov:Activity",
    "agent": "prov:Agent",
    "used": "prov:Usage",
    "wasGeneratedBy": "prov:Generation",
    "wasDerivedFrom": "prov:Derivation",
    "wasAttributedTo": "prov:Attribution",
    "wasAssociatedWith": "prov:Association",
    "actedOnBehalfOf": "prov:Delegation",
}
JSONLD_KEYS = {"prov:time": "atTime", "prov:startTime": "startTime", "prov:endTime": "endTime"}


def to_jsonld(document: dict[str, Any]) -> dict[str, Any]:
    """PROV-JSON -> PROV-JSON-LD (the W3C member submission): an @graph of typed nodes, where
    relations are nodes too (`prov:Usage`, `prov:Derivation`, ...) with unprefixed roles."""
    graph: list[dict[str, Any]] = []
    for section, nodes in document.items():
        if section == "prefix":
            continue
        for ident, attrs in nodes.items():
            types = [JSONLD_TYPES[section]]
            node: dict[str, Any] = {} if ident.startswith("_:") else {"@id": ident}
            for key, value in attrs.items():
                if key == "prov:type":
                    types.append(value)
                elif key in JSONLD_KEYS or section not in ("entity", "activity", "agent"):
                    node[JSONLD_KEYS.get(key, key.removeprefix("prov:"))] = value
                else:
                    node[key] = value
            node["@type"] = types if len(types) > 1 else types[0]
            graph.append(node)
    return {"@context": [JSONLD_CONTEXT, {"ralph": NAMESPACE}], "@graph": graph}


def dumps(document: dict[str, Any], *, fmt: str) -> str:
    data = to_jsonld(document) if fmt == "jsonld" else document
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def prov_data(store: MemoryStore, loop_ids: Sequence[str], *, fmt: str) -> dict[str, Any]:
    """`ralph reflections export --prov` in `fmt` (the CLI prints it as every JSON)."""
    if fmt not in ("json", "jsonld"):
        raise ConfigError(f"--format: unknown PROV format {fmt!r}", hint="json or jsonld")
    document = export(store, loop_ids)
    return to_jsonld(document) if fmt == "jsonld" else document


def write_prov(store: MemoryStore, loop_ids: Sequence[str], *, output: Path, fmt: str) -> None:
    """`--prov -o FILE`: atomically, its strings redacted one by one (`atomic_write_json`)."""
    atomic_write_json(output, prov_data(store, loop_ids, fmt=fmt))
