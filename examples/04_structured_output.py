# The answer as a typed object: the model follows the type's JSON Schema; the answer is checked.
from dataclasses import dataclass

from foundation_ai import AgentSession


@dataclass
class City:
    name: str
    country: str


agent = AgentSession.builder("local").build()
print(agent.ask("The biggest city of Japan?", output_type=City))
