"""``foundation-ai serve --db`` has the protections of the default server: real server
subprocesses sharing one real PostgreSQL (pgserver), a loopback model server (or a real
llama.cpp server), the official ``openai`` SDK.

- a streamed request whose first model call fails gets the HTTP error of the non-streamed one;
- configured secrets are masked in everything served and stored (answers, tool results, the
  event log, the session records, titles), a secret's start at the end of an output too;
- ``store: false`` keeps nothing and its id cannot be continued;
- a revoked key's turn running with no open stream is aborted within a second by the
  processes sharing the key table;
- a deleted session's records leave the store and it cannot be resumed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pgserver")
pytest.importorskip("dbos")
httpx2 = pytest.importorskip("httpx2")
openai = pytest.importorskip("openai")

from ._llama_server import LlamaServerHandle  # noqa: E402
from ._serve_shared import GatedModelServer, _Handler, gate_name, task_of  # noqa: E402
from .test_serve_shared import Cluster, Events, _h  # noqa: E402

SECRET = "sk-test-Zq8xW2pL9vR4tY7uK1mN3bV6cX0"
PHRASE = "correct horse battery staple"
HUGE = "hello " * 3000  # over the 2048-token window of the llama_server fixture


def _rows(url: str, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql, args).fetchall()


def _stored(url: str) -> bytes:
    """Every record, event, title and steering message the serving tables hold."""
    out = b""
    for sql in (
        "SELECT body FROM foundation_ai_records",
        "SELECT body FROM foundation_ai_serve_events",
        "SELECT convert_to(title, 'UTF8') FROM foundation_ai_serve_sessions",
        "SELECT convert_to(coalesce(title, ''), 'UTF8') FROM foundation_ai_sessions",
    ):
        out += b"\n".join(bytes(r[0]) for r in _rows(url, sql))
    return out


def _checkpointed(url: str) -> bytes:
    """Every text DBOS keeps of the turns: workflow inputs and outputs, step records, events,
    messages (whichever of its tables this DBOS version has)."""
    out = b""
    for table, column in (
        ("workflow_status", "inputs"),
        ("workflow_status", "output"),
        ("workflow_input", "inputs"),
        ("workflow_output", "output"),
        ("operation_outputs", "output"),
        ("workflow_events", "value"),
        ("workflow_events_history", "value"),
        ("notifications", "message"),
        ("streams", "value"),
    ):
        exists = _rows(url, "SELECT to_regclass(%s)", (f"dbos.{table}",))[0][0]
        if exists is not None:
            rows = _rows(url, f"SELECT coalesce({column}, '') FROM dbos.{table}")
            out += b"\n".join(_decoded(r[0]) for r in rows)
    return out


def _decoded(value: str) -> bytes:
    """A DBOS value as text: DBOS writes pickles in base64 (our own data here: safe to load)."""
    import base64
    import binascii
    import pickle

    try:
        return repr(pickle.loads(base64.b64decode(value, validate=True))).encode()
    except (binascii.Error, pickle.UnpicklingError, EOFError, ValueError):
        return value.encode()


class _SplitHandler(_Handler):
    """The gated model, and for a task with ``split``: a first answer ending with the first
    half of :data:`SECRET` and a ``wait_gate`` call, then (after the tool result) a second
    answer beginning with the rest of it: one secret over two separate outputs."""

    def _answer(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.loads(raw)
        task, answered = task_of(body)
        if "split" not in task:
            self.rfile = __import__("io").BytesIO(raw)
            return super()._answer()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()

        def send(delta: dict[str, Any], finish: str | None = None) -> None:
            chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "fake",
                     "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}  # fmt: skip
            self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            self.wfile.flush()

        if not answered:
            for piece in ("The key begins ", SECRET[:9], SECRET[9:17]):
                send({"role": "assistant", "content": piece})
            call = {"name": "wait_gate", "arguments": json.dumps({"key": task})}
            send({"tool_calls": [{"index": 0, "id": "call_split", "type": "function", "function": call}]})
            send({}, "tool_calls")
        else:
            for piece in (SECRET[17:25], SECRET[25:], " closes it."):
                send({"role": "assistant", "content": piece})
            send({}, "stop")
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True


class _SplitModelServer(GatedModelServer):
    def __init__(self) -> None:
        super().__init__()
        self.RequestHandlerClass = _SplitHandler


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    from ._postgres import fresh_database

    url = fresh_database("serve_hardening")
    with _SplitModelServer() as model:
        c = Cluster(tmp_path_factory.mktemp("hardening"), url, model)
        c.env["EXAMPLE_PROVIDER_API_KEY"] = SECRET  # masked by default (a provider key)
        c.env["EXAMPLE_PASSWORD"] = PHRASE
        c.alice, c.bob = c.key("alice"), c.key("bob")  # type: ignore[attr-defined]
        try:
            c.start("a")
            c.start("b")
            yield c
        finally:
            c.stop()


class _LlamaAsModel:
    """What ``Cluster`` needs of a model server: a real llama.cpp server's address."""

    def __init__(self, llama: LlamaServerHandle) -> None:
        self.base_url = llama.base_url + "/v1"
        self.gates = Path(".")


def test_a_db_servers_stream_whose_first_model_call_fails_gets_the_http_error_and_the_sdk_raises_it(
    tmp_path: Path, llama_server: LlamaServerHandle
) -> None:
    from ._postgres import fresh_database

    c = Cluster(tmp_path, fresh_database("serve_first_error"), _LlamaAsModel(llama_server))  # type: ignore[arg-type]
    key = c.key("k")
    try:
        url = c.start("a")
        body = {"model": "worker", "messages": [{"role": "user", "content": "task: " + HUGE}]}
        with httpx2.Client(base_url=url, timeout=120, headers=_h(key)) as h:
            plain = h.post("/v1/chat/completions", json=body)
            streamed = h.post("/v1/chat/completions", json=body | {"stream": True})
            rplain = h.post("/v1/responses", json={"model": "worker", "input": "task: " + HUGE})
            rstreamed = h.post(
                "/v1/responses", json={"model": "worker", "input": "task: " + HUGE, "stream": True}
            )
        assert plain.status_code == streamed.status_code == 400, (plain.text, streamed.text[:300])
        assert streamed.headers["content-type"] == "application/json"
        assert plain.json() == streamed.json() and plain.json()["error"]["code"] == "context_length_exceeded"
        assert rplain.status_code == rstreamed.status_code == 400 and rplain.json() == rstreamed.json()
        sdk = openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0, timeout=120)
        with pytest.raises(openai.BadRequestError) as raised:
            sdk.chat.completions.create(
                model="worker", messages=body["messages"], stream=True
            )  # no iteration
        assert raised.value.code == "context_length_exceeded"
        with pytest.raises(openai.BadRequestError) as raised:
            sdk.responses.create(model="worker", input="task: " + HUGE, stream=True)
        assert raised.value.code == "context_length_exceeded"
    finally:
        c.procs[0].terminate()
        c.procs[0].wait(60)


def test_secrets_are_masked_in_everything_a_db_server_serves_and_stores(cluster: Cluster) -> None:
    a, b = cluster.urls
    key = cluster.alice  # type: ignore[attr-defined]
    # the model echoes the task (a word per chunk: the phrase arrives split over four chunks)
    # in its tool call and its answer, and the tool result holds it too
    task = f"task: my key {SECRET} and {PHRASE}"
    # the prompt is masked before the turn is enqueued (DBOS keeps a workflow's inputs), so the
    # model is given the masked task; the model's own secrets are the split test's
    cluster.open_gate("task: my key [REDACTED] and [REDACTED]")
    served: list[str] = []
    body = {"model": "worker", "messages": [{"role": "user", "content": task}]}
    plain = httpx2.post(f"{a}/v1/chat/completions", json=body, headers=_h(key), timeout=60)
    assert plain.status_code == 200, plain.text
    served.append(plain.text)
    answer = plain.json()["choices"][0]["message"]["content"]
    assert answer == "done task: my key [REDACTED] and [REDACTED]", answer
    sid = plain.headers["x-session-id"]
    streamed = httpx2.post(
        f"{b}/v1/chat/completions", json=body | {"stream": True}, headers=_h(key), timeout=60
    )
    served.append(streamed.text)
    pieces = [
        json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
        for line in streamed.text.splitlines()
        if line.startswith("data: {") and '"choices":[{' in line
    ]
    assert "".join(pieces) == answer
    tooled = httpx2.post(
        f"{b}/v1/responses",
        json={"model": "worker", "input": task, "stream": True},
        headers=_h(key),
        timeout=60,
    )
    served.append(tooled.text)
    assert "foundation_ai.tool_result" in tooled.text and "gate task: my key [REDACTED]" in tooled.text
    for url in (a, b):
        served.append(httpx2.get(f"{url}/v1/sessions/{sid}", headers=_h(key)).text)
        served.append(Events(f"{url}/v1/sessions/{sid}/events", key).finish().__repr__())
        served.append(httpx2.get(f"{url}/v1/sessions", headers=_h(key)).text)
    for text in served:
        assert SECRET not in text and "horse" not in text, text[:400]
    stored = _stored(cluster.url)
    assert b"[REDACTED]" in stored
    assert SECRET.encode() not in stored and b"horse" not in stored
    checkpointed = _checkpointed(cluster.url)  # DBOS's own tables: inputs and step records
    assert b"[REDACTED]" in checkpointed and b"gate" in checkpointed  # (the tool's step was read)
    assert SECRET.encode() not in checkpointed and b"horse" not in checkpointed


def test_store_false_on_a_db_server_keeps_nothing_and_cannot_be_continued(cluster: Cluster) -> None:
    a, b = cluster.urls
    key = cluster.bob  # type: ignore[attr-defined]
    task = "task: ephemeral Wq3Lz"
    cluster.open_gate(task)
    sdk = openai.OpenAI(base_url=a + "/v1", api_key=key, max_retries=0, timeout=60)
    r = httpx2.post(
        f"{a}/v1/responses",
        json={"model": "worker", "input": task, "store": False},
        headers=_h(key),
        timeout=60,
    )
    assert r.status_code == 200, r.text
    assert r.json()["store"] is False and "x-session-id" not in r.headers
    assert r.json()["output"][-1]["content"][0]["text"] == f"done {task}"
    streamed = sdk.responses.create(model="worker", input=task, store=False, stream=True)
    done = next(e for e in streamed if e.type == "response.completed")
    assert done.response.store is False and done.response.output_text == f"done {task}"
    for rid in (r.json()["id"], done.response.id):
        for url in (a, b):
            other = openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0, timeout=60)
            with pytest.raises(openai.NotFoundError) as raised:
                other.responses.create(model="worker", input="task: again", previous_response_id=rid)
            assert raised.value.code == "previous_response_not_found"
    assert all(task not in s["title"] for s in httpx2.get(f"{b}/v1/sessions", headers=_h(key)).json()["data"])
    deadline = time.monotonic() + 10
    while (
        b"Wq3Lz" in _stored(cluster.url) + _checkpointed(cluster.url) and time.monotonic() < deadline
    ):  # deleted as the turn ends, in DBOS's tables too (its workflow's inputs and steps)
        time.sleep(0.1)
    assert b"Wq3Lz" not in _stored(cluster.url)
    assert b"Wq3Lz" not in _checkpointed(cluster.url)


def test_a_revoked_keys_turn_with_no_open_stream_is_aborted_within_a_second(cluster: Cluster) -> None:
    a, b = cluster.urls
    r = cluster.cli("serve", "keys", "create", "--db", cluster.url, "--label", "doomed")
    key = r.stdout.strip()
    sid = httpx2.post(f"{a}/v1/sessions", json={"model": "worker"}, headers=_h(key)).json()["id"]
    task = "task: hold revoked"
    cluster.open_gate(task)  # the tool returns at once; the answer stops after its first word
    try:
        assert (
            httpx2.post(f"{a}/v1/sessions/{sid}/turns", json={"input": task}, headers=_h(key)).status_code
            == 202
        )
        # no stream follows the turn: its first text is read from the shared event log
        sql = (
            "SELECT e.body FROM foundation_ai_serve_events e JOIN foundation_ai_serve_turns t USING (turn_id)"
            " WHERE t.session_id = %s ORDER BY e.seq"
        )
        deadline = time.monotonic() + 60
        while not any(b'"done"' in bytes(r[0]) for r in _rows(cluster.url, sql, (sid,))):
            assert time.monotonic() < deadline, "the turn did not start"
            time.sleep(0.05)
        listed = cluster.cli("serve", "keys", "list", "--db", cluster.url)
        kid = next(line.split()[0] for line in listed.stdout.splitlines() if "doomed" in line)
        assert cluster.cli("serve", "keys", "revoke", kid, "--db", cluster.url).returncode == 0
        revoked = time.monotonic()
        while time.monotonic() - revoked < 5:
            done = _rows(
                cluster.url, "SELECT done FROM foundation_ai_serve_turns WHERE session_id = %s", (sid,)
            )
            if done and done[0][0]:
                break
            time.sleep(0.05)
        took = time.monotonic() - revoked
        assert done and done[0][0], "the revoked key's turn still runs"
        assert took < 1.5, took  # the check runs every 0.5 s; the model call stops at once
        last = _rows(
            cluster.url,
            "SELECT e.body FROM foundation_ai_serve_events e JOIN foundation_ai_serve_turns t USING (turn_id)"
            " WHERE t.session_id = %s ORDER BY e.seq DESC LIMIT 1",
            (sid,),
        )
        assert json.loads(bytes(last[0][0]))["summary"]["outcome"] == "aborted"
        assert httpx2.get(f"{b}/v1/sessions", headers=_h(key)).status_code == 401
    finally:
        (cluster.gates / (gate_name(task) + ".text")).touch()


def test_a_deleted_session_leaves_the_shared_store_and_cannot_be_resumed(cluster: Cluster) -> None:
    a, b = cluster.urls
    key = cluster.alice  # type: ignore[attr-defined]
    task = "task: forget Jm4Rt"
    cluster.open_gate(task)
    body = {"model": "worker", "messages": [{"role": "user", "content": task}]}
    r = httpx2.post(f"{a}/v1/chat/completions", json=body, headers=_h(key), timeout=60)
    sid = r.headers["x-session-id"]
    assert b"Jm4Rt" in _stored(cluster.url) and b"Jm4Rt" in _checkpointed(cluster.url)
    gone = httpx2.delete(f"{b}/v1/sessions/{sid}", headers=_h(key))
    assert gone.status_code == 200 and gone.json()["deleted"] is True
    assert b"Jm4Rt" not in _stored(cluster.url)
    assert b"Jm4Rt" not in _checkpointed(cluster.url)  # DBOS's records of its turns are gone too
    assert _rows(cluster.url, "SELECT count(*) FROM foundation_ai_records WHERE session_id = %s", (sid,)) == [
        (0,)
    ]
    for url in (a, b):
        again = httpx2.post(
            f"{url}/v1/chat/completions", json=body, headers={**_h(key), "X-Session-Id": sid}, timeout=60
        )
        assert again.status_code == 404 and again.json()["error"]["code"] == "session_not_found"


def test_a_secret_split_over_two_answers_of_a_db_turn_is_masked_in_each(cluster: Cluster) -> None:
    a, b = cluster.urls
    key = cluster.alice  # type: ignore[attr-defined]
    task = "task: split"
    cluster.open_gate(task)
    r = httpx2.post(
        f"{a}/v1/responses",
        json={"model": "worker", "input": task, "stream": True},
        headers=_h(key),
        timeout=60,
    )
    assert r.status_code == 200, r.text
    assert "The key begins [REDACTED]" in r.text and "[REDACTED] closes it." in r.text, r.text[-2000:]
    sid = r.headers["x-session-id"]
    served = [r.text, httpx2.get(f"{b}/v1/sessions/{sid}", headers=_h(key)).text]
    served.append(repr(Events(f"{b}/v1/sessions/{sid}/events", key).finish()))
    stored = _stored(cluster.url).decode("utf-8", "replace")
    checkpointed = _checkpointed(cluster.url).decode("utf-8", "replace")  # DBOS's step records
    assert "The key begins [REDACTED]" in checkpointed
    for text in (*served, stored, checkpointed):
        assert SECRET[:17] not in text and SECRET[17:] not in text, text[:400]
