"""Limits and lifetimes of ``foundation-ai serve``, against real sockets: a header read timeout,
a connection cap with a clear refusal, header size and count limits; sessions and finished
turns leave process memory (per-key caps); a revoked key stops working at once in a running
server, its open streams included; malformed fields get 400 in the OpenAI error shape."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest

from foundation_ai.agentic import ScriptedModel
from foundation_ai.serve import Agent, KeyStore, Limits
from tests._serve_helpers import add, reply, serving

SRC = str(Path(__file__).resolve().parents[1] / "src")
TURN = {"model": "bot", "messages": [{"role": "user", "content": "hi"}]}


def _status_of(sock: socket.socket) -> bytes:
    """Everything the server sends on ``sock`` until it closes it."""
    out = b""
    sock.settimeout(20)
    while chunk := sock.recv(65536):
        out += chunk
    return out


def _error_of(raw: bytes) -> dict[str, Any]:
    return json.loads(raw.split(b"\r\n\r\n", 1)[1])["error"]  # type: ignore[no-any-return]


def test_a_connection_whose_headers_never_finish_is_closed_after_the_header_timeout(tmp_path: Path) -> None:
    with serving(tmp_path, no_auth=True, limits=Limits(header_timeout=1.0)) as (srv, _):
        silent = socket.create_connection(("127.0.0.1", srv.port))
        slow = socket.create_connection(("127.0.0.1", srv.port))
        slow.sendall(b"GET /v1/models HTTP/1.1\r\nHost: localhost\r\nX-a: ")
        started = time.monotonic()
        for s in (silent, slow):
            out = _status_of(s)
            assert out.startswith(b"HTTP/1.1 408 "), out[:200]
            assert _error_of(out)["code"] == "header_timeout"
            s.close()
        assert time.monotonic() - started < 15
        # a kept-alive connection gets the timeout again for its next request
        with socket.create_connection(("127.0.0.1", srv.port)) as s:
            s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: localhost\r\n\r\n")
            first = b""
            while b"\r\n\r\n" not in first:
                first += s.recv(65536)
            head, _, rest = first.partition(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            while len(rest) < length:  # the whole first answer: the connection is idle again
                rest += s.recv(65536)
            assert head.startswith(b"HTTP/1.1 200 ")
            s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: loc")
            assert _status_of(s).startswith(b"HTTP/1.1 408 ")


def test_connections_beyond_the_cap_are_refused_with_503_and_real_requests_succeed_after(
    tmp_path: Path,
) -> None:
    limits = Limits(max_connections=20, header_timeout=2.0)
    with serving(tmp_path, no_auth=True, limits=limits) as (srv, _):
        idle = [socket.create_connection(("127.0.0.1", srv.port)) for _ in range(20)]
        # the server has seen them all once the next one is refused: that one gets a clear 503
        refused = socket.create_connection(("127.0.0.1", srv.port))
        out = _status_of(refused)
        assert out.startswith(b"HTTP/1.1 503 "), out[:200]
        assert b"retry-after: 1" in out.lower() and _error_of(out)["code"] == "too_many_connections"
        refused.close()
        # the idle sockets are timed out, and real requests are served again
        for s in idle:
            assert _status_of(s).startswith(b"HTTP/1.1 408 ")
            s.close()
        with httpx2.Client(base_url=srv.url) as c:
            assert c.get("/v1/models").status_code == 200


def _send_until_refused(port: int, head: bytes, body: Any) -> bytes:
    """Send ``head`` then the chunks of ``body`` while the server reads; the server's answer."""
    s = socket.create_connection(("127.0.0.1", port))
    answer: list[bytes] = []
    reader = threading.Thread(target=lambda: answer.append(_status_of(s)))
    reader.start()
    try:
        s.sendall(head)
        for chunk in body:
            s.sendall(chunk)
    except OSError:  # the server closed after answering: expected
        pass
    reader.join(30)
    s.close()
    return answer[0] if answer else b""


def test_a_20_mb_header_line_and_100000_headers_are_refused_with_431(tmp_path: Path) -> None:
    with serving(tmp_path, no_auth=True) as (srv, _):
        head = b"GET /v1/models HTTP/1.1\r\nHost: localhost\r\nX-Big: "
        out = _send_until_refused(srv.port, head, (b"a" * 65536 for _ in range(320)))  # 20 MiB
        assert out.startswith(b"HTTP/1.1 431 "), out[:200]
        assert _error_of(out)["code"] == "headers_too_large"
        many = (b"".join(b"X-%d: 1\r\n" % (i + j) for j in range(1000)) for i in range(0, 100_000, 1000))
        out = _send_until_refused(srv.port, b"GET /v1/models HTTP/1.1\r\nHost: localhost\r\n", many)
        assert out.startswith(b"HTTP/1.1 431 "), out[:200]
        # a request within the limits is still served, body and all
        with httpx2.Client(base_url=srv.url) as c:
            h = {f"X-H{i}": "v" * 100 for i in range(60)}
            assert c.get("/v1/models", headers=h).status_code == 200
            big = {**TURN, "messages": [{"role": "user", "content": "x" * 150_000}]}
            assert c.post("/v1/chat/completions", json=big).status_code == 200


def test_finished_sessions_and_turns_leave_memory_beyond_the_per_key_cap_and_resume_from_the_store(
    tmp_path: Path,
) -> None:
    with serving(tmp_path, no_auth=True, limits=Limits(idle_sessions_per_key=3)) as (srv, _):
        mgr = srv.app.state.serve.manager
        with httpx2.Client(base_url=srv.url) as c:
            sids = [c.post("/v1/chat/completions", json=TURN).headers["x-session-id"] for _ in range(10)]
            assert len(mgr._sessions) <= 3 and len(mgr._turns) <= 3
            assert sids[0] not in mgr._sessions
            # the oldest one is still in the store: it continues with its history
            r = c.post(
                "/v1/chat/completions",
                json={"model": "bot", "messages": [{"role": "user", "content": "recall please"}]},
                headers={"X-Session-Id": sids[0]},
            )
            assert r.json()["choices"][0]["message"]["content"].startswith("I remember: hi | Hello there")
            assert sids[0] in mgr._sessions and len(mgr._sessions) <= 3


def test_running_turns_do_not_push_a_key_s_idle_sessions_out_of_memory(tmp_path: Path) -> None:
    # a new session counts as idle until its turn starts: three fit beside the two idle ones
    limits = Limits(idle_sessions_per_key=3, max_turns_per_key=10)
    with serving(tmp_path, no_auth=True, limits=limits) as (srv, _):
        mgr = srv.app.state.serve.manager
        with httpx2.Client(base_url=srv.url, timeout=30) as c:
            idle = [c.post("/v1/chat/completions", json=TURN).headers["x-session-id"] for _ in range(2)]
            running = []
            for _ in range(3):  # turns that go on for a minute: never idle during the test
                sid = c.post("/v1/sessions", json={"model": "bot"}).json()["id"]
                c.post(f"/v1/sessions/{sid}/turns", json={"input": "slow story"})
                running.append(sid)
            assert all(mgr.running(sid) for sid in running)
            # the cap counts finished sessions only: both idle ones stay, however many run
            assert all(sid in mgr._sessions for sid in idle)
            for sid in running:
                c.post(f"/v1/sessions/{sid}/abort")
            for _ in range(200):
                if not any(mgr.running(sid) for sid in running):
                    break
                time.sleep(0.05)
            # ended, they are idle too: the three most recently used of the five stay
            assert len([s for s in [*idle, *running] if s in mgr._sessions]) == 3


def test_a_paused_turn_stays_in_memory_while_it_waits_for_approval(tmp_path: Path) -> None:
    agent = Agent(
        "bot", model=ScriptedModel([reply] * 100, chunk_mode="delta"), tools=[add], requires_approval=True
    )
    with serving(tmp_path, no_auth=True, agents=[agent], limits=Limits(idle_sessions_per_key=1)) as (srv, _):
        mgr = srv.app.state.serve.manager
        with httpx2.Client(base_url=srv.url) as c:
            paused = c.post(
                "/v1/chat/completions",
                json={"model": "bot", "messages": [{"role": "user", "content": "add"}]},
            )
            sid = paused.headers["x-session-id"]
            assert paused.json()["foundation_ai"]["outcome"] == "awaiting_approval"
            for _ in range(3):
                c.post("/v1/chat/completions", json=TURN)
            assert sid in mgr._turns and mgr._turns[sid].paused


def _keys_cli(*args: str) -> None:
    env = {**os.environ, "PYTHONPATH": SRC}
    subprocess.run(
        [sys.executable, "-m", "foundation_ai", "serve", "keys", *args], check=True, env=env, timeout=60
    )


def test_a_key_revoked_with_the_cli_is_refused_by_a_running_server_and_its_open_stream_ends(
    tmp_path: Path,
) -> None:
    with serving(tmp_path) as (srv, keys):
        kid, key = keys.create("doomed")
        _, other = keys.create("kept")
        c = openai.OpenAI(base_url=srv.url + "/v1", api_key=key, max_retries=0)
        stream = c.chat.completions.create(
            model="bot", messages=[{"role": "user", "content": "slow please"}], stream=True
        )
        it = iter(stream)
        first = [next(it) for _ in range(2)]  # the stream runs (it pauses 60 s after its first text)
        assert "Starting" in (first[1].choices[0].delta.content or "")
        _keys_cli("revoke", kid, "--keys", str(keys.path))  # another process writes the file
        revoked_at = time.monotonic()
        with pytest.raises(openai.APIError, match="revoked"):
            for _ in it:
                pass
        assert time.monotonic() - revoked_at < 1.0 + 0.5  # within a second, plus the CLI's exit
        for _ in range(4):
            with pytest.raises(openai.AuthenticationError):
                c.chat.completions.create(model="bot", messages=[{"role": "user", "content": "hi"}])
        ok = openai.OpenAI(base_url=srv.url + "/v1", api_key=other, max_retries=0)
        assert ok.chat.completions.create(model="bot", messages=[{"role": "user", "content": "hi"}]).choices


def test_a_revoked_keys_session_event_stream_ends(tmp_path: Path) -> None:
    with serving(tmp_path) as (srv, keys):
        kid, key = keys.create("doomed")
        h = {"Authorization": f"Bearer {key}"}
        with httpx2.Client(base_url=srv.url, timeout=30) as c:
            sid = c.post("/v1/sessions", json={"model": "bot"}, headers=h).json()["id"]
            c.post(f"/v1/sessions/{sid}/turns", json={"input": "slow"}, headers=h)
            other = KeyStore(keys.path)  # as another process would
            with c.stream("GET", f"/v1/sessions/{sid}/events", headers=h) as r:
                lines = r.iter_lines()
                assert next(lines).startswith("event: ")
                other.revoke(kid)
                rest = list(lines)
        assert any("key_revoked" in line for line in rest)
        mgr = srv.app.state.serve.manager
        live = mgr.turn_of(sid)
        deadline = time.monotonic() + 20
        while not live.done and time.monotonic() < deadline:  # the revoked key's turn is aborted too
            time.sleep(0.02)
        assert live.done and live.events[-1].summary.outcome.value == "aborted"


def test_events_from_with_5000_digits_is_a_400(tmp_path: Path) -> None:
    with serving(tmp_path, no_auth=True) as (srv, _), httpx2.Client(base_url=srv.url) as c:
        sid = c.post("/v1/chat/completions", json=TURN).headers["x-session-id"]
        r = c.get(f"/v1/sessions/{sid}/events", params={"from": "9" * 5000})
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_from"


@pytest.mark.parametrize(
    ("path", "extra", "param"),
    [
        ("/v1/responses", {"instructions": 42}, "instructions"),
        ("/v1/responses", {"instructions": ["be brief"]}, "instructions"),
        ("/v1/responses", {"max_output_tokens": 2**64}, "max_output_tokens"),
        ("/v1/chat/completions", {"max_tokens": 2**64}, "max_tokens"),
        ("/v1/chat/completions", {"max_completion_tokens": 2**64}, "max_completion_tokens"),
        ("/v1/chat/completions", {"seed": 2**64}, "seed"),
        ("/v1/chat/completions", {"seed": -1}, "seed"),
        ("/v1/responses", {"seed": -1}, "seed"),
        ("/v1/responses", {"text": {}}, "text"),
        ("/v1/responses", {"text": {"format": {"type": "text"}, "nope": 1}}, "text"),
        ("/v1/responses", {"store": "no"}, "store"),
    ],
)
def test_fields_the_docs_say_are_validated_get_400_in_the_openai_error_shape(
    tmp_path: Path, path: str, extra: dict[str, Any], param: str
) -> None:
    body: dict[str, Any] = {"model": "bot", **extra}
    body |= {"input": "hi"} if path == "/v1/responses" else {"messages": TURN["messages"]}
    with serving(tmp_path, no_auth=True) as (srv, _), httpx2.Client(base_url=srv.url) as c:
        r = c.post(path, json=body)
        assert r.status_code == 400, r.text
        err = r.json()["error"]
        assert set(err) == {"message", "type", "param", "code"}
        assert err["type"] == "invalid_request_error" and err["param"] == param
        assert c.get("/v1/sessions").json()["data"] == []  # nothing ran


def test_a_revoked_keys_turn_that_no_stream_follows_is_aborted_within_a_second(tmp_path: Path) -> None:
    with serving(tmp_path) as (srv, keys):
        kid, key = keys.create("doomed")
        h = {"Authorization": f"Bearer {key}"}
        with httpx2.Client(base_url=srv.url, timeout=30) as c:
            sid = c.post("/v1/sessions", json={"model": "bot"}, headers=h).json()["id"]
            assert c.post(f"/v1/sessions/{sid}/turns", json={"input": "slow"}, headers=h).status_code == 202
        live = srv.app.state.serve.manager.turn_of(sid)
        while not live.events:  # it runs (its answer pauses 60 s after its first text)
            time.sleep(0.02)
        _keys_cli("revoke", kid, "--keys", str(keys.path))  # another process writes the file
        revoked = time.monotonic()
        while not live.done and time.monotonic() - revoked < 10:
            time.sleep(0.02)
        assert live.done and live.events[-1].summary.outcome.value == "aborted"
        assert time.monotonic() - revoked < 1.5


def test_a_deleted_session_leaves_the_store_file_and_cannot_be_resumed(tmp_path: Path) -> None:
    with serving(tmp_path, no_auth=True) as (srv, _):
        with httpx2.Client(base_url=srv.url, timeout=30) as c:
            said = {"model": "bot", "messages": [{"role": "user", "content": "recall Vb7Kq9Ts"}]}
            sid = c.post("/v1/chat/completions", json=said).headers["x-session-id"]
            files = list((tmp_path / "data").glob("serve-*.sqlite3*"))  # the store and the index
            assert any(b"Vb7Kq9Ts" in f.read_bytes() for f in files)
            assert c.delete(f"/v1/sessions/{sid}").json()["deleted"] is True
            assert not any(b"Vb7Kq9Ts" in f.read_bytes() for f in files if f.exists())
            again = c.post("/v1/chat/completions", json=said, headers={"X-Session-Id": sid})
            assert again.status_code == 404 and again.json()["error"]["code"] == "session_not_found"
        assert srv.app.state.serve.manager.store.load(sid) == []


def test_a_revoked_keys_turn_waiting_for_approval_is_ended_within_a_second(tmp_path: Path) -> None:
    agent = Agent(
        "bot", model=ScriptedModel([reply] * 100, chunk_mode="delta"), tools=[add], requires_approval=True
    )
    with serving(tmp_path, agents=[agent]) as (srv, keys):
        kid, key = keys.create("doomed")
        h = {"Authorization": f"Bearer {key}"}
        with httpx2.Client(base_url=srv.url, timeout=30) as c:
            paused = c.post(
                "/v1/chat/completions",
                json={"model": "bot", "messages": [{"role": "user", "content": "add"}]},
                headers=h,
            )
        assert paused.json()["foundation_ai"]["outcome"] == "awaiting_approval"
        sid = paused.headers["x-session-id"]
        mgr = srv.app.state.serve.manager
        _keys_cli("revoke", kid, "--keys", str(keys.path))
        revoked = time.monotonic()
        while time.monotonic() - revoked < 10:
            live = mgr.turn_of(sid)
            if live.done and not live.paused:
                break
            time.sleep(0.02)
        assert time.monotonic() - revoked < 1.5
        assert live.events[-1].summary.outcome.value == "aborted"
        assert mgr._sessions[sid].pending_approvals() == []  # nothing waits any more, nothing ran


def test_a_stream_whose_turn_ends_as_its_key_is_revoked_still_ends_with_the_revocation(
    tmp_path: Path,
) -> None:
    """The watcher aborts a revoked key's turns right after it marks its streams: a body that
    then ends at once (its last chunk ready with the revocation) must not end the stream as if
    nothing happened (seen on a loaded CI machine: the client saw a normal end, no error)."""
    import asyncio

    from foundation_ai.serve.http import StreamGuard

    keys = KeyStore(tmp_path / "keys.json")
    kid, _ = keys.create("doomed")

    async def main() -> list[bytes]:
        queue: asyncio.Queue[bytes | None] = asyncio.Queue()

        async def body() -> Any:
            while (chunk := await queue.get()) is not None:
                yield chunk

        def abort(owner: str) -> None:  # as the manager's abort: the turn's last chunk and its end
            assert owner == kid
            queue.put_nowait(b"data: last\n\n")
            queue.put_nowait(None)

        guard = StreamGuard(keys, on_revoked=abort)
        guard.interval = 0.01
        queue.put_nowait(b"data: first\n\n")
        out: list[bytes] = []
        async for chunk in guard.guard(kid, body(), b"data: revoked\n\n"):
            out.append(chunk)
            if len(out) == 1:
                await asyncio.to_thread(keys.revoke, kid)
        return out

    out = asyncio.run(main())
    assert out[0] == b"data: first\n\n" and out[-1] == b"data: revoked\n\n"


def test_a_stream_ends_as_revoked_when_the_turn_watcher_finds_the_revocation_first(tmp_path: Path) -> None:
    """Two watchers look for revoked keys: the stream guard's and the manager's (for turns no
    stream follows). When the manager's finds it first and aborts the turn, the open stream must
    still end with the revocation error, not as a normal (aborted) answer."""
    with serving(tmp_path) as (srv, keys):
        srv.app.state.serve.streams.interval = 3600.0  # only the manager's watcher looks
        srv.app.state.serve.manager.revocation_check = 0.05
        kid, key = keys.create("doomed")
        c = openai.OpenAI(base_url=srv.url + "/v1", api_key=key, max_retries=0)
        stream = c.chat.completions.create(
            model="bot", messages=[{"role": "user", "content": "slow please"}], stream=True
        )
        it = iter(stream)
        assert "Starting" in (next(it).choices[0].delta.content or "") + (
            next(it).choices[0].delta.content or ""
        )
        KeyStore(keys.path).revoke(kid)
        with pytest.raises(openai.APIError, match="revoked"):
            for _ in it:
                pass
