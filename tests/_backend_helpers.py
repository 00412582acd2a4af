"""Helpers shared by the HTTP backend tests (tests/test_backend_openai_chat.py,
test_backend_anthropic.py, test_backend_openai_responses.py): canned responses read from a
backend's fixture folder (tests/fixtures/<backend>/), the loopback fixture server's lifecycle,
tool declarations, and the checks of the Model contract (backends/base.py) every backend meets.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from foundation_ai.backends import assemble
from foundation_ai.types import (
    Args,
    AssistantMessage,
    ModelState,
    StopReason,
    Stream,
    Tool,
    ToolCall,
    ToolDefinition,
)
from tests._fixture_server import Canned, FixtureServer

__all__ = [
    "Canned",
    "FixtureServer",
    "Fixtures",
    "check_contract",
    "check_ends",
    "error_of",
    "nexts",
    "outputs",
    "reset",
    "serve",
    "tool",
]


class Fixtures:
    """One backend's fixture folder, ``tests/fixtures/<folder>/`` (``.path``)."""

    def __init__(self, folder: str) -> None:
        self.path = Path(__file__).parent / "fixtures" / folder

    def __truediv__(self, name: str) -> Path:
        return self.path / name

    def frames(self, name: str) -> list[bytes]:
        """The fixture's SSE events, one HTTP chunk each."""
        raw = (self.path / name).read_bytes()
        return [p + b"\n\n" for p in raw.split(b"\n\n") if p.strip()]

    def sse(self, name: str, **kw: Any) -> Canned:
        """The fixture served as an SSE stream, one event per HTTP chunk."""
        return Canned(chunks=self.frames(name), **kw)

    def json(self, name: str, status: int = 200, **kw: Any) -> Canned:
        """The fixture served whole as ``application/json`` with ``status``."""
        return Canned(
            status=status, body=(self.path / name).read_bytes(), content_type="application/json", **kw
        )


def serve() -> Iterator[FixtureServer]:
    """A running loopback fixture server, stopped after the last test (a fixture body)."""
    with FixtureServer() as s:
        yield s


def reset(srv: FixtureServer) -> FixtureServer:
    """``srv`` with no recorded requests and no queued responses."""
    srv.requests.clear()
    srv._queue.clear()
    return srv


def tool(name: str, **props: Any) -> Tool:
    """A tool taking the object ``{prop: <json type>}`` (e.g. ``city="string"``)."""
    schema = {"type": "object", "properties": {k: {"type": v} for k, v in props.items()}}
    return Tool.SingleCommand(ToolDefinition(name=name, description=f"{name} tool", arguments=Args(schema)))


def outputs(items: list[Any]) -> list[AssistantMessage]:
    """The assembled Assistant outputs of a snapshot stream."""
    return [m for m in assemble(items, "snapshot") if isinstance(m, AssistantMessage)]


def nexts(items: list[Any]) -> list[AssistantMessage]:
    """Every chunk's message, in stream order."""
    return [i.value for i in items if isinstance(i, Stream.Next)]


def check_ends(items: list[Any]) -> None:
    """Init first; Finished or Error last."""
    assert isinstance(items[0], Stream.Init)
    assert isinstance(items[-1], Stream.Pending)
    assert isinstance(items[-1].value, ModelState.Finished | ModelState.Error)


def check_contract(items: list[Any]) -> None:
    """Init first; Finished or Error last; one id per output, ids never reused after a new one;
    every tool call emitted once."""
    check_ends(items)
    seen: list[str] = []
    for m in nexts(items):
        if not seen or seen[-1] != m.id:
            assert m.id not in seen, "an output id came back after another output started"
            seen.append(m.id)
    calls = [m for m in nexts(items) if isinstance(m.content, ToolCall)]
    assert len({c.id for c in calls}) == len(calls), "a tool call was emitted more than once"


def error_of(items: list[Any]) -> AssistantMessage:
    """The error message ending ``items``; asserts the stream ends with the matching Error state."""
    last = nexts(items)[-1]
    assert last.stop_reason == StopReason.ERROR
    assert isinstance(items[-1].value, ModelState.Error)
    assert items[-1].value.message == last.error_detail
    return last
