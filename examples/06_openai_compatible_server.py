# The same agent on any OpenAI-compatible server (llama-server, vLLM, Ollama, LM Studio, ...):
# a model string and the server's URL. No key is sent unless you pass api_key=.
import os

from foundation_ai import AgentSession, model

server = model("openai:smollm2", base_url=os.environ.get("BASE_URL", "http://127.0.0.1:8080/v1"))
print(AgentSession.builder(server).build().ask("What is the capital of France?"))
