"""docs/json-format.md holds real output: every marked example decodes and re-encodes unchanged."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec
import pytest

from foundation_ai.types import (
    AgentProgress,
    GenerationMetadata,
    Messages,
    ModelId,
    ModelInteraction,
    ModelOutput,
    ModelParams,
    ModelState,
    OutputFormat,
    SessionRecord,
    StopReason,
    Stream,
    ToolChoice,
    ToolDeclarations,
    UsageReport,
    from_json,
    load_document,
    to_json,
)
from foundation_ai.vectors import VectorEntry, VectorMatch

DOC = Path(__file__).resolve().parents[1] / "docs" / "json-format.md"
TYPES: dict[str, Any] = {
    "AgentProgress": AgentProgress,
    "GenerationMetadata": GenerationMetadata,
    "Messages": Messages,
    "ModelId": ModelId,
    "ModelInteraction": ModelInteraction,
    "ModelOutput": ModelOutput,
    "ModelParams": ModelParams,
    "OutputFormat": OutputFormat,
    "SessionRecord": SessionRecord,
    "StopReason": StopReason,
    "Stream[Messages, ModelState]": Stream[Messages, ModelState],
    "ToolChoice": ToolChoice,
    "ToolDeclarations": ToolDeclarations,
    "UsageReport": UsageReport,
    "VectorEntry": VectorEntry,
    "VectorMatch": VectorMatch,
}
BLOCK = re.compile(r"<!-- (example|examples|document): ([^>]+?) -->\n```jsonl?\n(.*?)\n```", re.S)


def _cases() -> list[tuple[str, str, str]]:
    found = [(m.group(1), m.group(2), m.group(3)) for m in BLOCK.finditer(DOC.read_text(encoding="utf-8"))]
    out: list[tuple[str, str, str]] = []
    for kind, name, body in found:
        if kind == "examples":
            out += [(kind, name, line) for line in body.splitlines() if line.strip()]
        else:
            out.append((kind, name, body))
    return out


CASES = _cases()


def test_doc_has_examples_of_every_union() -> None:
    names = {name for _, name, _ in CASES}
    assert names == set(TYPES)
    assert len(CASES) > 60


@pytest.mark.parametrize(("kind", "name", "text"), CASES)
def test_doc_example_is_real_output(kind: str, name: str, text: str) -> None:
    compact = msgspec.json.encode(msgspec.json.decode(text))
    if kind == "document":
        items = load_document(compact, TYPES[name])
        assert msgspec.json.decode(compact)["items"] == msgspec.to_builtins(items)
        return
    value = from_json(compact, TYPES[name])
    assert to_json(value) == compact
