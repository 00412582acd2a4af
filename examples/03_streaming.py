# The answer printed as it is generated, piece by piece.
from foundation_ai.agentic import AgentSession, TurnEvent

agent = AgentSession.builder("local").build()
for event in agent.run_turn_stream("Tell me a very short story.").events():
    if isinstance(event, TurnEvent.Text):
        print(event.text, end="", flush=True)
