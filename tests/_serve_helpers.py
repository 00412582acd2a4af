"""Shared pieces of the serve tests: a scripted agent whose replies depend on the prompt, and a
real uvicorn server on 127.0.0.1 (random port) in a thread."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from foundation_ai.agentic import ScriptedModel, call, pause, say, think, tool
from foundation_ai.serve import Agent, KeyStore, Limits, ServeConfig, ServerThread, create_app
from foundation_ai.types import ModelInteraction, ToolResultMessage

XSS = '<script>window.__pwned = 1</script><img src="x" onerror="window.__pwned = 2"> and **bold** `code`'

TOOL_RUNS: list[tuple[int, int]] = []


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    TOOL_RUNS.append((a, b))
    return a + b


def reply(inter: ModelInteraction) -> Any:
    """The scripted agent: the prompt's keywords pick the answer."""
    last = inter.messages[-1]
    if isinstance(last, ToolResultMessage):
        return say(f"The sum is {last.text()}.")
    text = last.text() or ""
    if "add" in text:
        return [say("Let me add."), call("add", {"a": 2, "b": 40})]
    if "slow" in text:
        return [say("Starting a long answer"), pause(60), say(" that never ends")]
    if "xss" in text:
        return say(XSS)
    if "count" in text:
        return [say("Counting:"), pause(0.6), say("one,"), pause(0.6), say("two, done.")]
    if "think" in text:
        return [think("Pondering the question."), say("Thought it through.")]
    if "recall" in text:
        seen = [m.text() for m in inter.messages if m.text()]
        return say("I remember: " + " | ".join(s for s in seen if s))
    return say("Hello there, friend.")


def scripted_agent(name: str = "bot") -> Agent:
    """An agent on a ScriptedModel with the ``add`` tool."""
    model = ScriptedModel([reply] * 10_000, chunk_mode="delta")
    return Agent(name, model=model, tools=[add], description="scripted test agent")


@contextmanager
def serving(
    tmp_path: Path,
    *,
    agents: list[Agent] | None = None,
    no_auth: bool = False,
    limits: Limits | None = None,
    wrap: Any = None,
    **config_options: Any,
) -> Iterator[tuple[ServerThread, KeyStore]]:
    """A running server (keys in ``tmp_path``), yielding ``(server, keys)``. ``config_options``
    go to ``ServeConfig`` (``allowed_hosts``, ``allow_origins``, ``secrets``); ``wrap`` is an
    ASGI middleware class added outermost (e.g. a request recorder)."""
    keys = KeyStore(tmp_path / "keys.json")
    config = ServeConfig(
        agents=agents or [scripted_agent()],
        keys=None if no_auth else keys,
        no_auth=no_auth,
        data_dir=tmp_path / "data",
        limits=limits or Limits(),
        **config_options,
    )
    app = create_app(config)
    if wrap is not None:
        app.add_middleware(wrap)
    with ServerThread(app) as srv:
        yield srv, keys
