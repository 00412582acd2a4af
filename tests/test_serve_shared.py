"""Several ``foundation-ai serve --db postgresql://...`` processes sharing sessions: two real
server subprocesses on two loopback ports, one real PostgreSQL (pgserver), a loopback model
server, and a tool that holds a turn open until the test releases it. A turn started through
one process is listed, followed, steered and aborted through the other; keys and session
owners are the same in both; one key never sees another's sessions in either."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pgserver")
pytest.importorskip("dbos")
httpx2 = pytest.importorskip("httpx2")

from ._cli_helpers import CLI, cli_env  # noqa: E402
from ._serve_shared import GatedModelServer, gate_name  # noqa: E402

ROOT = str(Path(__file__).resolve().parent.parent)
AGENTS = """
[agents.worker]
model = "openai:fake"
tools = ["tests._serve_shared:wait_gate"]
"""


class Cluster:
    def __init__(self, tmp: Path, url: str, model: GatedModelServer) -> None:
        self.tmp, self.url, self.model = tmp, url, model
        self.gates = tmp / "gates"
        self.gates.mkdir()
        model.gates = self.gates
        self.env = cli_env(
            tmp,
            OPENAI_BASE_URL=model.base_url.removesuffix("/v1"),
            FA_GATES=str(self.gates),
            PYTHONPATH=os.pathsep.join([str(Path(ROOT) / "src"), ROOT]),
        )
        self.procs: list[subprocess.Popen[str]] = []
        self.urls: list[str] = []
        self.agents = AGENTS

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*CLI, *args], env=self.env, cwd=ROOT, capture_output=True, text=True, timeout=60
        )

    def key(self, label: str) -> str:
        r = self.cli("serve", "keys", "create", "--db", self.url, "--label", label)
        assert r.returncode == 0, r.stderr
        return r.stdout.strip()

    def start(self, name: str) -> str:
        agents = self.tmp / "agents.toml"
        agents.write_text(self.agents)
        p = subprocess.Popen(
            [*CLI, "serve", "--db", self.url, "--agents", str(agents), "--port", "0", "--executor-id", name,
             "--grace", "1", "--data-dir", str(self.tmp / name)],
            env=self.env, cwd=ROOT, stdout=subprocess.PIPE, stderr=(self.tmp / f"{name}.err").open("w"), text=True,
        )  # fmt: skip
        self.procs.append(p)
        lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [lines.put(x) for x in p.stdout], daemon=True).start()  # type: ignore[union-attr]
        try:
            first = lines.get(timeout=90)
        except queue.Empty:
            p.kill()
            raise AssertionError(f"serve {name} did not start: {self.stderr(name)}") from None
        url = first.split(" on ", 1)[1].split(" ", 1)[0]
        assert url.startswith("http://127.0.0.1:"), first
        self.urls.append(url)
        return url

    def stderr(self, name: str) -> str:
        return (self.tmp / f"{name}.err").read_text()

    def open_gate(self, task: str) -> None:
        (self.gates / gate_name(task)).touch()

    def stop(self) -> list[str]:
        for p in self.procs:
            p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
        return [self.stderr(n) for n in ("a", "b")]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:

    from ._postgres import fresh_database

    url = fresh_database("serve_shared")
    with GatedModelServer() as model:
        c = Cluster(tmp_path_factory.mktemp("shared"), url, model)
        c.alice, c.bob = c.key("alice"), c.key("bob")  # type: ignore[attr-defined]
        try:
            c.start("a")
            c.start("b")
            yield c
        finally:
            errs = c.stop()
            # both processes shut down cleanly (uvicorn reports the streams it cut at shutdown)
            cut = "CancelledError: Task cancelled, timeout graceful shutdown exceeded"
            assert all(e.count("Traceback") == e.count(cut) for e in errs), errs


def _h(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


class Events:
    """``GET /v1/sessions/{id}/events`` read on a thread: ``events`` (``(type, data)``) so far."""

    def __init__(self, url: str, key: str) -> None:
        self.events: list[tuple[str, Any]] = []
        self.status = 0
        self.got = threading.Condition()
        self.thread = threading.Thread(target=self._run, args=(url, key), daemon=True)
        self.thread.start()

    def _run(self, url: str, key: str) -> None:
        kind = ""
        with httpx2.stream("GET", url, headers=_h(key), timeout=60) as r:
            self.status = r.status_code
            for line in r.iter_lines():
                if line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: "):
                    with self.got:
                        self.events.append((kind, json.loads(line[6:])))
                        self.got.notify_all()
        with self.got:
            self.got.notify_all()

    def wait_for(self, kind: str, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self.got:
            while True:
                for k, d in self.events:
                    if k == kind:
                        return d  # type: ignore[no-any-return]
                left = deadline - time.monotonic()
                assert left > 0 and self.thread.is_alive(), f"no {kind} event in {self.events}"
                self.got.wait(left)

    def finish(self) -> list[tuple[str, Any]]:
        self.thread.join(60)
        assert not self.thread.is_alive()
        return self.events


def test_a_turn_started_through_one_process_is_listed_followed_and_steered_through_another(
    cluster: Cluster,
) -> None:
    a, b = cluster.urls
    key = cluster.alice  # type: ignore[attr-defined]
    r = httpx2.post(f"{a}/v1/sessions", json={"model": "worker"}, headers=_h(key))
    assert r.status_code == 201, r.text
    sid = r.json()["id"]
    task = "task: steer me"
    r = httpx2.post(f"{a}/v1/sessions/{sid}/turns", json={"input": task}, headers=_h(key))
    assert r.status_code == 202, r.text

    listed = httpx2.get(f"{b}/v1/sessions", headers=_h(key)).json()["data"]
    assert [(s["id"], s["running"], s["title"]) for s in listed if s["id"] == sid] == [(sid, True, task)]

    ev = Events(f"{b}/v1/sessions/{sid}/events", key)
    call = ev.wait_for("tool_call")  # the turn waits in its tool: steer it through B
    assert call["call"]["name"] == "wait_gate"
    r = httpx2.post(f"{b}/v1/sessions/{sid}/steer", json={"text": "also say hello"}, headers=_h(key))
    assert r.status_code == 200 and r.json()["steered"] is True, r.text
    busy = httpx2.post(f"{b}/v1/sessions/{sid}/turns", json={"input": "task: again"}, headers=_h(key))
    assert busy.status_code == 409 and busy.json()["error"]["code"] == "session_busy"
    cluster.open_gate(task)

    events = ev.finish()
    kinds = [k for k, _ in events]
    assert kinds[0] == "tool_call" and kinds[-2:] == ["done", "end"], kinds
    assert "tool_result" in kinds
    assert "".join(d["text"] for k, d in events if k == "text") == f"done {task}"
    assert events[-2][1]["summary"]["outcome"] == "completed"

    reqs = cluster.model.requests_for(task)
    assert len(reqs) == 2
    after = json.dumps(reqs[1]["messages"])
    assert "also say hello" in after and "also say hello" not in json.dumps(reqs[0]["messages"])

    # the records are the same through either process; the turn no longer runs
    ra = httpx2.get(f"{a}/v1/sessions/{sid}", headers=_h(key)).json()
    rb = httpx2.get(f"{b}/v1/sessions/{sid}", headers=_h(key)).json()
    assert ra["records"] == rb["records"] and ra["running"] is False and rb["running"] is False
    assert any("also say hello" in json.dumps(rec) for rec in rb["records"])
    # a late follower (through A) replays the finished turn
    again = Events(f"{a}/v1/sessions/{sid}/events", key).finish()
    assert [k for k, _ in again] == kinds


def test_a_chat_stream_through_one_process_ends_aborted_when_another_process_aborts_it(
    cluster: Cluster,
) -> None:
    a, b = cluster.urls
    key = cluster.alice  # type: ignore[attr-defined]
    task = "task: abort me"
    chunks: list[dict[str, Any]] = []
    sid_box: list[str] = []
    seen_call = threading.Event()

    def chat() -> None:
        body = {"model": "worker", "stream": True, "messages": [{"role": "user", "content": task}]}
        with httpx2.stream("POST", f"{a}/v1/chat/completions", json=body, headers=_h(key), timeout=60) as r:
            sid_box.append(r.headers["x-session-id"])
            for line in r.iter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    chunks.append(json.loads(line[6:]))
                    if "foundation_ai_event" in chunks[-1]["choices"][0]["delta"]:
                        seen_call.set()
                elif line == "data: [DONE]":
                    chunks.append({"done": True})

    t = threading.Thread(target=chat, daemon=True)
    t.start()
    assert seen_call.wait(60), chunks
    sid = sid_box[0]
    r = httpx2.post(f"{b}/v1/sessions/{sid}/abort", headers=_h(key))
    assert r.status_code == 200 and r.json()["aborted"] is True, r.text
    cluster.open_gate(task)
    t.join(60)
    assert not t.is_alive()
    assert chunks[-1] == {"done": True}
    finals = [c["choices"][0]["finish_reason"] for c in chunks[:-1] if c.get("choices")]
    assert finals[-1] == "stop"
    texts = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks[:-1] if c.get("choices"))
    assert texts == ""  # aborted before the model's next call: no answer
    assert len(cluster.model.requests_for(task)) == 1
    ev = Events(f"{b}/v1/sessions/{sid}/events", key).finish()
    assert ev[-2][0] == "done" and ev[-2][1]["summary"]["outcome"] == "aborted"


def test_an_abort_through_another_process_stops_a_model_call_in_progress(cluster: Cluster) -> None:
    a, b = cluster.urls
    key = cluster.alice  # type: ignore[attr-defined]
    sid = httpx2.post(f"{a}/v1/sessions", json={"model": "worker"}, headers=_h(key)).json()["id"]
    task = "task: hold me"
    cluster.open_gate(task)  # the tool returns at once; the answer's stream stops after a word
    try:
        assert (
            httpx2.post(f"{a}/v1/sessions/{sid}/turns", json={"input": task}, headers=_h(key)).status_code
            == 202
        )
        ev = Events(f"{b}/v1/sessions/{sid}/events", key)
        assert ev.wait_for("text")["text"] == "done"
        r = httpx2.post(f"{b}/v1/sessions/{sid}/abort", headers=_h(key))
        assert r.status_code == 200 and r.json()["aborted"] is True
        events = ev.finish()  # ends while the model still holds the rest of its answer
        assert events[-2][0] == "done" and events[-2][1]["summary"]["outcome"] == "aborted", events
        assert "".join(d["text"] for k, d in events if k == "text") == "done"
    finally:
        (cluster.gates / (gate_name(task) + ".text")).touch()


def test_a_chat_answer_and_a_responses_continuation_work_through_either_process(cluster: Cluster) -> None:
    a, b = cluster.urls
    key = cluster.alice  # type: ignore[attr-defined]
    task = "task: answer me"
    cluster.open_gate(task)
    body = {"model": "worker", "messages": [{"role": "user", "content": task}]}
    r = httpx2.post(f"{a}/v1/chat/completions", json=body, headers=_h(key), timeout=60)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == f"done {task}"
    sid = r.headers["x-session-id"]
    # continued through the other process, streamed: the text arrives as content chunks
    task1 = "task: stream me"
    cluster.open_gate(task1)
    more = {"model": "worker", "stream": True, "messages": [{"role": "user", "content": task1}]}
    with httpx2.stream(
        "POST", f"{b}/v1/chat/completions", json=more, headers={**_h(key), "X-Session-Id": sid}, timeout=60
    ) as rs:
        assert rs.status_code == 200 and rs.headers["x-session-id"] == sid
        lines = [line for line in rs.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    deltas = [json.loads(line[6:])["choices"][0]["delta"] for line in lines[:-1]]
    pieces = [d["content"] for d in deltas if d.get("content")]
    assert len(pieces) > 1 and "".join(pieces) == f"done {task1}"
    assert task in json.dumps(cluster.model.requests_for(task1)[0]["messages"])  # the session's history

    task2 = "task: respond"
    cluster.open_gate(task2)
    r1 = httpx2.post(
        f"{b}/v1/responses", json={"model": "worker", "input": task2}, headers=_h(key), timeout=60
    )
    assert r1.status_code == 200, r1.text
    assert r1.json()["output"][-1]["content"][0]["text"] == f"done {task2}"
    task3 = "task: continue"
    cluster.open_gate(task3)
    body3 = {"model": "worker", "input": task3, "previous_response_id": r1.json()["id"], "stream": True}
    with httpx2.stream("POST", f"{a}/v1/responses", json=body3, headers=_h(key), timeout=60) as r3:
        assert r3.status_code == 200
        kinds = [line[7:] for line in r3.iter_lines() if line.startswith("event: ")]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed", kinds
    assert r3.headers["x-session-id"] == r1.headers["x-session-id"] != sid
    # the continuation saw the first exchange of its session
    assert task2 in json.dumps(cluster.model.requests_for(task3)[0]["messages"])
    # r1 is no longer the latest response of its conversation: continuing from it is refused
    again = {"model": "worker", "input": "task: branch", "previous_response_id": r1.json()["id"]}
    refused = httpx2.post(f"{b}/v1/responses", json=again, headers=_h(key), timeout=60)
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "response_not_latest", (
        refused.text
    )


def test_keys_and_session_owners_are_the_same_in_every_process_and_keys_stay_apart(cluster: Cluster) -> None:
    a, b = cluster.urls
    alice, bob = cluster.alice, cluster.bob  # type: ignore[attr-defined]
    r = httpx2.post(f"{a}/v1/sessions", json={"model": "worker"}, headers=_h(alice))
    sid = r.json()["id"]
    task = "task: private"
    assert (
        httpx2.post(f"{a}/v1/sessions/{sid}/turns", json={"input": task}, headers=_h(alice)).status_code
        == 202
    )
    try:
        for base in (a, b):
            assert httpx2.get(f"{base}/v1/models", headers=_h("fai-" + "x" * 43)).status_code == 401
            listed = httpx2.get(f"{base}/v1/sessions", headers=_h(bob)).json()["data"]
            assert sid not in [s["id"] for s in listed]
            assert sid in [
                s["id"] for s in httpx2.get(f"{base}/v1/sessions", headers=_h(alice)).json()["data"]
            ]
            for method, path, body in (
                ("GET", "", None),
                ("GET", "/events", None),
                ("POST", "/steer", {"text": "hi"}),
                ("POST", "/abort", None),
                ("POST", "/turns", {"input": "task: x"}),
                ("GET", "/approvals", None),
                ("POST", "/approvals/call_1", {"decision": "approve"}),
            ):
                r = httpx2.request(method, f"{base}/v1/sessions/{sid}{path}", json=body, headers=_h(bob))
                assert r.status_code == 404 and r.json()["error"]["code"] == "session_not_found", (
                    path,
                    r.text,
                )
            cont = {"model": "worker", "messages": [{"role": "user", "content": "task: y"}]}
            r = httpx2.post(
                f"{base}/v1/chat/completions", json=cont, headers={**_h(bob), "X-Session-Id": sid}
            )
            assert r.status_code == 404
    finally:
        cluster.open_gate(task)
    ev = Events(f"{b}/v1/sessions/{sid}/events", alice).finish()
    assert ev[-2][0] == "done" and ev[-2][1]["summary"]["outcome"] == "completed"
    # a key revoked through the CLI stops working in both processes
    listing = cluster.cli("serve", "keys", "list", "--db", cluster.url)
    bob_id = next(line.split("\t")[0] for line in listing.stdout.splitlines() if line.endswith("\tbob"))
    assert cluster.cli("serve", "keys", "revoke", bob_id, "--db", cluster.url).returncode == 0
    for base in (a, b):
        assert httpx2.get(f"{base}/v1/sessions", headers=_h(bob)).status_code == 401


def test_serve_refuses_a_non_postgres_db(tmp_path: Path) -> None:
    env = cli_env(tmp_path)
    r = subprocess.run(
        [*CLI, "serve", "--db", f"sqlite:///{tmp_path}/x.db", "--no-auth"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 2 and "postgresql://" in r.stderr, r.stderr


def test_serve_keys_with_db_refuse_a_key_file_too(tmp_path: Path) -> None:
    env = cli_env(tmp_path)
    r = subprocess.run(
        [*CLI, "serve", "--keys", str(tmp_path / "k.json"), "keys", "list", "--db", "postgresql://u@127.0.0.1:1/x"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 2 and "--keys and --db" in r.stderr, r.stderr


def test_an_agents_file_names_tools_by_module_and_a_bad_name_is_a_configuration_error(tmp_path: Path) -> None:
    from foundation_ai.errors import ConfigurationError
    from foundation_ai.serve import load_agents

    good = tmp_path / "good.toml"
    good.write_text('[agents.a]\ntools = ["tests._serve_shared:wait_gate"]\n')
    from ._serve_shared import wait_gate

    assert load_agents(good)[0].tools == [wait_gate]
    bad = tmp_path / "bad.toml"
    bad.write_text('[agents.a]\ntools = ["tests._no_such_module:x"]\n')
    with pytest.raises(ConfigurationError, match="cannot import the tools"):
        load_agents(bad)


def test_a_turn_of_a_process_that_shuts_down_is_resumed_by_another_and_followed_through_it(
    cluster: Cluster,
) -> None:
    # runs last: it stops one of the two processes
    key = cluster.alice  # type: ignore[attr-defined]
    a = cluster.urls[0]
    r = httpx2.post(f"{a}/v1/sessions", json={"model": "worker"}, headers=_h(key))
    sid = r.json()["id"]
    task = "task: survive"
    assert (
        httpx2.post(f"{a}/v1/sessions/{sid}/turns", json={"input": task}, headers=_h(key)).status_code == 202
    )
    pid_file = (cluster.gates / gate_name(task)).with_suffix(".pid")
    ev = Events(f"{a}/v1/sessions/{sid}/events", key)
    ev.wait_for("tool_call")
    deadline = time.monotonic() + 60
    while not pid_file.exists():  # the tool runs a moment after its call is published
        assert time.monotonic() < deadline
        time.sleep(0.05)
    runner = next(i for i, p in enumerate(cluster.procs) if p.pid == int(pid_file.read_text()))
    other = cluster.urls[1 - runner]
    proc = cluster.procs.pop(runner)
    cluster.urls.pop(runner)  # procs and urls stay in step for the tests after this one
    proc.send_signal(signal.SIGTERM)  # grace 1 s, then the turn goes back to the queue
    assert proc.wait(timeout=60) == 0
    cluster.open_gate(task)
    follower = Events(f"{other}/v1/sessions/{sid}/events", key)
    follower.thread.join(60)
    if follower.thread.is_alive():
        import psycopg

        with psycopg.connect(cluster.url) as conn:
            st = conn.execute(
                "SELECT workflow_uuid, status, executor_id, queue_name, recovery_attempts FROM dbos.workflow_status ORDER BY created_at DESC LIMIT 3"
            ).fetchall()
        raise AssertionError(
            f"STATUS {st} EVENTS {follower.events} RUNNER {runner} PID {pid_file.read_text()} "
            f"PIDS {[p.pid for p in cluster.procs]} killed {proc.pid} "
            f"ERR-A {cluster.stderr('a')[-3000:]} ERR-B {cluster.stderr('b')[-3000:]}"
        )
    events = follower.finish()
    assert events[-2][0] == "done" and events[-2][1]["summary"]["outcome"] == "completed", events
    assert "".join(d["text"] for k, d in events if k == "text") == f"done {task}"
    kinds = [k for k, _ in events]
    assert kinds.count("tool_call") == 1 and kinds.count("tool_result") == 1, kinds
    assert "retract" not in kinds, "the resumed run retracts nothing the stopped one finished"
    # the other process resumed from the checkpointed model call: the model was asked twice in all
    assert len(cluster.model.requests_for(task)) == 2
    assert pid_file.read_text() != str(proc.pid)  # the tool ran again in the other process
    rec = httpx2.get(f"{other}/v1/sessions/{sid}", headers=_h(key)).json()["records"]
    results = [
        x for x in rec if x.get("type") == "conversation" and x["message"].get("type") == "tool_result"
    ]
    assert len(results) == 1, rec  # the abandoned run stored nothing
    assert results[0]["message"]["content"]["content"] == f"gate {task} opened"


def test_a_model_call_cut_by_a_hand_back_is_retracted_before_the_other_process_makes_it_again(
    cluster: Cluster,
) -> None:
    # after the test above: one process is left; a third joins so the turn has somewhere to go
    cluster.start("c")
    key = cluster.alice  # type: ignore[attr-defined]
    a = cluster.urls[-1]
    sid = httpx2.post(f"{a}/v1/sessions", json={"model": "worker"}, headers=_h(key)).json()["id"]
    task = "task: hold the answer"
    assert (
        httpx2.post(f"{a}/v1/sessions/{sid}/turns", json={"input": task}, headers=_h(key)).status_code == 202
    )
    cluster.open_gate(task)  # the tool returns at once; the answer's first word comes, then it holds
    ev = Events(f"{a}/v1/sessions/{sid}/events", key)
    first = ev.wait_for("text")
    assert first["text"] == "done"
    runner_pid = int((cluster.gates / gate_name(task)).with_suffix(".pid").read_text())
    runner = next(i for i, p in enumerate(cluster.procs) if p.pid == runner_pid)
    cluster.urls.pop(runner)
    proc = cluster.procs.pop(runner)
    proc.send_signal(signal.SIGTERM)  # grace 1 s, then the turn goes back to the queue mid-answer
    assert proc.wait(timeout=60) == 0
    other = cluster.urls[0]
    follower = Events(f"{other}/v1/sessions/{sid}/events", key)
    deadline = time.monotonic() + 60  # the other process makes the model call again
    while len(cluster.model.requests_for(task)) < 3:
        assert time.monotonic() < deadline, cluster.model.requests_for(task)
        time.sleep(0.05)
    (cluster.gates / (gate_name(task) + ".text")).touch()  # let the answers finish
    events = follower.finish()
    assert events[-2][0] == "done" and events[-2][1]["summary"]["outcome"] == "completed", events
    kinds = [k for k, _ in events]
    retracts = [d for k, d in events if k == "retract"]
    assert len(retracts) == 1 and retracts[0]["message_ids"] == [first["message_id"]], events
    assert kinds.index("retract") < max(i for i, k in enumerate(kinds) if k == "text")
    texts = [d for k, d in events if k == "text"]
    shown = "".join(d["text"] for d in texts if d["message_id"] not in retracts[0]["message_ids"])
    assert shown == f"done {task}", events
    assert "".join(d["text"] for d in texts) == f"donedone {task}", "the cut call's word came first"
    rec = httpx2.get(f"{other}/v1/sessions/{sid}", headers=_h(key)).json()["records"]
    answers = [
        x["message"]["content"]["content"]
        for x in rec
        if x.get("type") == "conversation"
        and x["message"].get("type") == "assistant"
        and x["message"]["content"].get("type") == "text"
    ]
    assert answers == [f"done {task}"], rec
    gone = [x for x in rec if x.get("type") == "retracted"]  # the store records the retraction too
    assert [x["message_ids"] for x in gone] == [[first["message_id"]]], rec


def test_the_answer_of_a_followed_turn_is_its_text_after_the_last_tool_result_without_retracted_outputs() -> (
    None
):
    from foundation_ai.agentic import TurnEvent
    from foundation_ai.serve.shared import answer_of
    from foundation_ai.types import Messages, TextContent, ToolCall

    call = ToolCall(id="c1", name="wait_gate", arguments={"key": "k"})
    result = Messages.ToolResult(tool_call_id="c1", name="wait_gate", content=TextContent("ok"))
    events = [
        TurnEvent.Text("Let me look.", "m1"),
        TurnEvent.ToolCall(call, "m2"),
        TurnEvent.ToolResult(result),
        TurnEvent.Text("draft", "m3"),
        TurnEvent.Retract(["m3"], "retried"),
        TurnEvent.Text("It is ", "m4"),
        TurnEvent.Text("ok.", "m4"),
    ]
    assert answer_of(events) == "It is ok."
    assert answer_of(events[:2]) == "Let me look."


def test_an_unreachable_database_is_one_line_with_its_cause_and_no_password(tmp_path: Path) -> None:
    agents = tmp_path / "agents.toml"
    agents.write_text('[agents.ops]\nmodel = "openai:fake"\n')
    url = "postgresql://u:s3cret-pw@127.0.0.1:1/x"
    for argv in (
        ["serve", "--no-auth", "--db", url, "--agents", str(agents)],
        ["serve", "keys", "list", "--db", url],
    ):
        r = subprocess.run(
            [*CLI, *argv], env=cli_env(tmp_path, OPENAI_BASE_URL="http://127.0.0.1:9"),
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert r.returncode == 2, r.stderr
        assert r.stderr.strip().splitlines() == [
            "foundation-ai: error: cannot reach the database postgresql://u@127.0.0.1:1/x: Connection refused"
        ]
