# Sessions persist (SQLite in the user data dir); run once, then again with the printed id.
import sys

from foundation_ai import AgentSession

builder = AgentSession.builder("local")
if len(sys.argv) == 1:
    agent = builder.build()
    agent.ask("My name is Ada.")
    print(agent.session_id)
else:
    print(builder.resume(sys.argv[1]).ask("What is my name?"))
