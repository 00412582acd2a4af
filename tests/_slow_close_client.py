"""A script for tests/test_session_cleanup.py: one agent session on a sync-only ``httpx2.Client``
whose responses take a while to close (a slow transport), two turns with a tool call each, then
the interpreter exits without closing the session. Usage: ``python _slow_close_client.py URL``
(an OpenAI-compatible fixture server answering call/answer/call/answer)."""

from __future__ import annotations

import sys
import time

import httpx2

from foundation_ai import AgentSession
from foundation_ai.agentic import InMemorySessionStore, tool
from foundation_ai.backends import openai_chat


class SlowCloseStream(httpx2.SyncByteStream):
    def __init__(self, inner: httpx2.SyncByteStream) -> None:
        self.inner = inner

    def __iter__(self):  # type: ignore[no-untyped-def]
        yield from self.inner

    def close(self) -> None:
        time.sleep(0.3)  # e.g. a proxy slow to release the connection
        self.inner.close()


class SlowCloseTransport(httpx2.HTTPTransport):
    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        resp = super().handle_request(request)
        resp.stream = SlowCloseStream(resp.stream)  # type: ignore[arg-type]
        return resp


@tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


model = openai_chat(
    "gpt-4o-mini",
    base_url=sys.argv[1],
    api_key="sk-test",
    http_client=httpx2.Client(transport=SlowCloseTransport()),
)
agent = AgentSession.builder(model).with_tools(add).with_store(InMemorySessionStore()).build()
print(agent.run_turn("one").text(), agent.run_turn("two").text(), flush=True)
