"""W3C PROV export: loads with the `prov` package, round-trips the relations, and carries a
lesson's chain from loop A's reflection to loop B's prompt."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ralph.config import Settings
from ralph.memory import provenance
from ralph.memory.store import LoopState, MemoryStore
from ralph.records import (
    ActorOutput,
    EvaluatorOutput,
    IterationRecord,
    MemoryMetadata,
    RalphExtension,
    SelfReflection,
)
from tests.conftest import RunCli

prov_model = pytest.importorskip("prov.model")
pytestmark = pytest.mark.filterwarnings("error")  # prov's warnings of ids it will reject

A, B = "ralph-fix-sign-0a1b2c3d", "ralph-fix-sign-9f8e7d6c"
LESSON = "Check the sign before returning."


def record(loop: str, i: int, *, passed: bool = False, **ext: object) -> IterationRecord:
    return IterationRecord(
        loop_id=loop,
        iteration=i,
        timestamp=f"2026-01-0{i}T10:00:00Z",
        task_description="fix the sign",
        actor_output=ActorOutput(actions=[], rationale="r", files_modified=["calc.py"]),
        evaluator_output=EvaluatorOutput(
            passed=passed, verification_type="unit_tests", reward_signal=1.0 if passed else 0.5
        ),
        self_reflection=SelfReflection(
            reflection_text=f"Attempt {i} of {loop}.", lessons_learned=[] if passed else [LESSON]
        ),
        memory_metadata=MemoryMetadata(omega_capacity=3, current_memory_size=0),
        previous_reflections_used=[i - 1] if i > 1 else [],
        ralph=RalphExtension(
            reflection_source="success" if passed else "llm",
            prompt_sha256="a" * 64,
            duration_ms={"actor": 2000, "evaluate": 500, "reflect": 300},
            **ext,  # type: ignore[arg-type]
        ),
    )


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    store = MemoryStore(tmp_path)
    store.ensure()
    state = LoopState(
        A, "fix the sign", settings=Settings(actor="claude", actor_args=["--model", "opus"])
    )
    store.write_state(state)
    store.write_record(record(A, 1))
    store.write_record(record(A, 2, passed=True))
    store.write_record(record(B, 1, lessons_used=[f"{A}#1.0"]))
    store.write_record(record(B, 2, passed=True, git_commit="abc123", lessons_used=[f"{A}#1.0"]))
    return store


def relations(doc: object, kind: type) -> set[tuple[str, ...]]:
    found = set()
    for rec in doc.get_records(kind):  # type: ignore[attr-defined]
        found.add(tuple(str(value) for _, value in rec.formal_attributes[:2]))
    return found


def test_prov_json_loads_with_prov_and_has_the_lesson_chain(store: MemoryStore) -> None:
    text = provenance.dumps(provenance.export(store, [A, B]), fmt="json")
    doc = prov_model.ProvDocument.deserialize(content=text, format="json")
    derived = relations(doc, prov_model.ProvDerivation)
    lesson = f"ralph:{A}/1/lesson/0"
    assert (lesson, f"ralph:{A}/1/reflection") in derived  # the lesson came from A's reflection
    assert (f"ralph:{B}/1/prompt", lesson) in derived  # and B's prompt from the lesson
    assert (f"ralph:{B}/2/prompt", f"ralph:{B}/1/reflection") in derived  # the Ω window
    used = relations(doc, prov_model.ProvUsage)
    assert (f"ralph:{B}/1/act", f"ralph:{B}/1/prompt") in used
    assert (f"ralph:{B}/1/reflect", f"ralph:{B}/1/evaluation") in used
    generated = relations(doc, prov_model.ProvGeneration)
    assert (f"ralph:{B}/2/commit", f"ralph:{B}/2/act") in generated
    assert (f"ralph:{B}/1/reflection", f"ralph:{B}/1/reflect") in generated
    attributed = relations(doc, prov_model.ProvAttribution)
    assert (f"ralph:{A}/1/diff", "ralph:agent/actor/claude/opus") in attributed
    assert (f"ralph:{A}/1/reflection", "ralph:agent/reflector/claude/opus") in attributed
    assert (f"ralph:{A}/2/reflection", "ralph:agent/ralph") in attributed  # success: ralph's
    act = doc.get_record(f"ralph:{A}/1/act")[0]
    assert str(act.get_startTime().isoformat()).startswith("2026-01-01T09:59:57.200000")


def test_prov_round_trips_without_losing_relations(store: MemoryStore) -> None:
    text = provenance.dumps(provenance.export(store, []), fmt="json")
    doc = prov_model.ProvDocument.deserialize(content=text, format="json")
    again = prov_model.ProvDocument.deserialize(content=doc.serialize(format="json"), format="json")
    assert doc == again
    ours = json.loads(text)
    for kind in ("used", "wasGeneratedBy", "wasDerivedFrom", "wasAttributedTo", "actedOnBehalfOf"):
        nodes = ours[kind]  # a relation stated twice (once per loop) is stated once
        values = [json.dumps(v, sort_keys=True) for v in nodes.values()]
        assert len(values) == len(set(values)), kind
    for kind in ("used", "wasGeneratedBy", "wasDerivedFrom", "wasAttributedTo"):
        assert len(json.loads(doc.serialize(format="json"))[kind]) == len(ours[kind])


def test_jsonld_is_a_typed_graph(store: MemoryStore) -> None:
    data = json.loads(provenance.dumps(provenance.export(store, [B]), fmt="jsonld"))
    nodes = data["@graph"]
    prompt = next(n for n in nodes if n.get("@id") == f"ralph:{B}/1/prompt")
    assert prompt["@type"] == ["prov:Entity", "ralph:Prompt"]
    derivations = [n for n in nodes if "prov:Derivation" in n["@type"]]
    assert {
        "generatedEntity": f"ralph:{B}/1/prompt",
        "usedEntity": f"ralph:{A}/1/lesson/0",
        "@type": ["prov:Derivation", "ralph:LessonInjected"],
    } in derivations


def test_cli_export_to_a_file_and_bad_input(store: MemoryStore, ralph: RunCli) -> None:
    out = store.root / "prov.json"
    result = ralph("reflections", "export", "--prov", A, "-o", str(out), cwd=store.root)
    assert result.code == 0, result.err
    prov_model.ProvDocument.deserialize(content=out.read_text(), format="json")
    records = len(store.record_paths(A))
    assert records and f"wrote {out} ({records} record" in result.err  # says where it wrote
    unknown = ralph("reflections", "export", "--prov", "ralph-nope-12345678", cwd=store.root)
    assert unknown.code == 2 and unknown.err.startswith("ralph: error:")
    assert len(unknown.err.strip().splitlines()) <= 2  # the error and its hint
    bad = ralph("reflections", "export", "--prov", "--format", "xml", cwd=store.root)
    assert bad.code == 2 and "unknown PROV format" in bad.err
