"""``foundation-ai serve``: agents behind an OpenAI-compatible HTTP API, a sessions API and a
web chat (needs the ``serve`` extra: starlette, uvicorn). See ``docs/serve.md``.

    from foundation_ai.serve import Agent, KeyStore, ServeConfig, ServerThread, create_app
    app = create_app(ServeConfig(agents=[Agent("helper", model="local")], keys=KeyStore("keys.json")))
"""

from __future__ import annotations

from .app import create_app
from .config import Agent, Limits, ServeConfig, load_agents
from .errors import ApiError
from .keys import KeyStore, default_keys_path
from .runner import ServerThread, is_loopback
from .shared import SharedServe

__all__ = [
    "Agent",
    "ApiError",
    "KeyStore",
    "Limits",
    "ServeConfig",
    "ServerThread",
    "SharedServe",
    "create_app",
    "default_keys_path",
    "is_loopback",
    "load_agents",
]
