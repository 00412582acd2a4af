"""Browsers must not drive ``foundation-ai serve`` for another origin: JSON endpoints take only
``application/json`` (415), the ``Host`` allow-list answers other hosts 421 (DNS rebinding),
state-changing requests need an accepted ``Origin`` (403), CORS only when configured. Attacks
run from a real page on another origin in headless Chromium (Debian's ``chromium`` and
``chromium-driver`` through Selenium), and with forged ``Host`` headers on real sockets."""

from __future__ import annotations

import json
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests._serve_helpers import TOOL_RUNS, serving

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
needs_chromium = pytest.mark.skipif(
    not (CHROMIUM and DRIVER), reason="needs Debian's chromium and chromium-driver (.ci/run installs them)"
)

TURN = {"model": "bot", "messages": [{"role": "user", "content": "please add"}]}


class Recorder:
    """ASGI middleware noting ``(method, path, status)`` of every request the server answered."""

    seen: list[tuple[str, str, int]] = []

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def noted(message: Any) -> None:
            if message["type"] == "http.response.start":
                Recorder.seen.append((scope["method"], scope["path"], message["status"]))
            await send(message)

        await self.app(scope, receive, noted)


ATTACK_JS = """
const target = %(target)s;
const turn = JSON.stringify(%(turn)s);
window.results = {};
async function attempt(name, f) {
  try { window.results[name] = await f(); } catch (e) { window.results[name] = "blocked"; }
}
(async () => {
  await attempt("nocors_text_plain", async () => {
    await fetch(target + "/v1/chat/completions",
      {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body: turn});
    return "sent";
  });
  await attempt("nocors_session", async () => {
    await fetch(target + "/v1/sessions",
      {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body: '{"model":"bot"}'});
    return "sent";
  });
  await attempt("cors_json", async () => {
    const r = await fetch(target + "/v1/chat/completions",
      {method: "POST", headers: {"Content-Type": "application/json"}, body: turn});
    return r.status + " " + (await r.text());
  });
  await attempt("read_sessions", async () => {
    const r = await fetch(target + "/v1/sessions");
    return r.status + " " + (await r.text());
  });
  window.results.done = true;
})();
"""


class _Page(BaseHTTPRequestHandler):
    html = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(self.html)))
        self.end_headers()
        self.wfile.write(self.html)

    def log_message(self, *args: Any) -> None:
        return


@pytest.fixture
def attacker_page() -> Iterator[Any]:
    """A page server on another origin (``http://localhost:OTHERPORT``); ``set(target)``
    makes its page attack ``target``; yields ``(set, url)``."""
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()

    def set_target(target: str) -> None:
        js = ATTACK_JS % {"target": json.dumps(target), "turn": json.dumps(TURN)}
        _Page.html = f"<!doctype html><title>elsewhere</title><script>{js}</script>".encode()

    try:
        yield set_target, f"http://localhost:{srv.server_address[1]}/"
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM  # type: ignore[assignment]
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        # DNS rebinding, simulated: this name resolves to the loopback server
        "--host-resolver-rules=MAP rebind.test 127.0.0.1",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ):
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service(DRIVER), options=opts)
    try:
        yield driver
    finally:
        driver.quit()


def _results(driver: Any) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        got = driver.execute_script("return window.results || null")
        if got and got.get("done"):
            return got  # type: ignore[no-any-return]
        time.sleep(0.05)
    pytest.fail("the attack page never finished")


@needs_chromium
def test_a_page_on_another_origin_cannot_run_a_turn_or_read_sessions_in_chromium(
    tmp_path: Path, browser: Any, attacker_page: Any
) -> None:
    set_target, page = attacker_page
    Recorder.seen = []
    runs_before = len(TOOL_RUNS)
    with serving(tmp_path, no_auth=True, wrap=Recorder) as (srv, _):
        set_target(srv.url)
        browser.get(page)
        got = _results(browser)
        # the no-cors POSTs were sent (opaque answers) and refused by the server
        assert got["nocors_text_plain"] == "sent" and got["nocors_session"] == "sent"
        posts = [(p, st) for m, p, st in Recorder.seen if m == "POST"]
        assert ("/v1/chat/completions", 403) in posts and ("/v1/sessions", 403) in posts, Recorder.seen
        # a JSON POST needs a CORS preflight, which gets no CORS answer: the browser blocks it
        assert got["cors_json"] == "blocked" and got["read_sessions"] == "blocked"
        assert len(TOOL_RUNS) == runs_before  # the tool never ran
        with httpx2.Client(base_url=srv.url) as c:
            assert c.get("/v1/sessions").json()["data"] == []  # nothing was created


@needs_chromium
def test_an_origin_given_with_allow_origin_gets_cors_and_runs_a_turn_in_chromium(
    tmp_path: Path, browser: Any, attacker_page: Any
) -> None:
    set_target, page = attacker_page
    with serving(tmp_path, no_auth=True, allow_origins=[page.rstrip("/")]) as (srv, _):
        set_target(srv.url)
        browser.get(page)
        got = _results(browser)
        status, _, text = got["cors_json"].partition(" ")
        assert status == "200" and "The sum is 42." in json.loads(text)["choices"][0]["message"]["content"]
        assert got["read_sessions"].startswith("200 ")
        # a text/plain body is still not JSON to the server, whoever sends it
        with httpx2.Client(base_url=srv.url) as c:
            r = c.post(
                "/v1/chat/completions",
                content=json.dumps(TURN),
                headers={"Content-Type": "text/plain", "Origin": page.rstrip("/")},
            )
            assert r.status_code == 415 and r.json()["error"]["code"] == "unsupported_media_type"


@needs_chromium
def test_a_dns_rebound_name_is_answered_421_in_chromium(tmp_path: Path, browser: Any) -> None:
    with serving(tmp_path, no_auth=True) as (srv, _):
        browser.get(f"http://rebind.test:{srv.port}/v1/sessions")
        body = browser.find_element("tag name", "body").text
        assert json.loads(body)["error"]["code"] == "host_not_allowed"
        browser.get(f"http://localhost:{srv.port}/v1/sessions")
        assert json.loads(browser.find_element("tag name", "body").text)["object"] == "list"


def _raw(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
        return out


def test_forged_host_headers_are_answered_421_on_a_real_socket(tmp_path: Path) -> None:
    with serving(tmp_path, no_auth=True) as (srv, _):
        for host in (b"evil.example", b"evil.example:%d" % srv.port, b"127.0.0.1.nip.io", b"[::2]"):
            out = _raw(
                srv.port, b"GET /v1/sessions HTTP/1.1\r\nHost: " + host + b"\r\nConnection: close\r\n\r\n"
            )
            assert out.startswith(b"HTTP/1.1 421 "), (host, out[:200])
            assert json.loads(out.split(b"\r\n\r\n", 1)[1])["error"]["code"] == "host_not_allowed"
        for host in (
            b"localhost:%d" % srv.port,
            b"127.0.0.1:%d" % srv.port,
            b"127.0.0.5",
            b"[::1]:80",
            b"a.localhost",
        ):
            out = _raw(
                srv.port, b"GET /v1/sessions HTTP/1.1\r\nHost: " + host + b"\r\nConnection: close\r\n\r\n"
            )
            assert out.startswith(b"HTTP/1.1 200 "), (host, out[:200])
        out = _raw(srv.port, b"GET /v1/sessions HTTP/1.0\r\n\r\n")  # no Host at all
        assert out.startswith(b"HTTP/1.1 421 ")


def test_allowed_hosts_are_configurable_and_keys_mode_answers_any_host_by_default(tmp_path: Path) -> None:
    with (
        serving(tmp_path / "a", no_auth=True, allowed_hosts=["chat.example", ".corp.test"]) as (srv, _),
        httpx2.Client(base_url=srv.url) as c,
    ):
        for host, status in (
            ("chat.example", 200),
            ("x.corp.test", 200),
            ("corp.test:1", 200),
            ("localhost", 421),
            ("evil.example", 421),
        ):
            assert c.get("/v1/sessions", headers={"Host": host}).status_code == status, host
    with serving(tmp_path / "b") as (srv, keys):
        h = {"Authorization": f"Bearer {keys.create('x')[1]}", "Host": "anything.example"}
        with httpx2.Client(base_url=srv.url) as c:
            assert c.get("/v1/sessions", headers=h).status_code == 200


def test_json_endpoints_refuse_other_content_types_with_415(tmp_path: Path) -> None:
    body = json.dumps(TURN).encode()
    with serving(tmp_path, no_auth=True) as (srv, _), httpx2.Client(base_url=srv.url) as c:
        for path in ("/v1/chat/completions", "/v1/responses", "/v1/sessions"):
            for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data", None):
                headers = {"Content-Type": ctype} if ctype else {}
                r = c.post(path, content=body, headers=headers)
                assert r.status_code == 415, (path, ctype, r.text)
                err = r.json()["error"]
                assert set(err) == {"message", "type", "param", "code"}
                assert err["code"] == "unsupported_media_type"
        ok = c.post(
            "/v1/chat/completions",
            content=body,
            headers={"Content-Type": "application/json; charset=utf-8"},
        )
        assert ok.status_code == 200, ok.text


def test_state_changing_requests_need_the_servers_own_or_an_allowed_origin(tmp_path: Path) -> None:
    with (
        serving(tmp_path, no_auth=True, allow_origins=["https://app.example"]) as (srv, _),
        httpx2.Client(base_url=srv.url) as c,
    ):
        for origin, status in (
            ("http://evil.example", 403),
            ("null", 403),
            ("http://localhost:1", 403),  # another port is another origin
            (srv.url, 201),  # the web chat's own pages
            ("https://app.example", 201),
            ("https://APP.example:443", 201),
        ):
            r = c.post("/v1/sessions", json={"model": "bot"}, headers={"Origin": origin})
            assert r.status_code == status, (origin, r.text)
            if status == 403:
                assert r.json()["error"]["code"] == "origin_not_allowed"
        sid = c.post("/v1/sessions", json={"model": "bot"}).json()["id"]  # no Origin: not a browser
        r = c.post(f"/v1/sessions/{sid}/abort", headers={"Origin": "http://evil.example"})
        assert r.status_code == 403
        assert c.get("/v1/sessions", headers={"Origin": "http://evil.example"}).status_code == 200


def test_cors_headers_are_sent_only_to_configured_origins(tmp_path: Path) -> None:
    with (
        serving(tmp_path, no_auth=True, allow_origins=["https://app.example"]) as (srv, _),
        httpx2.Client(base_url=srv.url) as c,
    ):
        pre = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}
        good = c.options("/v1/chat/completions", headers={"Origin": "https://app.example", **pre})
        assert good.status_code == 200
        assert good.headers["access-control-allow-origin"] == "https://app.example"
        bad = c.options("/v1/chat/completions", headers={"Origin": "https://evil.example", **pre})
        assert "access-control-allow-origin" not in bad.headers
        got = c.get("/v1/models", headers={"Origin": "https://app.example"})
        assert got.headers["access-control-allow-origin"] == "https://app.example"
        assert "x-session-id" in got.headers["access-control-expose-headers"].lower()
