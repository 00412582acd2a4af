# Sessions persist (SQLite in the user data dir); run once, then again with the printed id.
import sys

from foundation_ai.agentic import AgentSession
from foundation_ai.backends import default_model

builder = AgentSession.builder(default_model())
if len(sys.argv) == 1:
    agent = builder.build()
    agent.ask("My name is Ada.")
    print(agent.session_id)
else:
    print(builder.resume(sys.argv[1]).ask("What is my name?"))
