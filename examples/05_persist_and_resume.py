# Sessions persist in the store you give them (here SQLite in the user data dir, the file the CLI
# lists; without with_store a session keeps its history in memory only).
# Run once, then again with the printed id.
import sys

from foundation_ai import AgentSession
from foundation_ai.agentic import SqliteSessionStore

builder = AgentSession.builder("local").with_store(SqliteSessionStore())
if len(sys.argv) == 1:
    agent = builder.build()
    agent.ask("My name is Ada.")
    print(agent.session_id)
else:
    print(builder.resume(sys.argv[1]).ask("What is my name?"))
