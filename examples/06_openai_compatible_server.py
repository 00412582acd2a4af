# The same agent on any OpenAI-compatible server (llama-server, vLLM, Ollama, LM Studio, ...).
import os

from foundation_ai.agentic import AgentSession
from foundation_ai.backends import openai_chat

server = openai_chat("smollm2", base_url=os.environ.get("BASE_URL", "http://127.0.0.1:8080/v1"))
print(AgentSession.builder(server).build().ask("What is the capital of France?"))
