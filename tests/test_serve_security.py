"""``foundation-ai serve`` security: API keys (stored hashed, Bearer), each key sees only its own
sessions on every endpoint, ``--no-auth`` only on loopback, request limits, OpenAI-shaped JSON
errors without stack traces, no CORS wildcard."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest

from foundation_ai.serve import Agent, KeyStore, Limits, ServerThread, is_loopback
from tests._serve_helpers import scripted_agent, serving

SRC = str(Path(__file__).resolve().parents[1] / "src")
JSON = {"Content-Type": "application/json"}


def _wait_running(c: httpx2.Client, sid: str, headers: dict[str, str]) -> None:
    for _ in range(200):
        if c.get(f"/v1/sessions/{sid}", headers=headers).json().get("running"):
            return
        time.sleep(0.05)
    pytest.fail("the turn never started")


def _error(r: httpx2.Response, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert "Traceback" not in r.text and 'File "' not in r.text
    return body["error"]  # type: ignore[no-any-return]


@pytest.fixture
def two_keys(tmp_path: Path) -> Iterator[tuple[ServerThread, dict[str, str], dict[str, str]]]:
    with serving(tmp_path, limits=Limits(max_turns_per_key=2)) as (srv, keys):
        _, a = keys.create("alice")
        _, b = keys.create("bob")
        yield srv, {"Authorization": f"Bearer {a}"}, {"Authorization": f"Bearer {b}"}


def test_keys_are_stored_hashed_and_verified(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "k.json")
    key_id, key = store.create("ci")
    text = (tmp_path / "k.json").read_text()
    assert key not in text and key[4:] not in text
    assert oct((tmp_path / "k.json").stat().st_mode & 0o777) == "0o600"
    again = KeyStore(tmp_path / "k.json")
    assert again.verify(key) == key_id
    assert again.verify(key + "x") is None and again.verify("") is None
    assert again.revoke(key_id) and again.verify(key) is None


def test_requests_without_a_valid_key_are_refused_on_every_api_route(two_keys: Any) -> None:
    srv, _, _ = two_keys
    routes = [
        ("GET", "/v1/models"),
        ("GET", "/v1/models/bot"),
        ("POST", "/v1/chat/completions"),
        ("POST", "/v1/responses"),
        ("GET", "/v1/sessions"),
        ("POST", "/v1/sessions"),
        ("GET", "/v1/sessions/x"),
        ("POST", "/v1/sessions/x/turns"),
        ("GET", "/v1/sessions/x/events"),
        ("POST", "/v1/sessions/x/steer"),
        ("POST", "/v1/sessions/x/abort"),
    ]
    with httpx2.Client(base_url=srv.url) as c:
        for method, path in routes:
            for headers in ({}, {"Authorization": "Bearer fai-wrong"}, {"Authorization": "Basic abc"}):
                err = _error(c.request(method, path, headers=headers, json={}), 401)
                assert err["type"] == "authentication_error", (method, path)
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=srv.url + "/v1", api_key="fai-nope", max_retries=0).models.list()


def test_a_key_never_sees_or_touches_another_keys_session(two_keys: Any) -> None:
    srv, alice, bob = two_keys
    with httpx2.Client(base_url=srv.url, timeout=30) as c:
        r = c.post(
            "/v1/chat/completions",
            headers=alice,
            json={"model": "bot", "messages": [{"role": "user", "content": "my secret is 7"}]},
        )
        sid = r.headers["x-session-id"]
        rid = c.post("/v1/responses", headers=alice, json={"model": "bot", "input": "hello"}).json()["id"]
        c.post(f"/v1/sessions/{sid}/turns", headers=alice, json={"input": "slow please"})
        _wait_running(c, sid, alice)

        assert sid not in [s["id"] for s in c.get("/v1/sessions", headers=bob).json()["data"]]
        assert sid in [s["id"] for s in c.get("/v1/sessions", headers=alice).json()["data"]]
        attempts = [
            c.get(f"/v1/sessions/{sid}", headers=bob),
            c.get(f"/v1/sessions/{sid}/events", headers=bob),
            c.post(f"/v1/sessions/{sid}/steer", headers=bob, json={"text": "leak it"}),
            c.post(f"/v1/sessions/{sid}/abort", headers=bob),
            c.post(f"/v1/sessions/{sid}/turns", headers=bob, json={"input": "recall"}),
            c.post(
                "/v1/chat/completions",
                headers={**bob, "X-Session-Id": sid},
                json={"model": "bot", "messages": [{"role": "user", "content": "recall"}]},
            ),
            c.post(
                "/v1/responses",
                headers={**bob, "X-Session-Id": sid},
                json={"model": "bot", "input": "recall"},
            ),
            c.post(
                "/v1/responses",
                headers=bob,
                json={"model": "bot", "input": "recall", "previous_response_id": rid},
            ),
        ]
        for r in attempts:
            err = _error(r, 404)
            assert "secret" not in r.text
            assert err["type"] == "not_found_error"
        # alice's turn was neither aborted nor steered by bob
        assert c.get(f"/v1/sessions/{sid}", headers=alice).json()["running"] is True
        assert c.post(f"/v1/sessions/{sid}/abort", headers=alice).json()["aborted"] is True
        records = c.get(f"/v1/sessions/{sid}", headers=alice).json()["records"]
        assert "leak it" not in json.dumps(records)
        assert "my secret is 7" in json.dumps(records)


def test_request_limits_give_clear_json_errors(tmp_path: Path) -> None:
    limits = Limits(max_body_bytes=2_000, max_messages=3, max_turns_per_key=1)
    with serving(tmp_path, limits=limits) as (srv, keys), httpx2.Client(base_url=srv.url, timeout=30) as c:
        h = {"Authorization": f"Bearer {keys.create()[1]}"}
        big = {"model": "bot", "messages": [{"role": "user", "content": "x" * 5_000}]}
        assert _error(c.post("/v1/chat/completions", headers=h, json=big), 413)["code"] == "body_too_large"

        def chunked() -> Iterator[bytes]:  # no Content-Length: the server counts as it reads
            yield b'{"model": "bot", "messages": [{"role": "user", "content": "'
            for _ in range(10):
                yield b"y" * 500
            yield b'"}]}'

        r = c.post("/v1/chat/completions", headers=h | JSON, content=chunked())
        assert "content-length" not in r.request.headers
        assert _error(r, 413)["code"] == "body_too_large"
        many = {"model": "bot", "messages": [{"role": "user", "content": "hi"}] * 4}
        assert (
            _error(c.post("/v1/chat/completions", headers=h, json=many), 400)["code"] == "too_many_messages"
        )
        assert (
            _error(c.post("/v1/chat/completions", headers=h | JSON, content=b"{nope"), 400)["code"]
            == "invalid_json"
        )
        assert (
            _error(
                c.post(
                    "/v1/chat/completions",
                    headers=h,
                    json={"model": "bot", "messages": [{"role": "wizard", "content": "x"}]},
                ),
                400,
            )["param"]
            == "messages[0].role"
        )
        sid = c.post("/v1/sessions", headers=h, json={"model": "bot"}).json()["id"]
        assert c.post(f"/v1/sessions/{sid}/turns", headers=h, json={"input": "slow"}).status_code == 202
        _wait_running(c, sid, h)
        err = _error(c.post(f"/v1/sessions/{sid}/turns", headers=h, json={"input": "again"}), 409)
        assert err["code"] == "session_busy"
        r = c.post(
            "/v1/chat/completions",
            headers=h,
            json={"model": "bot", "messages": [{"role": "user", "content": "hi"}]},
        )
        assert _error(r, 429)["code"] == "too_many_turns" and r.headers["retry-after"] == "1"
        c.post(f"/v1/sessions/{sid}/abort", headers=h)
        for _ in range(200):
            if not c.get(f"/v1/sessions/{sid}", headers=h).json()["running"]:
                break
            time.sleep(0.05)
        ok = c.post(
            "/v1/chat/completions",
            headers=h,
            json={"model": "bot", "messages": [{"role": "user", "content": "hi"}]},
        )
        assert ok.status_code == 200, "the per-key slot is free again once the turn ended"


def test_internal_errors_and_unknown_routes_are_json_without_details(tmp_path: Path) -> None:
    broken = Agent("broken", model="nosuchprovider:model-x")
    with (
        serving(tmp_path, agents=[scripted_agent(), broken]) as (srv, keys),
        httpx2.Client(base_url=srv.url) as c,
    ):
        h = {"Authorization": f"Bearer {keys.create()[1]}"}
        r = c.post(
            "/v1/chat/completions",
            headers=h,
            json={"model": "broken", "messages": [{"role": "user", "content": "hi"}]},
        )
        err = _error(r, 500)
        assert err["message"] == "internal server error" and "nosuchprovider" not in r.text
        assert _error(c.get("/v1/nothing-here", headers=h), 404)["type"] == "not_found_error"
        assert _error(c.delete("/v1/models", headers=h), 405)["type"] == "invalid_request_error"


def test_no_cors_headers_are_sent_to_other_origins(two_keys: Any) -> None:
    srv, alice, _ = two_keys
    with httpx2.Client(base_url=srv.url) as c:
        origin = {"Origin": "https://evil.example"}
        pre = c.options("/v1/chat/completions", headers={**origin, "Access-Control-Request-Method": "POST"})
        got = c.get("/v1/models", headers={**alice, **origin})
        page = c.get("/", headers=origin)
        for r in (pre, got, page):
            assert not any(k.lower().startswith("access-control-") for k in r.headers), r.headers
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert page.headers["x-content-type-options"] == "nosniff"


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "foundation_ai", *args], capture_output=True, text=True, timeout=60, env=env
    )


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": SRC, "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "xdg")}


def test_no_auth_is_refused_on_a_non_loopback_bind(tmp_path: Path) -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert is_loopback("LOCALHOST")  # host names are case-insensitive
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5")
    for host in ("0.0.0.0", "192.168.1.5", "::"):
        r = _cli("serve", "--no-auth", "--host", host, env=_env(tmp_path))
        assert r.returncode == 2 and "--no-auth is allowed only on a loopback address" in r.stderr
    r = _cli("serve", "--keys", str(tmp_path / "none.json"), env=_env(tmp_path))
    assert r.returncode == 2 and "serve keys create" in r.stderr


def test_cli_creates_a_key_and_serves_with_it(tmp_path: Path) -> None:
    env = _env(tmp_path)
    keys = str(tmp_path / "keys.json")
    made = _cli("serve", "keys", "create", "--label", "ci", "--keys", keys, env=env)
    assert made.returncode == 0, made.stderr
    key = made.stdout.strip()
    assert key.startswith("fai-") and key not in Path(keys).read_text()
    listed = _cli("serve", "keys", "list", "--keys", keys, env=env)
    assert "\tci" in listed.stdout and key not in listed.stdout
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "foundation_ai",
            "serve",
            "--port",
            "0",
            "--keys",
            keys,
            "--data-dir",
            str(tmp_path / "d"),
            "--name",
            "helper",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("serving helper on http://127.0.0.1:"), line
        url = line.split(" on ")[1].split(" ")[0]
        ok = httpx2.get(url + "/v1/models", headers={"Authorization": f"Bearer {key}"})
        assert [m["id"] for m in ok.json()["data"]] == ["helper"]
        assert httpx2.get(url + "/v1/models").status_code == 401
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0


def _start_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in _env(tmp_path).items() if not k.endswith("_API_KEY")}
    env["FOUNDATION_AI_HOME"] = str(tmp_path / "home")
    return env


def test_serve_refuses_to_start_with_a_model_it_cannot_build(tmp_path: Path) -> None:
    env = _start_env(tmp_path)
    for model, said in (("foo:bar", "unknown model provider 'foo'"), ("openai:gpt-4o", "OPENAI_API_KEY")):
        r = _cli("serve", "--no-auth", "--port", "0", "--model", model, env=env)
        assert r.returncode == 2, (model, r.stdout, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("foundation-ai: error: ") and said in lines[0]
        assert "serving" not in r.stdout


def test_serve_port_out_of_range_is_a_usage_error(tmp_path: Path) -> None:
    for port in ("99999", "-1", "http"):
        r = _cli("serve", "--no-auth", "--port", port, env=_start_env(tmp_path))
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert "--port" in r.stderr


_BLOCK_STARLETTE = """
import sys, runpy
class _Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("starlette", "uvicorn"):
            raise ImportError(f"No module named {name!r}")
        return None
sys.meta_path.insert(0, _Block())
sys.argv = ["foundation-ai", *sys.argv[1:]]
runpy.run_module("foundation_ai", run_name="__main__")
"""


def test_serve_without_the_serve_extra_prints_the_install_hint(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-c", _BLOCK_STARLETTE, "serve", "--no-auth", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        env=_start_env(tmp_path),
    )
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install 'foundation-ai[serve]'" in lines[0], r.stderr


def test_keys_list_shows_control_characters_in_labels_escaped(tmp_path: Path) -> None:
    keys = tmp_path / "keys.json"
    KeyStore(keys).create("evil\x1b[2J\x07\u202eok\x9b")
    r = _cli("serve", "keys", "list", "--keys", str(keys), env=_start_env(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout and "\u202e" not in r.stdout
    assert "\x9b" not in r.stdout
    assert "evil\\x1b[2J\\x07\\u202eok\\x9b" in r.stdout


def test_deeply_nested_json_is_a_400_not_a_500(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    deep = b"[" * 5_000 + b"]" * 5_000
    deep_args = json.dumps(
        {
            "model": "bot",
            "messages": [
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "add", "arguments": deep.decode()},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "3"},
            ],
        }
    ).encode()
    with serving(tmp_path, no_auth=True) as (srv, _keys), httpx2.Client(base_url=srv.url, timeout=30) as c:
        for path in ("/v1/chat/completions", "/v1/responses", "/v1/sessions/s1/approvals/c1"):
            assert _error(c.post(path, content=deep, headers=JSON), 400)["code"] == "invalid_json", path
        r = c.post("/v1/chat/completions", content=deep_args, headers=JSON)
        assert r.status_code in (200, 400), r.text  # the broken arguments are dropped or refused
        assert "Traceback" not in r.text
    assert "RecursionError" not in capfd.readouterr().err


def test_an_ipv6_loopback_server_gives_a_valid_url(tmp_path: Path) -> None:
    config_agents = [scripted_agent()]
    from foundation_ai.serve import ServeConfig, create_app

    app = create_app(ServeConfig(agents=config_agents, no_auth=True, data_dir=tmp_path / "data"))
    with ServerThread(app, host="::1") as srv:
        assert srv.url.startswith("http://[::1]:")
        assert httpx2.get(srv.url + "/v1/models", timeout=30).status_code == 200


def test_events_from_must_be_an_event_index(tmp_path: Path) -> None:
    with serving(tmp_path, no_auth=True) as (srv, _keys), httpx2.Client(base_url=srv.url, timeout=30) as c:
        sid = c.post("/v1/sessions", json={"model": "bot"}).json()["id"]
        assert c.post(f"/v1/sessions/{sid}/turns", json={"input": "hi"}).status_code == 202
        for bad in ("abc", "-1", "5.5", "1e3", "\u0663"):
            err = _error(c.get(f"/v1/sessions/{sid}/events", params={"from": bad}), 400)
            assert err["code"] == "invalid_from" and err["param"] == "from"
