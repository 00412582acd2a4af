"""A child process for the SIGKILL persistence test (tests/test_agentic_store.py).

Usage: ``python tests/_agent_subprocess.py DB SESSION_ID WHERE`` with WHERE ``tool`` (block inside
a tool call) or ``generation`` (block mid-generation). It runs one complete turn, then starts a
second one and prints ``BLOCKED`` once it is blocked at WHERE; the parent then kills it.
"""

from __future__ import annotations

import sys
import time

from foundation_ai.agentic import (
    AgentSession,
    ScriptedModel,
    SqliteSessionStore,
    call,
    hook,
    pause,
    say,
    think,
    tool,
)


def blocked() -> None:
    print("BLOCKED", flush=True)


@tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


@tool
def hang(x: int) -> int:
    """Block until killed."""
    blocked()
    time.sleep(600)
    return x


def main() -> None:
    db, session_id, where = sys.argv[1], sys.argv[2], sys.argv[3]
    if where == "tool":
        second = [
            [
                think("call the slow tool", signature="s1"),
                say("Working on it."),
                call("hang", {"x": 1}, id="call_hang"),
            ]
        ]
    else:
        second = [[say("This answer is being"), hook(blocked), pause(600), say("never")]]
    model = ScriptedModel(
        [[call("add", {"a": 1, "b": 2}, id="call_add")], say("1 + 2 = 3"), *second],
        chunk_mode="delta",
    )
    agent = (
        AgentSession.builder(model).with_tools(add, hang).with_store(SqliteSessionStore(db)).build(session_id)
    )
    agent.run_turn("What is 1 + 2?")
    print("TURN1", flush=True)
    agent.run_turn("Now something slow.")


if __name__ == "__main__":
    main()
