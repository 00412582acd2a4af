"""The sessions API of ``foundation-ai serve``: list, get records, follow a running turn's
``TurnEvent``s as SSE, steer, abort; sessions survive a server restart (same data dir)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx2

from foundation_ai.agentic import TurnEvent
from foundation_ai.types import from_json
from tests._serve_helpers import serving


def _events(c: httpx2.Client, sid: str, h: dict[str, str]) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    with c.stream("GET", f"/v1/sessions/{sid}/events", headers=h) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        kind = ""
        for line in r.iter_lines():
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: "):
                out.append((kind, line[6:]))
    return out


def test_start_a_turn_then_follow_its_events_and_read_the_records(tmp_path: Path) -> None:
    with serving(tmp_path) as (srv, keys), httpx2.Client(base_url=srv.url, timeout=30) as c:
        h = {"Authorization": f"Bearer {keys.create()[1]}"}
        created = c.post("/v1/sessions", headers=h, json={"model": "bot"})
        assert created.status_code == 201
        sid = created.json()["id"]
        assert c.post(f"/v1/sessions/{sid}/turns", headers=h, json={"input": "please add"}).status_code == 202
        events = _events(c, sid, h)
        kinds = [k for k, _ in events]
        assert kinds[-1] == "end"
        assert {"text", "tool_call", "tool_result", "done"} <= set(kinds), (
            "event names are the TurnEvent types"
        )
        typed = [from_json(d, TurnEvent) for k, d in events if k != "end"]
        assert [type(e) for e in typed if not isinstance(e, TurnEvent.Text | TurnEvent.Progress)] == [
            TurnEvent.ToolCall,
            TurnEvent.ToolResult,
            TurnEvent.Done,
        ]
        assert typed[-1].summary.usage.total_tokens > 0  # type: ignore[attr-defined]
        # a late follower replays from any index
        again = _events(c, sid, h)
        assert again == events
        body = c.get(f"/v1/sessions/{sid}", headers=h).json()
        assert body["title"] == "please add" and body["running"] is False
        assert [r["type"] for r in body["records"]].count("summary") == 1
        listed = c.get("/v1/sessions", headers=h).json()["data"]
        assert [s["id"] for s in listed] == [sid]


def test_steer_and_abort_a_running_turn(tmp_path: Path) -> None:
    with serving(tmp_path) as (srv, keys), httpx2.Client(base_url=srv.url, timeout=30) as c:
        h = {"Authorization": f"Bearer {keys.create()[1]}"}
        sid = c.post("/v1/sessions", headers=h, json={"model": "bot"}).json()["id"]
        c.post(f"/v1/sessions/{sid}/turns", headers=h, json={"input": "slow story"})
        got: list[tuple[str, Any]] = []
        follower = threading.Thread(target=lambda: got.extend(_events(c, sid, h)))
        follower.start()
        for _ in range(200):
            if c.get(f"/v1/sessions/{sid}", headers=h).json()["running"]:
                break
            time.sleep(0.05)
        # steering interrupts the slow generation and the turn continues with the steer text
        assert (
            c.post(f"/v1/sessions/{sid}/steer", headers=h, json={"text": "recall instead"}).json()["steered"]
            is True
        )
        follower.join(timeout=30)
        assert not follower.is_alive()
        texts = "".join(json.loads(d)["text"] for k, d in got if k == "text")
        assert "I remember:" in texts and "recall instead" in texts and "never ends" not in texts
        # abort
        c.post(f"/v1/sessions/{sid}/turns", headers=h, json={"input": "slow again"})
        for _ in range(200):
            if c.get(f"/v1/sessions/{sid}", headers=h).json()["running"]:
                break
            time.sleep(0.05)
        assert c.post(f"/v1/sessions/{sid}/abort", headers=h).json()["aborted"] is True
        done = [json.loads(d) for k, d in _events(c, sid, h) if k == "done"]
        assert done and done[0]["summary"]["outcome"] == "aborted"
        assert c.post(f"/v1/sessions/{sid}/abort", headers=h).json()["aborted"] is False


def test_sessions_survive_a_server_restart(tmp_path: Path) -> None:
    keys_path = tmp_path / "keys.json"
    with serving(tmp_path) as (srv, keys), httpx2.Client(base_url=srv.url, timeout=30) as c:
        key = keys.create()[1]
        h = {"Authorization": f"Bearer {key}"}
        r = c.post(
            "/v1/chat/completions",
            headers=h,
            json={"model": "bot", "messages": [{"role": "user", "content": "remember 1234"}]},
        )
        sid = r.headers["x-session-id"]
    assert keys_path.exists()
    with serving(tmp_path) as (srv, _), httpx2.Client(base_url=srv.url, timeout=30) as c:
        assert [s["id"] for s in c.get("/v1/sessions", headers=h).json()["data"]] == [sid]
        r = c.post(
            "/v1/chat/completions",
            headers={**h, "X-Session-Id": sid},
            json={"model": "bot", "messages": [{"role": "user", "content": "recall"}]},
        )
        assert "remember 1234" in r.json()["choices"][0]["message"]["content"]
        r = c.get(f"/v1/sessions/{sid}/events", headers=h)
        assert r.status_code == 200, "the turn just run through the chat endpoint can be replayed"
        fresh = c.post("/v1/sessions", headers=h, json={"model": "bot"}).json()["id"]
        assert c.get(f"/v1/sessions/{fresh}/events", headers=h).json()["error"]["code"] == "no_turn"
