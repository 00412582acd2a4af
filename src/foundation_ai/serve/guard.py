"""Browser guards of ``foundation-ai serve`` (an ASGI middleware): the ``Host`` allow-list
(against DNS rebinding) and the ``Origin`` check of state-changing requests (against another
site's page driving the agent). See ``docs/serve.md`` (Browsers and other origins).

Rules, after what Django (``ALLOWED_HOSTS``, ``CSRF_TRUSTED_ORIGINS``) and the Fetch standard
(https://fetch.spec.whatwg.org/#origin-header) describe:

- a request whose ``Host`` (port left out) is not allowed is answered ``421 Misdirected
  Request`` (RFC 9110 section 15.5.20), code ``host_not_allowed``; ``allowed_hosts`` ``None``
  allows every host, ``"*"`` too, ``".example.com"`` a domain and its subdomains;
- a ``POST``/``PUT``/``PATCH``/``DELETE`` carrying an ``Origin`` header (every browser sends
  one on such requests, also with ``mode: "no-cors"``) is refused ``403``, code
  ``origin_not_allowed``, unless that origin is the server's own (same ``host:port`` as the
  ``Host`` header) or listed in ``allow_origins``; ``Origin: null`` (sandboxed frames, files)
  is never accepted. Requests without ``Origin`` (curl, SDKs) are not browsers' and pass.

CORS headers are sent only for ``allow_origins`` (Starlette's ``CORSMiddleware``, set up in
``app.py``).
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from .errors import error_body

__all__ = ["LOOPBACK_HOSTS", "BrowserGuard", "host_allowed", "normalize_origin"]

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
"""The hosts allowed by default with ``no_auth`` (plus every ``127.0.0.0/8`` address and
``*.localhost``, RFC 6761 section 6.3)."""

_UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def _host_name(host: str) -> str:
    """``host`` without its port, lower-case, IPv6 brackets removed."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    if host.count(":") == 1:
        return host.rsplit(":", 1)[0]
    return host


def _is_loopback_name(name: str) -> bool:
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def host_allowed(host: str, allowed: Iterable[str] | None) -> bool:
    """True when the ``Host`` header value ``host`` (``name[:port]``) matches ``allowed``
    (``None``: every host; entries are names without ports, ``"*"`` any host, ``".x.org"``
    ``x.org`` and its subdomains, ``"loopback"`` every loopback name and address)."""
    if allowed is None:
        return True
    name = _host_name(host)
    if not name:
        return False
    for entry in allowed:
        e = entry.strip().lower()
        if e == "*" or e == name:
            return True
        if e == "loopback" and _is_loopback_name(name):
            return True
        if e.startswith(".") and (name == e[1:] or name.endswith(e)):
            return True
    return False


def normalize_origin(origin: str) -> str:
    """``scheme://host[:port]`` of an origin, lower-case, default ports (80, 443) left out.

    Raises:
        ValueError: ``origin`` is not an ``http(s)://host[:port]`` origin.
    """
    parts = urlsplit(origin.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
        raise ValueError(f"not an http(s) origin: {origin!r}")
    port = parts.port
    netloc = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    if port is not None and port != {"http": 80, "https": 443}[parts.scheme]:
        netloc += f":{port}"
    return f"{parts.scheme}://{netloc}"


class BrowserGuard:
    """The ASGI middleware applying the module's rules.

    Args:
        app: the wrapped application.
        allowed_hosts: see :func:`host_allowed`.
        allow_origins: origins (``scheme://host[:port]``) accepted besides the server's own.
    """

    def __init__(self, app: ASGIApp, allowed_hosts: list[str] | None, allow_origins: list[str]) -> None:
        self.app = app
        self.allowed_hosts = allowed_hosts
        self.allow_origins = frozenset(normalize_origin(o) for o in allow_origins)

    def _origin_ok(self, origin: str, host: str) -> bool:
        try:
            norm = normalize_origin(origin)
        except ValueError:
            return False  # "null", or garbage
        if norm in self.allow_origins:
            return True
        # the server's own origin: the page was served from this very Host (scheme aside: a
        # TLS-terminating proxy in front makes it https)
        own = urlsplit(norm)
        netloc = own.netloc
        return bool(host) and (netloc == host.lower() or netloc == _default_port_host(host.lower()))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k: v for k, v in scope["headers"] if k in (b"host", b"origin")}
        host = headers.get(b"host", b"").decode("latin-1")
        if not host_allowed(host, self.allowed_hosts):
            msg = f"this server does not answer for host {_host_name(host)!r} (--allowed-host adds one)"
            await _refuse(send, 421, msg, "host_not_allowed")
            return
        origin = headers.get(b"origin")
        if origin is not None and scope["method"] in _UNSAFE:
            text = origin.decode("latin-1")
            if not self._origin_ok(text, host):
                msg = f"requests from the origin {text[:100]!r} are not accepted (--allow-origin adds one)"
                await _refuse(send, 403, msg, "origin_not_allowed")
                return
        await self.app(scope, receive, send)


def _default_port_host(host: str) -> str:
    """``host`` with ``:80`` or ``:443`` dropped (an origin leaves default ports out)."""
    for suffix in (":80", ":443"):
        if host.endswith(suffix):
            return host[: -len(suffix)]
    return host


async def _refuse(send: Send, status: int, message: str, code: str) -> None:
    kind = "permission_error" if status == 403 else "invalid_request_error"
    body = json.dumps(error_body(message, kind, code)).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
