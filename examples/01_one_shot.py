# One question, one answer, on the bundled local model (no key, no network).
from foundation_ai import AgentSession

print(AgentSession.builder("local").build().ask("What is the capital of France?"))
