"""Approving and denying tool calls through ``foundation-ai serve``: an agent whose tool
``requires_approval`` pauses the turn; the sessions API lists the pending calls and takes the
decisions; the continued turn is followable, a waiting Chat or Responses stream goes on with
it; keys are isolated; errors are OpenAI-shaped; the pause survives a restart."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from foundation_ai.agentic import ScriptedModel, call, say
from foundation_ai.errors import ConfigurationError
from foundation_ai.serve import Agent, load_agents
from foundation_ai.types import ModelInteraction, ToolResultMessage
from tests._serve_helpers import TOOL_RUNS, add, reply, serving


def approval_reply(inter: ModelInteraction) -> Any:
    """The helpers' scripted agent, plus: a denied call's error is quoted; "add twice" asks two."""
    last = inter.messages[-1]
    if isinstance(last, ToolResultMessage) and last.error_detail:
        return say(f"I could not add: {last.error_detail}")
    first = next((m.text() or "" for m in inter.messages if not isinstance(m, ToolResultMessage)), "")
    results = sum(isinstance(m, ToolResultMessage) for m in inter.messages)
    if "add in two steps" in first and results == 1:
        return [say("Once more."), call("add", {"a": 42, "b": 1})]
    if not isinstance(last, ToolResultMessage) and "add twice" in (last.text() or ""):
        return [say("Two sums."), call("add", {"a": 1, "b": 2}), call("add", {"a": 3, "b": 4})]
    return reply(inter)


def gated_agent(name: str = "bot") -> Agent:
    model = ScriptedModel([approval_reply] * 10_000, chunk_mode="delta")
    return Agent(name, model=model, tools=[add], requires_approval=["add"])


@pytest.fixture
def gated(tmp_path: Path) -> Iterator[tuple[httpx2.Client, dict[str, str]]]:
    """A server with :func:`gated_agent`, a client of it and one key's headers."""
    with (
        serving(tmp_path, agents=[gated_agent()]) as (srv, keys),
        httpx2.Client(base_url=srv.url, timeout=30) as c,
    ):
        yield c, {"Authorization": f"Bearer {keys.create()[1]}"}


def events(c: httpx2.Client, sid: str, h: dict[str, str], start: int = 0) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    with c.stream("GET", f"/v1/sessions/{sid}/events?from={start}", headers=h) as r:
        assert r.status_code == 200
        kind = ""
        for line in r.iter_lines():
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: "):
                out.append((kind, json.loads(line[6:])))
    return out


def paused_session(c: httpx2.Client, h: dict[str, str], prompt: str = "please add") -> tuple[str, list[Any]]:
    sid = c.post("/v1/sessions", headers=h, json={"model": "bot"}).json()["id"]
    assert c.post(f"/v1/sessions/{sid}/turns", headers=h, json={"input": prompt}).status_code == 202
    return sid, events(c, sid, h)


def test_a_call_needing_approval_pauses_the_turn_and_approving_continues_it(
    gated: tuple[httpx2.Client, dict[str, str]],
) -> None:
    c, h = gated
    runs = len(TOOL_RUNS)
    sid, evs = paused_session(c, h)
    kinds = [k for k, _ in evs]
    assert kinds[-3:] == ["done", "awaiting_approval", "end"]
    assert evs[-3][1]["summary"]["outcome"] == "awaiting_approval"
    asked = evs[-2][1]
    assert asked["session_id"] == sid and asked["next"] == len(evs) - 2
    assert [(x["name"], x["arguments"]) for x in asked["calls"]] == [("add", {"a": 2, "b": 40})]
    call_id = asked["calls"][0]["id"]
    assert "tool_result" not in kinds and len(TOOL_RUNS) == runs, "nothing ran before the decision"
    listed_session = c.get("/v1/sessions", headers=h).json()["data"][0]
    assert listed_session["awaiting_approval"] is True and listed_session["running"] is False
    listed = c.get(f"/v1/sessions/{sid}/approvals", headers=h).json()
    assert listed == {
        "object": "list",
        "session_id": sid,
        "data": [{"id": call_id, "object": "tool_call", "name": "add", "arguments": {"a": 2, "b": 40}}],
    }
    # a new turn cannot start while a call waits
    busy = c.post(f"/v1/sessions/{sid}/turns", headers=h, json={"input": "hello"})
    assert busy.status_code == 409 and busy.json()["error"]["code"] == "approval_pending"
    assert f"POST /v1/sessions/{sid}/approvals/{{call_id}}" in busy.json()["error"]["message"]

    r = c.post(f"/v1/sessions/{sid}/approvals/{call_id}", headers=h, json={"decision": "approve"})
    assert r.status_code == 200
    body = r.json()
    assert body["continued"] is True and body["pending"] == [] and body["events_from"] == asked["next"]
    after = events(c, sid, h, body["events_from"])
    results = [d["result"] for k, d in after if k == "tool_result"]
    assert [(x["tool_call_id"], x["content"]["content"]) for x in results] == [(call_id, "42")]
    text = "".join(d["text"] for k, d in after if k == "text")
    assert "The sum is 42." in text
    assert [d["summary"]["outcome"] for k, d in after if k == "done"] == ["completed"]
    assert TOOL_RUNS[runs:] == [(2, 40)]
    assert c.get(f"/v1/sessions/{sid}/approvals", headers=h).json()["data"] == []
    assert c.get(f"/v1/sessions/{sid}", headers=h).json()["awaiting_approval"] is False
    # the whole turn replays from the start: the pause, then the continuation
    assert [k for k, _ in events(c, sid, h)].count("awaiting_approval") == 1

    again = c.post(f"/v1/sessions/{sid}/approvals/{call_id}", headers=h, json={"decision": "deny"})
    assert again.status_code == 409
    assert again.json()["error"] == {
        "message": f"tool call {call_id!r} is not waiting for a decision (decided already, or it needed none)",
        "type": "invalid_request_error",
        "param": "call_id",
        "code": "tool_call_not_pending",
    }
    missing = c.post(f"/v1/sessions/{sid}/approvals/call_nope", headers=h, json={"decision": "approve"})
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "tool_call_not_found"
    # the session is free again
    assert c.post(f"/v1/sessions/{sid}/turns", headers=h, json={"input": "hello"}).status_code == 202


def test_deny_sends_the_reason_to_the_model_as_the_tool_result(
    gated: tuple[httpx2.Client, dict[str, str]],
) -> None:
    c, h = gated
    runs = len(TOOL_RUNS)
    sid, evs = paused_session(c, h)
    asked = evs[-2][1]
    call_id = asked["calls"][0]["id"]
    r = c.post(
        f"/v1/sessions/{sid}/approvals/{call_id}",
        headers=h,
        json={"decision": "deny", "reason": "no arithmetic today"},
    )
    assert r.json()["continued"] is True and r.json()["decision"] == "deny"
    after = events(c, sid, h, asked["next"])
    result = next(d["result"] for k, d in after if k == "tool_result")
    assert result["tool_call_id"] == call_id and "no arithmetic today" in result["error_detail"]
    assert "I could not add:" in "".join(d["text"] for k, d in after if k == "text")
    assert len(TOOL_RUNS) == runs, "a denied call never runs"
    records = c.get(f"/v1/sessions/{sid}", headers=h).json()["records"]
    stored = [r["message"] for r in records if r["type"] == "conversation"]
    assert any(m["type"] == "tool_result" and "no arithmetic today" in m["error_detail"] for m in stored)


def test_the_turn_continues_only_once_every_pending_call_is_decided(
    gated: tuple[httpx2.Client, dict[str, str]],
) -> None:
    c, h = gated
    sid, evs = paused_session(c, h, "add twice")
    first, second = (x["id"] for x in evs[-2][1]["calls"])
    r = c.post(f"/v1/sessions/{sid}/approvals/{first}", headers=h, json={"decision": "approve"}).json()
    assert r["continued"] is False and r["pending"] == [second]
    assert [x["id"] for x in c.get(f"/v1/sessions/{sid}/approvals", headers=h).json()["data"]] == [second]
    dup = c.post(f"/v1/sessions/{sid}/approvals/{first}", headers=h, json={"decision": "deny"})
    assert dup.status_code == 409, "a decided call cannot be decided again"
    r = c.post(f"/v1/sessions/{sid}/approvals/{second}", headers=h, json={"decision": "deny"}).json()
    assert r["continued"] is True
    after = events(c, sid, h, r["events_from"])
    results = {d["result"]["tool_call_id"]: d["result"] for k, d in after if k == "tool_result"}
    assert results[first]["content"]["content"] == "3"
    assert results[second]["error_detail"] and "denied" in results[second]["error_detail"]


def test_a_continued_turn_can_pause_again_and_a_waiting_stream_follows_both_pauses(tmp_path: Path) -> None:
    with (
        serving(tmp_path, agents=[gated_agent()]) as (srv, keys),
        httpx2.Client(base_url=srv.url, timeout=30) as c,
    ):
        h = {"Authorization": f"Bearer {keys.create()[1]}"}
        decisions: list[Any] = []

        def approve(sid: str, calls: list[Any]) -> None:
            with httpx2.Client(base_url=srv.url, timeout=30) as other:
                url = f"/v1/sessions/{sid}/approvals/{calls[0]['id']}"
                decisions.append(other.post(url, headers=h, json={"decision": "approve"}).json())

        content, extra, sid = _chat_stream(c, h, approve, "please add in two steps")
        assert [e["type"] for e in extra].count("awaiting_approval") == 2
        assert [d["continued"] for d in decisions] == [True, True]
        assert decisions[1]["events_from"] > decisions[0]["events_from"]
        assert content.endswith("The sum is 43.")
        evs = events(c, sid, h)
        assert [k for k, _ in evs].count("awaiting_approval") == 2
        assert [d["summary"]["outcome"] for k, d in evs if k == "done"] == [
            "awaiting_approval",
            "awaiting_approval",
            "completed",
        ]


def test_another_key_can_neither_see_nor_decide_the_pending_calls(tmp_path: Path) -> None:
    with (
        serving(tmp_path, agents=[gated_agent()]) as (srv, keys),
        httpx2.Client(base_url=srv.url, timeout=30) as c,
    ):
        h = {"Authorization": f"Bearer {keys.create('a')[1]}"}
        other = {"Authorization": f"Bearer {keys.create('b')[1]}"}
        sid, evs = paused_session(c, h)
        call_id = evs[-2][1]["calls"][0]["id"]
        for method, path, body in (
            ("GET", f"/v1/sessions/{sid}/approvals", None),
            ("POST", f"/v1/sessions/{sid}/approvals/{call_id}", {"decision": "approve"}),
            ("POST", f"/v1/sessions/{sid}/approvals/{call_id}", {"decision": "deny", "reason": "mine"}),
        ):
            r = c.request(method, path, headers=other, json=body)
            assert r.status_code == 404, (method, path)
            assert r.json()["error"]["code"] == "session_not_found"
        for method, path in (
            ("GET", f"/v1/sessions/{sid}/approvals"),
            ("POST", f"/v1/sessions/{sid}/approvals/{call_id}"),
        ):
            for bad in ({}, {"Authorization": "Bearer fai-wrong"}, {"Authorization": "Basic abc"}):
                r = c.request(method, path, headers=bad, json={"decision": "approve"})
                assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
        assert [x["id"] for x in c.get(f"/v1/sessions/{sid}/approvals", headers=h).json()["data"]] == [
            call_id
        ]


def test_a_bad_decision_is_a_400_and_decides_nothing(gated: tuple[httpx2.Client, dict[str, str]]) -> None:
    c, h = gated
    sid, evs = paused_session(c, h)
    call_id = evs[-2][1]["calls"][0]["id"]
    url = f"/v1/sessions/{sid}/approvals/{call_id}"
    for body, param in (
        ({"decision": "yes"}, "decision"),
        ({}, "decision"),
        ({"decision": "deny", "reason": 7}, "reason"),
        ({"decision": "deny", "reason": "   "}, "reason"),
    ):
        r = c.post(url, headers=h, json=body)
        assert r.status_code == 400 and r.json()["error"]["param"] == param, body
    assert (
        c.post(url, headers=h | {"Content-Type": "application/json"}, content=b"not json").json()["error"][
            "code"
        ]
        == "invalid_json"
    )
    assert [x["id"] for x in c.get(f"/v1/sessions/{sid}/approvals", headers=h).json()["data"]] == [call_id]


def _chat_stream(
    c: httpx2.Client, h: dict[str, str], approve: Any, prompt: str = "please add"
) -> tuple[str, list[dict[str, Any]], str]:
    content, extra, sid = "", [], ""
    body = {"model": "bot", "stream": True, "messages": [{"role": "user", "content": prompt}]}
    with c.stream("POST", "/v1/chat/completions", headers=h, json=body) as r:
        sid = r.headers["x-session-id"]
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            for ch in chunk["choices"]:
                delta = ch["delta"]
                content += delta.get("content") or ""
                ev = delta.get("foundation_ai_event")
                if ev is not None:
                    extra.append(ev)
                    if ev["type"] == "awaiting_approval":
                        approve(sid, ev["calls"])
    return content, extra, sid


def test_a_waiting_chat_completions_stream_goes_on_after_the_approval(tmp_path: Path) -> None:
    with (
        serving(tmp_path, agents=[gated_agent()]) as (srv, keys),
        httpx2.Client(base_url=srv.url, timeout=30) as c,
    ):
        h = {"Authorization": f"Bearer {keys.create()[1]}"}
        decided: list[Any] = []

        def approve(sid: str, calls: list[Any]) -> None:
            # another client (the operator) approves while the stream waits
            def go() -> None:
                with httpx2.Client(base_url=srv.url, timeout=30) as other:
                    url = f"/v1/sessions/{sid}/approvals/{calls[0]['id']}"
                    decided.append(other.post(url, headers=h, json={"decision": "approve"}).json())

            t = threading.Thread(target=go)
            t.start()
            t.join()

        content, extra, sid = _chat_stream(c, h, approve)
        assert decided and decided[0]["continued"] is True
        kinds = [e["type"] for e in extra]
        assert kinds == ["tool_call", "awaiting_approval", "tool_result"]
        assert extra[1]["calls"][0]["name"] == "add" and extra[1]["session_id"] == sid
        assert content.startswith("Let me add.") and content.endswith("The sum is 42.")


def test_a_chat_request_without_stream_returns_at_the_pause(
    gated: tuple[httpx2.Client, dict[str, str]],
) -> None:
    c, h = gated
    body = {"model": "bot", "messages": [{"role": "user", "content": "please add"}]}
    r = c.post("/v1/chat/completions", headers=h, json=body).json()
    meta = r["foundation_ai"]
    assert meta["outcome"] == "awaiting_approval"
    assert [x["name"] for x in meta["pending_approvals"]] == ["add"]
    assert r["choices"][0]["message"]["content"] == "Let me add."
    sid, call_id = meta["session_id"], meta["pending_approvals"][0]["id"]
    c.post(f"/v1/sessions/{sid}/approvals/{call_id}", headers=h, json={"decision": "approve"})
    # the session continues through the Chat API once the turn is over
    follow = "".join(d.get("text", "") for k, d in events(c, sid, h) if k == "text")
    assert "The sum is 42." in follow


def test_a_responses_request_without_stream_returns_incomplete_at_the_pause(
    gated: tuple[httpx2.Client, dict[str, str]],
) -> None:
    c, h = gated
    r = c.post("/v1/responses", headers=h, json={"model": "bot", "input": "please add"})
    body = r.json()
    assert body["status"] == "incomplete"
    assert body["incomplete_details"] == {"reason": "awaiting_approval"}
    sid = r.headers["x-session-id"]
    assert [x["name"] for x in c.get(f"/v1/sessions/{sid}/approvals", headers=h).json()["data"]] == ["add"]


def test_a_waiting_responses_stream_goes_on_after_the_denial(tmp_path: Path) -> None:
    with (
        serving(tmp_path, agents=[gated_agent()]) as (srv, keys),
        httpx2.Client(base_url=srv.url, timeout=30) as c,
    ):
        h = {"Authorization": f"Bearer {keys.create()[1]}"}
        seen: list[str] = []
        seqs: list[int] = []
        text = ""
        final: dict[str, Any] = {}
        with c.stream(
            "POST", "/v1/responses", headers=h, json={"model": "bot", "input": "please add", "stream": True}
        ) as r:
            sid = r.headers["x-session-id"]
            for line in r.iter_lines():
                if not line.startswith("data: "):
                    continue
                ev = json.loads(line[6:])
                seen.append(ev["type"])
                seqs.append(ev["sequence_number"])
                if ev["type"] == "response.output_text.delta":
                    text += ev["delta"]
                elif ev["type"] == "foundation_ai.awaiting_approval":
                    with httpx2.Client(base_url=srv.url, timeout=30) as other:
                        url = f"/v1/sessions/{sid}/approvals/{ev['calls'][0]['id']}"
                        other.post(url, headers=h, json={"decision": "deny", "reason": "not now"})
                elif ev["type"] == "response.completed":
                    final = ev["response"]
        assert seen.index("foundation_ai.awaiting_approval") < seen.index("foundation_ai.tool_result")
        assert seen[-1] == "response.completed" and final["status"] == "completed"
        assert "I could not add:" in text and "not now" in text
        assert seqs == list(range(len(seen))), "one sequence across the pause"


def test_a_pause_survives_a_server_restart(tmp_path: Path) -> None:
    agents = [gated_agent()]
    with serving(tmp_path, agents=agents) as (srv, keys), httpx2.Client(base_url=srv.url, timeout=30) as c:
        key = keys.create()[1]
        h = {"Authorization": f"Bearer {key}"}
        sid, evs = paused_session(c, h)
        call_id = evs[-2][1]["calls"][0]["id"]
    with (
        serving(tmp_path, agents=[gated_agent()]) as (srv, _),
        httpx2.Client(base_url=srv.url, timeout=30) as c,
    ):
        assert c.get("/v1/sessions", headers=h).json()["data"][0]["awaiting_approval"] is True
        assert [x["id"] for x in c.get(f"/v1/sessions/{sid}/approvals", headers=h).json()["data"]] == [
            call_id
        ]
        r = c.post(f"/v1/sessions/{sid}/approvals/{call_id}", headers=h, json={"decision": "approve"}).json()
        assert r["continued"] is True and r["events_from"] == 0
        after = events(c, sid, h)
        assert "The sum is 42." in "".join(d["text"] for k, d in after if k == "text")
        assert after[-2][0] == "done" and after[-2][1]["summary"]["outcome"] == "completed"


def shell_reply(inter: ModelInteraction) -> Any:
    last = inter.messages[-1]
    if isinstance(last, ToolResultMessage):
        return say(f"Ran it: {last.error_detail or last.text()}")
    return call("run_command", {"command": "echo from-the-model > marker.txt"})


def _shell_agent(tmp_path: Path, rule: str) -> Agent:
    f = tmp_path / "agents.toml"
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    f.write_text(f'[agents.bot]\ntools = ["shell"]\nroot = "{work}"\n{rule}', encoding="utf-8")
    (agent,) = load_agents(f)
    agent.model = ScriptedModel([shell_reply] * 100, chunk_mode="delta")
    return agent


def test_the_shell_tool_set_of_an_agents_file_waits_for_approval_by_default(tmp_path: Path) -> None:
    agent = _shell_agent(tmp_path, "")
    marker = tmp_path / "work" / "marker.txt"
    with serving(tmp_path, agents=[agent]) as (srv, keys), httpx2.Client(base_url=srv.url, timeout=30) as c:
        h = {"Authorization": f"Bearer {keys.create()[1]}"}
        sid, evs = paused_session(c, h, "tidy up")
        asked = evs[-2][1]
        assert asked["calls"][0]["arguments"] == {"command": "echo from-the-model > marker.txt"}
        assert not marker.exists(), "the command did not run before the approval"
        c.post(
            f"/v1/sessions/{sid}/approvals/{asked['calls'][0]['id']}", headers=h, json={"decision": "approve"}
        )
        after = events(c, sid, h, asked["next"])
        assert after[-2][1]["summary"]["outcome"] == "completed"
        assert marker.read_text(encoding="utf-8").strip() == "from-the-model"


def test_requires_approval_false_lets_every_tool_run_unasked(tmp_path: Path) -> None:
    agent = _shell_agent(tmp_path, "requires_approval = false\n")
    with serving(tmp_path, agents=[agent]) as (srv, keys), httpx2.Client(base_url=srv.url, timeout=30) as c:
        h = {"Authorization": f"Bearer {keys.create()[1]}"}
        _, evs = paused_session(c, h, "tidy up")
        assert "awaiting_approval" not in [k for k, _ in evs]
        assert evs[-2][1]["summary"]["outcome"] == "completed"
        assert (tmp_path / "work" / "marker.txt").exists()


def test_requires_approval_names_the_agents_tools(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="unknown tools"):
        Agent("x", tools=[add], requires_approval=["ad"])
    with pytest.raises(ConfigurationError, match="requires_approval"):
        Agent("x", tools=[add], requires_approval="add")  # type: ignore[arg-type]
    assert Agent("x", tools=[add]).can_use_tool() is None, "no hook: the library default"
    from foundation_ai.agentic.toolsets.approval import Allow, Ask, ToolContext
    from foundation_ai.types import ToolCall

    def asks(rule: Any, name: str, marked: bool) -> bool:
        hook = Agent("x", tools=[add], requires_approval=rule).can_use_tool()
        ctx = ToolContext(session_id="s", tool=None, requires_approval=marked, calls=[], state=None)
        decision = hook(ToolCall(id="c", name=name, arguments={}), ctx)
        assert isinstance(decision, Ask | Allow)
        return isinstance(decision, Ask)

    assert asks(True, "add", False) and asks(True, "other", False)
    assert not asks(False, "add", True), "false: not even marked tools ask"
    assert asks(["add"], "add", False) and asks(["add"], "other", True) and not asks(["add"], "other", False)
    f = tmp_path / "agents.toml"
    f.write_text(
        '[agents.ops]\nmodel = "local"\ntools = ["files"]\nroot = "."\nrequires_approval = ["write_file"]\n'
        '[agents.all]\nmodel = "local"\ntools = ["files"]\nroot = "."\nrequires_approval = true\n',
        encoding="utf-8",
    )
    ops, every = load_agents(f)
    assert ops.requires_approval == ["write_file"] and every.requires_approval is True
    f.write_text('[agents.ops]\ntools = ["files"]\nrequires_approval = ["rm"]\n', encoding="utf-8")
    with pytest.raises(ConfigurationError, match=r"unknown tools \['rm'\]"):
        load_agents(f)


def test_stopping_the_server_ends_a_stream_waiting_for_approval(tmp_path: Path) -> None:
    from foundation_ai.serve import KeyStore, ServeConfig, ServerThread, create_app

    keys = KeyStore(tmp_path / "keys.json")
    h = {"Authorization": f"Bearer {keys.create()[1]}"}
    app = create_app(ServeConfig(agents=[gated_agent()], keys=keys, data_dir=tmp_path / "data"))
    srv = ServerThread(app).start()
    waiting = threading.Event()
    lines: list[str] = []

    def client() -> None:
        body = {"model": "bot", "stream": True, "messages": [{"role": "user", "content": "please add"}]}
        with (
            httpx2.Client(base_url=srv.url, timeout=60) as c,
            c.stream("POST", "/v1/chat/completions", headers=h, json=body) as r,
        ):
            for line in r.iter_lines():
                lines.append(line)
                if "awaiting_approval" in line:
                    waiting.set()

    t = threading.Thread(target=client)
    t.start()
    assert waiting.wait(30), "the stream reached the pause"
    srv.stop()
    assert not srv.wait(0), "the server thread ended: no stream kept it open"
    t.join(30)
    assert not t.is_alive() and [x for x in lines if x][-1] == "data: [DONE]", "ended, not cut"


def test_an_index_file_from_before_approvals_gains_the_waiting_column(tmp_path: Path) -> None:
    import sqlite3

    from foundation_ai.serve.index import SessionIndex

    path = tmp_path / "serve-index.sqlite3"
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE sessions(session_id TEXT PRIMARY KEY, owner TEXT NOT NULL, agent TEXT NOT NULL,"
        " title TEXT NOT NULL DEFAULT '', created REAL NOT NULL, updated REAL NOT NULL);"
        "INSERT INTO sessions VALUES ('s1', 'k1', 'bot', 'old one', 1.0, 2.0);"
    )
    db.commit()
    db.close()
    index = SessionIndex(str(path))
    try:
        assert index.get("s1") == {
            "id": "s1",
            "owner": "k1",
            "agent": "bot",
            "title": "old one",
            "created": 1.0,
            "updated": 2.0,
            "waiting": 0,
        }
        index.set_waiting("s1", 2)
        index.add("s2", "k1", "bot", "new one")
        assert [(m["id"], m["waiting"]) for m in index.list("k1")] == [("s2", 0), ("s1", 2)]
    finally:
        index.close()


def test_abort_ends_a_turn_waiting_for_approval_without_running_a_tool_or_the_model(
    gated: tuple[httpx2.Client, dict[str, str]],
) -> None:
    c, h = gated
    runs = len(TOOL_RUNS)
    sid, evs = paused_session(c, h, "add twice")
    first, second = (x["id"] for x in evs[-2][1]["calls"])
    approved = c.post(f"/v1/sessions/{sid}/approvals/{first}", headers=h, json={"decision": "approve"})
    assert approved.json()["continued"] is False
    r = c.post(f"/v1/sessions/{sid}/abort", headers=h)
    assert r.status_code == 200
    assert r.json() == {"session_id": sid, "aborted": True, "events_from": evs[-2][1]["next"]}
    after = events(c, sid, h, evs[-2][1]["next"])
    results = {d["result"]["tool_call_id"]: d["result"] for k, d in after if k == "tool_result"}
    assert set(results) == {first, second}
    assert all(x["error_detail"] == "interrupted: aborted" for x in results.values())
    assert TOOL_RUNS[runs:] == [], "no call ran, not even the approved one"
    assert [d["summary"]["outcome"] for k, d in after if k == "done"] == ["aborted"]
    assert not [k for k, _ in after if k == "text"], "the model was not called again"
    assert c.get(f"/v1/sessions/{sid}/approvals", headers=h).json()["data"] == []
    session = c.get(f"/v1/sessions/{sid}", headers=h).json()
    assert session["awaiting_approval"] is False
    stored = [x["message"]["type"] for x in session["records"] if x["type"] == "conversation"]
    assert stored[-2:] == ["tool_result", "tool_result"], "every call has its result stored"
    # nothing waits any more: a second abort aborts nothing, and the session takes a new turn
    assert c.post(f"/v1/sessions/{sid}/abort", headers=h).json()["aborted"] is False
    assert c.post(f"/v1/sessions/{sid}/turns", headers=h, json={"input": "hello"}).status_code == 202


def test_abort_ends_a_pause_left_by_a_previous_server(tmp_path: Path) -> None:
    with (
        serving(tmp_path, agents=[gated_agent()]) as (srv, keys),
        httpx2.Client(base_url=srv.url, timeout=30) as c,
    ):
        h = {"Authorization": f"Bearer {keys.create()[1]}"}
        sid, evs = paused_session(c, h)
        call_id = evs[-2][1]["calls"][0]["id"]
    with (
        serving(tmp_path, agents=[gated_agent()]) as (srv, _),
        httpx2.Client(base_url=srv.url, timeout=30) as c,
    ):
        assert c.post(f"/v1/sessions/{sid}/abort", headers=h).json() == {
            "session_id": sid,
            "aborted": True,
            "events_from": 0,
        }
        after = events(c, sid, h)
        result = next(d["result"] for k, d in after if k == "tool_result")
        assert result["tool_call_id"] == call_id and result["error_detail"] == "interrupted: aborted"
        assert after[-2][0] == "done" and after[-2][1]["summary"]["outcome"] == "aborted"
        assert c.get(f"/v1/sessions/{sid}/approvals", headers=h).json()["data"] == []
