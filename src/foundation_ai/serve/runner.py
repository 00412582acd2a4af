"""Running the app with uvicorn: ``is_loopback`` (the ``--no-auth`` rule) and ``ServerThread``
(a server on a background thread, for embedding and tests)."""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from typing import Any

__all__ = ["ServerThread", "is_loopback"]


def is_loopback(host: str) -> bool:
    """True when ``host`` is a loopback address or ``localhost`` (``127.0.0.0/8``, ``::1``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class ServerThread:
    """``uvicorn`` serving ``app`` on ``host:port`` in a daemon thread (``port=0``: a free port).

    For an app of ``create_app`` the HTTP protocol is ``connections.guarded_protocol`` of its
    ``Limits`` (header timeout, connection cap, header limits) unless ``http=`` is given.

        with ServerThread(app) as srv:
            print(srv.url)          # http://127.0.0.1:PORT

    Raises:
        RuntimeError: the server did not start within ``start_timeout`` seconds.
    """

    def __init__(
        self,
        app: Any,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        start_timeout: float = 30.0,
        **uvicorn_options: Any,
    ) -> None:
        import uvicorn

        self._sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, port))
        self.host = host
        self.port: int = self._sock.getsockname()[1]
        self.app = app
        opts = {"log_level": "warning", "lifespan": "on", **uvicorn_options}
        serve = getattr(getattr(app, "state", None), "serve", None)
        if serve is not None and "http" not in opts:  # create_app's app: its connection limits
            from .connections import guarded_protocol

            opts["http"] = guarded_protocol(serve.config.limits)
        self.server = uvicorn.Server(uvicorn.Config(app, **opts))
        self._thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self._sock]}, daemon=True, name="foundation-ai-serve"
        )
        self._timeout = start_timeout

    @property
    def url(self) -> str:
        """``http://host:port`` (no trailing slash)."""
        host = f"[{self.host}]" if ":" in self.host else self.host  # an IPv6 literal (RFC 3986)
        return f"http://{host}:{self.port}"

    def start(self) -> ServerThread:
        """Start and wait until the server accepts connections."""
        self._thread.start()
        deadline = time.monotonic() + self._timeout
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.02)
        return self

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the server to end; True while it still runs."""
        self._thread.join(timeout)
        return self._thread.is_alive()

    def stop(self) -> None:
        """Ask uvicorn to exit and wait for the thread. An app with a thread-safe
        ``app.state.before_stop()`` (``create_app``'s ends its open streams) is told first."""
        hook = getattr(getattr(self.app, "state", None), "before_stop", None)
        if callable(hook):
            hook()
        self.server.should_exit = True
        self._thread.join(timeout=30)
        self._sock.close()

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
