"""A process that pauses a turn for approval and exits (tests/test_approvals.py).

Usage: ``python tests/_approval_subprocess.py DB SESSION_ID DIR``: a session whose ``shell``
tool requires approval is asked to create ``DIR/made.txt``; the turn pauses; the process prints
``PAUSED <call id> <outcome>`` and exits without approving.
"""

from __future__ import annotations

import sys

from foundation_ai.agentic import AgentSession, ScriptedModel, SqliteSessionStore, call, say
from foundation_ai.agentic.toolsets import shell_tools


def main() -> None:
    db, session_id, where = sys.argv[1], sys.argv[2], sys.argv[3]
    model = ScriptedModel([call("shell", {"command": "touch made.txt"}, id="call_touch"), say("unused")])
    agent = (
        AgentSession.builder(model)
        .with_tools(shell_tools(where))
        .with_store(SqliteSessionStore(db))
        .build(session_id)
    )
    turn = agent.run_turn("Create made.txt")
    print("PAUSED", " ".join(c.id for c in turn.awaiting), turn.outcome.value, flush=True)
    agent.close()


if __name__ == "__main__":
    main()
