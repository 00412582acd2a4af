"""The sessions API the web chat needs, over real HTTP (uvicorn on 127.0.0.1): rename, delete
and search of sessions, fork (regenerate and edit-and-resend), and image parts in a turn's
input; each only for the key that owns the session, with OpenAI-shaped errors."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests._serve_helpers import serving
from tests._webchat_ui import png, ui_agent


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[httpx2.Client, dict[str, str], dict[str, str]]]:
    """A client, one key's headers and another key's headers."""
    with (
        serving(tmp_path, agents=[ui_agent()]) as (srv, keys),
        httpx2.Client(base_url=srv.url, timeout=30) as c,
    ):
        yield (
            c,
            {"Authorization": f"Bearer {keys.create()[1]}"},
            {"Authorization": f"Bearer {keys.create()[1]}"},
        )


def turn(c: httpx2.Client, h: dict[str, str], sid: str, input: Any) -> list[tuple[str, str]]:
    """Run a turn to its end; its SSE (event, data) pairs."""
    r = c.post(f"/v1/sessions/{sid}/turns", json={"input": input}, headers=h)
    assert r.status_code == 202, r.text
    out = []
    with c.stream("GET", f"/v1/sessions/{sid}/events", headers=h) as s:
        kind = ""
        for line in s.iter_lines():
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: "):
                out.append((kind, line[6:]))
    return out


def new(c: httpx2.Client, h: dict[str, str], prompt: str | None = None) -> str:
    sid = str(c.post("/v1/sessions", json={"model": "bot"}, headers=h).json()["id"])
    if prompt:
        turn(c, h, sid, prompt)
    return sid


def answers(c: httpx2.Client, h: dict[str, str], sid: str) -> list[str]:
    recs = c.get(f"/v1/sessions/{sid}", headers=h).json()["records"]
    return [
        r["message"]["content"].get("content", "")
        for r in recs
        if r["type"] == "conversation" and r["message"]["type"] in ("user", "assistant")
    ]


def test_a_session_is_renamed_and_the_title_is_trimmed_to_one_line(api: Any) -> None:
    c, h, other = api
    sid = new(c, h, "hello")
    r = c.patch(f"/v1/sessions/{sid}", json={"title": "  My\n  plan  "}, headers=h)
    assert r.status_code == 200 and r.json()["title"] == "My plan"
    assert c.get("/v1/sessions", headers=h).json()["data"][0]["title"] == "My plan"
    for bad in ({"title": ""}, {"title": 3}, {}, {"title": "x" * 121}):
        r = c.patch(f"/v1/sessions/{sid}", json=bad, headers=h)
        assert r.status_code == 400 and r.json()["error"]["param"] == "title", bad
    r = c.patch(f"/v1/sessions/{sid}", json={"title": "stolen"}, headers=other)
    assert r.status_code == 404 and r.json()["error"]["code"] == "session_not_found"
    assert c.get(f"/v1/sessions/{sid}", headers=h).json()["title"] == "My plan"


def test_a_deleted_session_leaves_the_list_and_answers_404(api: Any) -> None:
    c, h, other = api
    keep, gone = new(c, h, "keep me"), new(c, h, "delete me")
    assert c.delete(f"/v1/sessions/{gone}", headers=other).status_code == 404, "another key cannot"
    r = c.delete(f"/v1/sessions/{gone}", headers=h)
    assert r.status_code == 200 and r.json() == {"id": gone, "object": "session.deleted", "deleted": True}
    assert [s["id"] for s in c.get("/v1/sessions", headers=h).json()["data"]] == [keep]
    for method, path in (("GET", ""), ("GET", "/events"), ("POST", "/turns"), ("DELETE", "")):
        body = {"input": "x"} if method == "POST" else None
        r = c.request(method, f"/v1/sessions/{gone}{path}", json=body, headers=h)
        assert r.status_code == 404, (method, path, r.text)


def test_a_session_running_a_turn_cannot_be_deleted(api: Any) -> None:
    c, h, _ = api
    sid = new(c, h)
    assert c.post(f"/v1/sessions/{sid}/turns", json={"input": "slow please"}, headers=h).status_code == 202
    r = c.delete(f"/v1/sessions/{sid}", headers=h)
    assert r.status_code == 409 and r.json()["error"]["code"] == "session_busy"
    assert c.post(f"/v1/sessions/{sid}/abort", headers=h).json()["aborted"] is True
    with c.stream("GET", f"/v1/sessions/{sid}/events", headers=h) as s:
        for _ in s.iter_lines():  # to the end of the aborted turn
            pass
    assert c.delete(f"/v1/sessions/{sid}", headers=h).status_code == 200


def test_search_lists_only_the_keys_sessions_whose_title_matches(api: Any) -> None:
    c, h, other = api
    new(c, h, "apples and pears")
    new(c, h, "Bananas only")
    new(c, h, "100% sure_thing")
    new(c, other, "apples of another key")
    titles = lambda q: [s["title"] for s in c.get("/v1/sessions", params={"q": q}, headers=h).json()["data"]]  # noqa: E731
    assert titles("APPLE") == ["apples and pears"]
    assert titles("banana") == ["Bananas only"]
    assert titles("%") == ["100% sure_thing"], "% is matched literally"
    assert titles("u_e") == [], '_ is matched literally (as a wildcard it would match "ure")'
    assert titles("e_t") == ["100% sure_thing"]
    assert titles("nothing") == []
    assert len(titles("")) == 3


def test_fork_copies_the_conversation_before_a_prompt_and_returns_that_prompt(api: Any) -> None:
    c, h, other = api
    sid = new(c, h, "one")
    turn(c, h, sid, "two")
    recs = c.get(f"/v1/sessions/{sid}", headers=h).json()["records"]
    users = [
        r["message"]["id"] for r in recs if r["type"] == "conversation" and r["message"]["type"] == "user"
    ]
    assert c.post(f"/v1/sessions/{sid}/fork", json={"before": users[1]}, headers=other).status_code == 404
    r = c.post(f"/v1/sessions/{sid}/fork", json={"before": users[1]}, headers=h)
    assert r.status_code == 201, r.text
    fork = r.json()
    assert fork["input"] == [{"type": "text", "text": "two"}]
    assert fork["title"] == "one" and fork["id"] != sid
    assert answers(c, h, fork["id"]) == ["one", "Answer #1 to: one"]
    assert answers(c, h, sid) == ["one", "Answer #1 to: one", "two", "Answer #1 to: two"], (
        "the original stays"
    )
    turn(c, h, fork["id"], "two")
    assert answers(c, h, fork["id"])[-1] == "Answer #2 to: two", "regenerated"
    r = c.post(f"/v1/sessions/{sid}/fork", json={"before": users[0], "replace": True}, headers=h)
    assert r.status_code == 201 and answers(c, h, r.json()["id"]) == []
    assert c.get(f"/v1/sessions/{sid}", headers=h).status_code == 404, "replace forgets the original"
    bad = c.post(f"/v1/sessions/{fork['id']}/fork", json={"before": "nope"}, headers=h)
    assert bad.status_code == 404 and bad.json()["error"]["param"] == "before"
    bad = c.post(f"/v1/sessions/{fork['id']}/fork", json={"before": users[0], "replace": "yes"}, headers=h)
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "replace"


def data_url(raw: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(raw).decode()}"


def test_image_parts_reach_the_model_in_both_openai_shapes(api: Any) -> None:
    c, h, _ = api
    raw = png()
    for part in (
        {"type": "image_url", "image_url": {"url": data_url(raw)}},
        {"type": "input_image", "image_url": data_url(raw)},
    ):
        sid = new(c, h)
        events = turn(c, h, sid, [part, {"type": "text", "text": "look"}])
        text = "".join(json.loads(d).get("text", "") for k, d in events if k == "text")
        assert text == f"I see 1 image(s): image/png of {len(raw)} bytes. You said: look"
        recs = c.get(f"/v1/sessions/{sid}", headers=h).json()["records"]
        image = recs[0]["message"]["content"]
        assert image["type"] == "image" and base64.b64decode(image["b64"]) == raw
        assert c.get(f"/v1/sessions/{sid}", headers=h).json()["title"] == "look"


def test_bad_image_parts_are_refused_with_the_part_named(api: Any) -> None:
    c, h, _ = api
    sid = new(c, h)
    for part, needle in (
        ({"type": "image_url", "image_url": {"url": "https://example.com/x.png"}}, "data: URL"),
        ({"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@"}}, "base64"),
        ({"type": "image_url", "image_url": {"url": data_url(b"x", "image/svg")}}, "image type"),
        ({"type": "input_image"}, "data: URL"),
        ({"type": "audio"}, "not supported"),
        ({"type": "text", "text": ""}, "non-empty"),
    ):
        r = c.post(
            f"/v1/sessions/{sid}/turns", json={"input": [{"type": "text", "text": "hi"}, part]}, headers=h
        )
        assert r.status_code == 400, (part, r.text)
        err = r.json()["error"]
        assert needle in err["message"] and err["param"] in ("input[1]", "text"), err
    r = c.post(f"/v1/sessions/{sid}/turns", json={"input": []}, headers=h)
    assert r.status_code == 400 and r.json()["error"]["param"] == "input"
    assert c.get(f"/v1/sessions/{sid}", headers=h).json()["records"] == [], "nothing was run or stored"


@pytest.fixture(params=["sqlite", "postgres"])
def index(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A session index: one process's (SQLite) or the shared one (real PostgreSQL, --db)."""
    if request.param == "sqlite":
        from foundation_ai.serve.index import SessionIndex

        idx: Any = SessionIndex(str(tmp_path / "index.sqlite3"))
        yield idx
        idx.close()
        return
    from foundation_ai.serve.shared_db import SharedDatabase, SharedIndex
    from tests._postgres import fresh_database

    db = SharedDatabase(fresh_database("webchat_index"))
    try:
        yield SharedIndex(db)
    finally:
        db.close()


def test_both_session_indexes_search_titles_literally_and_forget_deleted_sessions(index: Any) -> None:
    for sid, owner, title in (
        ("s1", "alice", "Apples and pears"),
        ("s2", "alice", "100% sure_thing"),
        ("s3", "bob", "apples of bob"),
    ):
        index.add(sid, owner, "bot", title)
        index.add_response("resp-" + sid, sid)
    assert [m["id"] for m in index.list("alice", query="APPLES")] == ["s1"]
    assert [m["id"] for m in index.list("alice", query="0% s")] == ["s2"]
    assert index.list("alice", query="u_e") == [] and index.list("alice", query="%x") == []
    assert {m["id"] for m in index.list("alice")} == {"s1", "s2"}
    index.delete("s1")
    assert index.get("s1") is None and index.session_of_response("resp-s1") is None
    assert [m["id"] for m in index.list("alice")] == ["s2"]
    assert index.get("s3") is not None, "other sessions stay"
