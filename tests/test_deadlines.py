"""Every network wait has a deadline (backends/_http/; docs/models.md, "Deadlines"): a server on
127.0.0.1 trickling one byte at a time, one trickling its headers, one that never answers, and
a TLS server whose certificate does not verify. The assertions are about outcomes (the error
text, how much of the trickle the server managed to send, how many connections it saw), not
about elapsed time."""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from foundation_ai.backends._http import HttpOptions, HttpStreamError, astream_events, stream_events
from foundation_ai.errors import ConfigurationError
from foundation_ai.types import Messages, ModelInteraction, StopReason

SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
    b"Connection: close\r\n\r\n"
)
BODY = b'data: {"choices":[{"index":0,"delta":{"content":"' + b"x" * 200 + b'"}}]}\n\n'


class ScriptServer:
    """A loopback TCP server running ``script(conn, server)`` for each connection, in a daemon
    thread; it counts connections and the payload bytes a script managed to send."""

    def __init__(self, script: Callable[[socket.socket, ScriptServer], None], wrap: Any = None) -> None:
        self.script = script
        self.wrap = wrap
        self.connections = 0
        self.sent = 0
        self.stopped = threading.Event()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        try:
            if self.wrap is not None:
                conn = self.wrap(conn)
            conn.recv(65536)  # the request (small)
            self.script(conn, self)
        except (OSError, ssl.SSLError):
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(2)
        self.sock.close()


def trickle_body(conn: socket.socket, srv: ScriptServer) -> None:
    """Headers at once, then the body one byte at a time, 20 bytes a second."""
    conn.sendall(SSE_HEAD + f"{len(BODY):x}\r\n".encode())
    for i in range(len(BODY)):
        if srv.stopped.is_set():
            return
        conn.sendall(BODY[i : i + 1])
        srv.sent += 1
        time.sleep(0.05)
    conn.sendall(b"\r\n0\r\n\r\n")


def trickle_headers(conn: socket.socket, srv: ScriptServer) -> None:
    """A status line, then header bytes one at a time, never ending the headers."""
    conn.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
    for _ in range(400):
        if srv.stopped.is_set():
            return
        conn.sendall(b"a")
        srv.sent += 1
        time.sleep(0.05)


def silent(conn: socket.socket, srv: ScriptServer) -> None:
    """Accept the request and never answer."""
    srv.stopped.wait(30)


@pytest.fixture
def server() -> Iterator[Callable[..., ScriptServer]]:
    made: list[ScriptServer] = []

    def make(script: Callable[[socket.socket, ScriptServer], None], wrap: Any = None) -> ScriptServer:
        s = ScriptServer(script, wrap)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def opts(url: str, **kw: Any) -> HttpOptions:
    base: dict[str, Any] = dict(
        api_key=None, base_url=url, timeout=30.0, max_retries=0, retry_base_delay=0.01
    )
    base.update(kw)
    return HttpOptions(**base)


def drain(o: HttpOptions, url: str) -> list[str]:
    return [e.data for e in stream_events(o, url + "/v1/x", b"{}", {})]


async def adrain(o: HttpOptions, url: str) -> list[str]:
    return [e.data async for e in astream_events(o, url + "/v1/x", b"{}", {})]


def test_trickling_body_ends_at_the_total_deadline_sync(server: Callable[..., ScriptServer]) -> None:
    srv = server(trickle_body)
    with pytest.raises(HttpStreamError, match=r"deadline of 1 s") as err:
        drain(opts(srv.url, deadline=1.0), srv.url)
    assert not err.value.retryable
    assert srv.sent < len(BODY) // 2  # cut off long before the trickle could finish


async def test_trickling_body_ends_at_the_total_deadline_async(server: Callable[..., ScriptServer]) -> None:
    srv = server(trickle_body)
    with pytest.raises(HttpStreamError, match=r"deadline of 1 s"):
        await adrain(opts(srv.url, deadline=1.0), srv.url)
    assert srv.sent < len(BODY) // 2


def test_trickling_headers_on_a_new_connection_hit_the_first_byte_deadline(
    server: Callable[..., ScriptServer],
) -> None:
    srv = server(trickle_headers)
    with pytest.raises(HttpStreamError, match=r"did not start answering within 0.5 s"):
        drain(opts(srv.url, first_byte_timeout=0.5), srv.url)
    assert srv.sent < 100


async def test_trickling_headers_hit_the_first_byte_deadline_async(
    server: Callable[..., ScriptServer],
) -> None:
    srv = server(trickle_headers)
    with pytest.raises(HttpStreamError, match=r"did not start answering within 0.5 s"):
        await adrain(opts(srv.url, first_byte_timeout=0.5), srv.url)
    assert srv.sent < 100


def test_a_silent_server_is_retried_after_the_first_byte_timeout_then_fails(
    server: Callable[..., ScriptServer],
) -> None:
    srv = server(silent)
    with pytest.raises(HttpStreamError, match="did not start answering"):
        drain(opts(srv.url, first_byte_timeout=0.3, max_retries=2), srv.url)
    assert srv.connections == 3  # the first attempt and two retries, each cut at 0.3 s


def test_the_total_deadline_bounds_the_retries(server: Callable[..., ScriptServer]) -> None:
    srv = server(silent)
    with pytest.raises(HttpStreamError, match=r"did not start answering|deadline"):
        drain(opts(srv.url, first_byte_timeout=0.3, deadline=0.5, max_retries=50), srv.url)
    assert srv.connections <= 3  # 50 retries allowed, but the deadline leaves room for few


def test_a_turn_against_a_trickling_server_ends_with_an_error_message(
    server: Callable[..., ScriptServer],
) -> None:
    from foundation_ai.backends._openai_chat import openai_chat

    srv = server(trickle_body)
    m = openai_chat("x", base_url=srv.url, deadline=1.0, max_retries=0)
    last = m.generate(ModelInteraction(messages=[Messages.user("hi")]))[-1]
    assert last.stop_reason == StopReason.Error()
    assert "deadline of 1 s" in (last.error_detail or "")
    assert srv.sent < len(BODY) // 2


@pytest.fixture(scope="module")
def self_signed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (written with ``cryptography``)."""
    x509 = pytest.importorskip("cryptography.x509")
    import datetime
    import ipaddress

    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .sign(key, hashes.SHA256())
    )
    d = tmp_path_factory.mktemp("tls")
    (d / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (d / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return d / "cert.pem", d / "key.pem"


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_tls_certificate_errors_are_final_never_retried(
    server: Callable[..., ScriptServer], self_signed: tuple[Path, Path], mode: str
) -> None:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(*self_signed)
    srv = server(lambda conn, s: None, wrap=lambda c: ctx.wrap_socket(c, server_side=True))
    url = srv.url.replace("http://", "https://")
    o = opts(url, max_retries=3)
    with pytest.raises(HttpStreamError, match="TLS certificate verification failed") as err:
        if mode == "sync":
            drain(o, url)
        else:
            await adrain(o, url)
    assert not err.value.retryable
    assert srv.connections == 1


@pytest.mark.parametrize("bad", [0, -1, float("nan"), "10"])
def test_deadlines_must_be_positive_seconds(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="deadline must be a positive number"):
        HttpOptions(api_key=None, base_url="http://127.0.0.1:9", deadline=bad)
    with pytest.raises(ConfigurationError, match="first_byte_timeout must be a positive number"):
        HttpOptions(api_key=None, base_url="http://127.0.0.1:9", first_byte_timeout=bad)


def test_default_deadlines_are_documented_values() -> None:
    o = HttpOptions(api_key=None, base_url="http://127.0.0.1:9")
    assert (o.deadline, o.first_byte_timeout) == (900.0, 300.0)
    assert HttpOptions(api_key=None, base_url="http://h", deadline=None).deadline is None
