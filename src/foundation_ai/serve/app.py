"""``create_app``: the ASGI application of ``foundation-ai serve`` (Starlette).

Routes: ``POST /v1/chat/completions``, ``POST /v1/responses``, ``GET /v1/models``,
``GET /v1/models/{name}``, the sessions API (``sessions_api``), and the web chat at ``/``.
Errors are JSON in the OpenAI error shape (``errors.py``); an unexpected exception is logged
and answered ``500 server_error`` without details. ``guard.py`` answers only allowed
``Host`` names and refuses state-changing requests from other origins; CORS headers are sent
only to the configured ``allow_origins``; every response carries ``X-Content-Type-Options: nosniff`` and a
strict ``Content-Security-Policy`` (scripts and styles from the server itself only).
See ``docs/serve.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .chat_api import chat_completions
from .config import ServeConfig
from .errors import ApiError, error_body, error_response
from .guard import BrowserGuard, normalize_origin
from .http import StreamGuard, owner_of, state_of
from .responses_api import responses
from .runtime import SessionManager
from .sessions_api import routes as session_routes

__all__ = ["ServeState", "create_app"]

log = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


@dataclass
class ServeState:
    """What the endpoints share (``app.state.serve``)."""

    config: ServeConfig
    manager: SessionManager
    streams: StreamGuard
    """Ends a revoked key's open streams (``http.StreamGuard``)."""


class _Guard:
    """Adds security headers to every response (streaming ones included) and answers an
    unexpected exception with a bare JSON 500 (logged here; the connection stays usable)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def wrapped(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = list(message.get("headers", []))
                headers += [
                    (b"x-content-type-options", b"nosniff"),
                    (b"content-security-policy", CSP.encode()),
                    (b"referrer-policy", b"no-referrer"),
                    (b"x-frame-options", b"DENY"),
                ]
                message["headers"] = headers
            await send(message)

        try:
            await self.app(scope, receive, wrapped)
        except Exception:
            log.exception("unhandled error on %s %s", scope.get("method"), scope.get("path"))
            if started:  # a stream broke midway: nothing more can be said
                return
            body = JSONResponse(error_body("internal server error", "server_error"), status_code=500)
            await body(scope, receive, wrapped)


def _model_entry(agent: Any) -> dict[str, Any]:
    return {
        "id": agent.name,
        "object": "model",
        "created": 0,
        "owned_by": "foundation-ai",
        "description": agent.description,
    }


async def list_models(request: Request) -> Response:
    """``GET /v1/models``: the configured agents, in the OpenAI list shape."""
    owner_of(request)
    agents = state_of(request).config.agents
    return JSONResponse({"object": "list", "data": [_model_entry(a) for a in agents]})


async def get_model(request: Request) -> Response:
    """``GET /v1/models/{name}``: one agent (404 ``model_not_found``)."""
    owner_of(request)
    return JSONResponse(_model_entry(state_of(request).manager.agent(request.path_params["name"])))


async def index(request: Request) -> Response:
    """The web chat page."""
    return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return error_response(exc)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
    msg = {404: "no such route", 405: "method not allowed"}.get(exc.status_code, "bad request")
    return JSONResponse(error_body(msg, kind), status_code=exc.status_code)


def create_app(config: ServeConfig) -> Starlette:
    """The ASGI app serving ``config``'s agents (run it with uvicorn).

    Raises:
        ConfigurationError: see :class:`ServeConfig`.
    """
    if config.shared is not None:  # several processes sharing one database (serve/shared.py)
        from .shared import SharedSessionManager

        manager: SessionManager = SharedSessionManager(config)
    else:
        manager = SessionManager(config)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        manager.loop = asyncio.get_running_loop()
        watcher = (
            None if keys is None else asyncio.create_task(manager.watch_revocations(keys, streams.revoke))
        )
        yield
        if watcher is not None:
            watcher.cancel()
        await manager.shutdown()

    app = Starlette(
        routes=[
            Route("/", index, methods=["GET"]),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
            Route("/v1/models", list_models, methods=["GET"]),
            Route("/v1/models/{name}", get_model, methods=["GET"]),
            Route("/v1/chat/completions", chat_completions, methods=["POST"]),
            Route("/v1/responses", responses, methods=["POST"]),
            *session_routes(),
        ],
        exception_handlers={ApiError: _api_error, HTTPException: _http_error},
        lifespan=lifespan,
    )
    keys = None if config.no_auth else config.keys
    streams = StreamGuard(keys, manager.abort_turns_of)
    app.state.serve = ServeState(config=config, manager=manager, streams=streams)
    app.state.before_stop = manager.stop_threadsafe  # called by ServerThread.stop from its thread
    if config.allow_origins:  # CORS only for the origins configured (Starlette's CORSMiddleware)
        from starlette.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=[normalize_origin(o) for o in config.allow_origins],
            allow_methods=["GET", "POST", "DELETE", "PATCH"],
            allow_headers=["authorization", "content-type", "x-session-id"],
            expose_headers=["x-session-id"],
            max_age=600,
        )
    app.add_middleware(BrowserGuard, allowed_hosts=config.hosts(), allow_origins=config.allow_origins)
    app.add_middleware(_Guard)
    return app
