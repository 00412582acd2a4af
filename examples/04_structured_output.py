# The answer as a typed object: a JSON Schema the model must follow, decoded and checked.
import msgspec

from foundation_ai.agentic import AgentSession
from foundation_ai.types import ModelParams, OutputFormat


class City(msgspec.Struct):
    name: str
    country: str


params = ModelParams(output_format=OutputFormat.JsonSchema("city", msgspec.json.schema(City)))
agent = AgentSession.builder("local").with_params(params).build()
print(msgspec.json.decode(agent.ask("The biggest city of Japan?").text, type=City))
