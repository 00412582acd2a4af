# One question, one answer, on the bundled local model (no key, no network).
from foundation_ai.agentic import AgentSession
from foundation_ai.backends import default_model

print(AgentSession.builder(default_model()).build().ask("What is the capital of France?"))
