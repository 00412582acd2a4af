# Two tools the model may call; their JSON arguments are checked against the signatures.
from foundation_ai import AgentSession, tool


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


agent = AgentSession.builder("local").with_tools(add, multiply).build()
print(agent.ask("What is (2 + 3) * 4? Use the tools."))
