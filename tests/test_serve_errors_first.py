"""Errors before the first token are HTTP errors: a streamed request whose first model call fails
gets the HTTP status and OpenAI error body of the non-streamed request, and the official
``openai`` SDK raises the matching typed error at once (Chat and Responses; a prompt over the
window of a real llama.cpp server). Also: ``store: false`` on ``/v1/responses`` is honoured, an
unknown or foreign ``previous_response_id`` is ``previous_response_not_found``, and configured
secrets echoed by the model are masked in everything served and stored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest

from foundation_ai.agentic import ScriptedModel, call, fail, say, tool
from foundation_ai.serve import Agent
from foundation_ai.types import ModelInteraction, ToolResultMessage
from tests._llama_server import LlamaServerHandle
from tests._serve_helpers import serving

HUGE = "hello " * 3000  # over the 2048-token window of the llama_server fixture
SECRET = "sk-test-Zq8xW2pL9vR4tY7uK1mN3bV6cX0"
PHRASE = "correct horse battery staple"


def _llama_agent(llama: LlamaServerHandle) -> Agent:
    from foundation_ai.backends import openai_chat

    return Agent("bot", model=openai_chat("smollm2", base_url=llama.base_url, timeout=120))


def test_a_chat_stream_over_the_window_gets_the_non_streamed_http_error_and_the_sdk_raises_it_at_once(
    tmp_path: Path, llama_server: LlamaServerHandle
) -> None:
    with serving(tmp_path, no_auth=True, agents=[_llama_agent(llama_server)]) as (srv, _):
        body = {"model": "bot", "messages": [{"role": "user", "content": HUGE}]}
        with httpx2.Client(base_url=srv.url, timeout=120) as c:
            plain = c.post("/v1/chat/completions", json=body)
            streamed = c.post("/v1/chat/completions", json=body | {"stream": True})
        assert plain.status_code == streamed.status_code == 400
        assert streamed.headers["content-type"] == "application/json"
        assert plain.json() == streamed.json()
        assert plain.json()["error"]["code"] == "context_length_exceeded"
        sdk = openai.OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0, timeout=120)
        with pytest.raises(openai.BadRequestError) as raised:
            sdk.chat.completions.create(model="bot", messages=body["messages"], stream=True)  # no iteration
        assert raised.value.code == "context_length_exceeded"


def test_a_responses_stream_over_the_window_gets_the_non_streamed_http_error_and_the_sdk_raises_it_at_once(
    tmp_path: Path, llama_server: LlamaServerHandle
) -> None:
    with serving(tmp_path, no_auth=True, agents=[_llama_agent(llama_server)]) as (srv, _):
        with httpx2.Client(base_url=srv.url, timeout=120) as c:
            plain = c.post("/v1/responses", json={"model": "bot", "input": HUGE})
            streamed = c.post("/v1/responses", json={"model": "bot", "input": HUGE, "stream": True})
        assert plain.status_code == streamed.status_code == 400
        assert plain.json() == streamed.json()
        sdk = openai.OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0, timeout=120)
        with pytest.raises(openai.BadRequestError) as raised:
            sdk.responses.create(model="bot", input=HUGE, stream=True)
        assert raised.value.code == "context_length_exceeded"


def _first_fails(inter: ModelInteraction) -> Any:
    text = inter.messages[-1].text() or ""
    if "later" in text:
        return [say("partial answer"), fail("the provider broke")]
    return fail("the provider is down")


def test_a_provider_failure_before_any_output_is_a_502_streamed_or_not_and_a_later_one_ends_the_stream(
    tmp_path: Path,
) -> None:
    agent = Agent("bot", model=ScriptedModel([_first_fails] * 20, chunk_mode="delta"))
    with serving(tmp_path, no_auth=True, agents=[agent]) as (srv, _):
        sdk = openai.OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0)
        msgs = [{"role": "user", "content": "now"}]
        for stream in (False, True):
            with pytest.raises(openai.InternalServerError) as raised:
                sdk.chat.completions.create(model="bot", messages=msgs, stream=stream)  # type: ignore[call-overload]
            assert raised.value.status_code == 502 and "provider is down" in raised.value.message
            with pytest.raises(openai.InternalServerError):
                sdk.responses.create(model="bot", input="now", stream=stream)  # type: ignore[call-overload]
        # after output was sent, the failure is in the stream (its HTTP status was 200 already)
        got = []
        with pytest.raises(openai.APIError, match="provider broke"):
            for chunk in sdk.chat.completions.create(
                model="bot", messages=[{"role": "user", "content": "later"}], stream=True
            ):
                got += [ch.delta.content for ch in chunk.choices if ch.delta.content]
        assert "".join(got) == "partial answer"
        kinds = [e.type for e in sdk.responses.create(model="bot", input="later", stream=True)]
        assert kinds[-1] == "response.failed"


def _recall(inter: ModelInteraction) -> Any:
    seen = [m.text() for m in inter.messages if m.text()]
    return say("I remember: " + " | ".join(s for s in seen if s))


def test_store_false_keeps_nothing_and_its_id_cannot_be_continued(tmp_path: Path) -> None:
    agent = Agent("bot", model=ScriptedModel([_recall] * 20, chunk_mode="delta"))
    with serving(tmp_path, no_auth=True, agents=[agent]) as (srv, _):
        sdk = openai.OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0)
        with httpx2.Client(base_url=srv.url) as c:
            r = c.post("/v1/responses", json={"model": "bot", "input": "alpha", "store": False})
            assert r.status_code == 200 and r.json()["store"] is False
            assert "x-session-id" not in r.headers
            assert c.get("/v1/sessions").json()["data"] == []
            ephemeral = r.json()["id"]
            streamed = sdk.responses.create(model="bot", input="beta", store=False, stream=True)
            done = next(e for e in streamed if e.type == "response.completed")
            assert done.response.store is False
            assert c.get("/v1/sessions").json()["data"] == []
        for rid in (ephemeral, done.response.id):
            with pytest.raises(openai.NotFoundError) as raised:
                sdk.responses.create(model="bot", input="again", previous_response_id=rid)
            assert raised.value.code == "previous_response_not_found"
        # continuing a stored response with store: false reads it, and adds nothing to it
        kept = sdk.responses.create(model="bot", input="gamma")
        side = sdk.responses.create(model="bot", input="delta", previous_response_id=kept.id, store=False)
        assert "gamma" in side.output_text and "delta" in side.output_text
        later = sdk.responses.create(model="bot", input="epsilon", previous_response_id=kept.id)
        assert "gamma" in later.output_text and "delta" not in later.output_text


def test_an_unknown_or_another_keys_previous_response_id_is_previous_response_not_found(
    tmp_path: Path,
) -> None:
    with serving(tmp_path) as (srv, keys):
        alice = openai.OpenAI(base_url=srv.url + "/v1", api_key=keys.create("a")[1], max_retries=0)
        bob = openai.OpenAI(base_url=srv.url + "/v1", api_key=keys.create("b")[1], max_retries=0)
        theirs = alice.responses.create(model="bot", input="hi").id
        for rid in ("resp_nothing", theirs):
            with pytest.raises(openai.NotFoundError) as raised:
                bob.responses.create(model="bot", input="hi", previous_response_id=rid)
            assert raised.value.code == "previous_response_not_found"
            assert raised.value.body["param"] == "previous_response_id"  # type: ignore[index]


@tool
def read_env(name: str) -> str:
    """Read a setting."""
    return f"{name}={SECRET}"


def _leaky(inter: ModelInteraction) -> Any:
    last = inter.messages[-1]
    if isinstance(last, ToolResultMessage):
        return say(f"The key is {SECRET}, as asked.")
    if "tool" in (last.text() or ""):
        return call("read_env", {"name": "OPENAI_API_KEY"})
    # streamed a word per chunk: the passphrase arrives split over four chunks
    return say(f"Your key: {SECRET} and {PHRASE} (keep it safe)")


def test_a_provider_key_echoed_by_the_model_is_masked_in_everything_served_and_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EXAMPLE_PROVIDER_API_KEY", SECRET)
    from foundation_ai.serve import ServeConfig

    found = ServeConfig(agents=[Agent("x", model=ScriptedModel([]))], no_auth=True).secret_texts()
    assert SECRET in found  # a provider key of the environment is masked by default
    agent = Agent("bot", model=ScriptedModel([_leaky] * 50, chunk_mode="delta"), tools=[read_env])
    with serving(tmp_path, no_auth=True, agents=[agent], secrets=[SECRET, PHRASE]) as (srv, _):
        served: list[str] = []
        with httpx2.Client(base_url=srv.url) as c:
            msgs = [{"role": "user", "content": "hi"}]
            plain = c.post("/v1/chat/completions", json={"model": "bot", "messages": msgs})
            served.append(plain.text)
            assert (
                plain.json()["choices"][0]["message"]["content"]
                == "Your key: [REDACTED] and [REDACTED] (keep it safe)"
            )
            streamed = c.post("/v1/chat/completions", json={"model": "bot", "messages": msgs, "stream": True})
            served.append(streamed.text)
            pieces = [
                json.loads(line[6:])["choices"][0]["delta"].get("content") or ""
                for line in streamed.text.splitlines()
                if line.startswith("data: {") and '"choices":[{' in line
            ]
            assert "".join(pieces) == "Your key: [REDACTED] and [REDACTED] (keep it safe)"
            tooled = c.post("/v1/responses", json={"model": "bot", "input": "use the tool", "stream": True})
            served.append(tooled.text)
            assert "The key is [REDACTED], as asked." in tooled.text
            sid = tooled.headers["x-session-id"]
            served.append(c.get(f"/v1/sessions/{sid}").text)
            served.append(c.get(f"/v1/sessions/{sid}/events").text)
        for text in served:
            assert SECRET not in text and "horse" not in text, text[:300]
        stored = b""
        for db in (tmp_path / "data").glob("*.sqlite3*"):
            stored += db.read_bytes()
        assert stored and SECRET.encode() not in stored and b"horse" not in stored
        assert b"[REDACTED]" in stored


@tool
def read_rest(part: str) -> str:
    """Read the rest of a setting."""
    return f"{SECRET[14:]} is the rest of {part}"


def _split(inter: ModelInteraction) -> Any:
    last = inter.messages[-1]
    if isinstance(last, ToolResultMessage):  # the second answer starts with the key's last part
        return say(f"{SECRET[20:]} closes it.")
    # one answer ends with the key's first half, then a tool result starts with its second
    return [say(f"The key begins {SECRET[:14]}"), call("read_rest", {"part": "key"})]


def test_a_secret_split_over_two_outputs_is_masked_in_each(tmp_path: Path) -> None:
    agent = Agent("bot", model=ScriptedModel([_split] * 20, chunk_mode="delta"), tools=[read_rest])
    with serving(tmp_path, no_auth=True, agents=[agent], secrets=[SECRET]) as (srv, _):
        with httpx2.Client(base_url=srv.url) as c:
            streamed = c.post("/v1/responses", json={"model": "bot", "input": "split", "stream": True})
            plain = c.post(
                "/v1/chat/completions", json={"model": "bot", "messages": [{"role": "user", "content": "x"}]}
            )
            sid = streamed.headers["x-session-id"]
            records = c.get(f"/v1/sessions/{sid}").text
            events = c.get(f"/v1/sessions/{sid}/events").text
        assert "The key begins [REDACTED]" in streamed.text
        assert "[REDACTED] is the rest of key" in streamed.text and "[REDACTED] closes it." in streamed.text
        assert plain.json()["choices"][0]["message"]["content"] == "[REDACTED] closes it."
        stored = b"".join(db.read_bytes() for db in (tmp_path / "data").glob("*.sqlite3*"))
        for text in (streamed.text, plain.text, records, events, stored.decode("utf-8", "replace")):
            assert SECRET[:14] not in text and SECRET[14:] not in text and SECRET[20:] not in text


def test_the_edge_rule_masks_only_fragments_of_a_quarter_of_a_secret_or_more() -> None:
    from foundation_ai.serve.masking import SecretMask

    m = SecretMask([SECRET])
    assert SecretMask.fragment(SECRET) == 8
    assert m.whole("ends with " + SECRET[:8]) == "ends with [REDACTED]"
    assert m.whole("ends with " + SECRET[:7]) == "ends with " + SECRET[:7]  # too short: shown
    assert m.whole(SECRET[-9:] + " starts it") == "[REDACTED] starts it"
    assert (
        m.whole("the middle " + SECRET[5:20] + " is not an edge")
        == "the middle " + SECRET[5:20] + " is not an edge"
    )
    masker = m.masker()  # streamed: the start is held until it can no longer end a secret
    shown = [masker.feed(p) for p in (SECRET[-12:-6], SECRET[-6:], " and more ", SECRET[:10])]
    assert "".join(shown) + masker.flush() == "[REDACTED] and more [REDACTED]"
