"""Decoding never crashes (issue 10, kind B3): every malformed or hostile JSON text gives
``JsonFormatError``; arrays/objects nested deeper than ``MAX_NESTING`` are refused before
decoding; tool arguments deeper than ``MAX_ARGUMENT_NESTING`` become an error tool result; a
stored record deeper than the limit is skipped like any corrupt record. Includes the JSON and
tool-argument fuzzers (``@pytest.mark.fuzz``, see tests/_fuzz.py)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from foundation_ai import AgentSession
from foundation_ai.agentic import (
    InMemorySessionStore,
    ScriptedModel,
    SqliteSessionStore,
    ToolRegistry,
    call,
    say,
    tool,
)
from foundation_ai.agentic.tools import MAX_ARGUMENT_NESTING
from foundation_ai.errors import JsonFormatError
from foundation_ai.types import (
    AgentProgress,
    Messages,
    ModelInteraction,
    SessionRecord,
    ToolCall,
    ToolResultMessage,
    dump_document,
    from_json,
    load_document,
    to_json,
)
from foundation_ai.types.serialization import MAX_NESTING, nesting_exceeds

from ._fuzz import fuzz_settings
from ._strategies import json_values, messages, session_records


def nested_list(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def nested_args(depth: int) -> dict[str, Any]:
    """A dict nested ``depth`` levels (itself included)."""
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def record_with_arguments(depth: int) -> bytes:
    """A stored ``Conversation`` record whose tool call's arguments nest ``depth`` levels, written
    without the encoder (which has its own recursion limit)."""
    args = b'{"a":' * (depth - 1) + b"{}" + b"}" * (depth - 1)
    return (
        b'{"type":"conversation","message":{"type":"assistant","id":"03hbt73h1zzmii7zf3sugzw4a",'
        b'"model":{"type":"name","value":"m"},"content":{"type":"tool_call","id":"c1","name":"echo",'
        b'"arguments":' + args + b"}}}"
    )


TYPES: list[Any] = [Messages, SessionRecord, list[Messages], ModelInteraction, dict[str, Any], AgentProgress]


# ---- the limit ------------------------------------------------------------------------------


@pytest.mark.parametrize("tp", TYPES)
def test_text_nested_one_level_past_the_limit_is_refused_with_the_typed_error(tp: Any) -> None:
    with pytest.raises(JsonFormatError) as info:
        from_json(nested_list(MAX_NESTING + 1), tp)
    assert info.value.path == "$"
    assert f"deeper than {MAX_NESTING} levels" in info.value.reason


def test_text_nested_exactly_at_the_limit_decodes() -> None:
    assert from_json(nested_list(MAX_NESTING), list[Any]) is not None
    args = nested_args(MAX_NESTING - 3)
    data = record_with_arguments(MAX_NESTING - 3)
    rec = from_json(data, SessionRecord)
    assert rec.message.content.arguments == args  # type: ignore[union-attr]


@pytest.mark.parametrize("depth", [1_000, 100_000])
def test_very_deep_text_is_refused_not_a_recursion_error(depth: int) -> None:
    for data in (nested_list(depth), b"[" * depth, b'{"a":' * depth):
        for tp in TYPES:
            with pytest.raises(JsonFormatError):
                from_json(data, tp)
        with pytest.raises(JsonFormatError):
            load_document(data, Messages)


def test_record_with_arguments_past_the_limit_is_refused() -> None:
    with pytest.raises(JsonFormatError, match="nested deeper"):
        from_json(record_with_arguments(MAX_NESTING), SessionRecord)


def test_document_nested_past_the_limit_is_refused() -> None:
    items = b"[" + b",".join([record_with_arguments(MAX_NESTING - 4)]) + b"]"
    doc = b'{"format":"foundation-ai","version":1,"kind":"records","items":' + items + b"}"
    with pytest.raises(JsonFormatError, match="nested deeper"):
        load_document(doc, SessionRecord)
    ok = load_document(dump_document([from_json(record_with_arguments(10), SessionRecord)]), SessionRecord)
    assert len(ok) == 1


def test_brackets_inside_strings_do_not_count_towards_the_nesting() -> None:
    text = "[" * 500 + '\\"' + "{" * 300 + "\\\\"
    data = json.dumps({"a": text, "b": [[["]]]]]]]]"]]]}).encode()
    assert not nesting_exceeds(data)
    assert from_json(data, dict[str, Any])["a"] == text


def test_closing_brackets_inside_strings_cannot_hide_the_real_depth() -> None:
    # 200 real levels with 150 closers in a string between the openers: still too deep
    data = b"[" * 100 + b'"' + b"]" * 150 + b'",' + b"[" * 100 + b"]" * 200
    assert nesting_exceeds(data)
    with pytest.raises(JsonFormatError, match="nested deeper"):
        from_json(data, list[Any])


# ---- Unicode ---------------------------------------------------------------------------------


@pytest.mark.parametrize("tp", TYPES)
def test_str_input_with_a_lone_surrogate_is_the_typed_error(tp: Any) -> None:
    text = '{"type":"user","content":{"type":"text","content":"a\ud800b"}}'
    with pytest.raises(JsonFormatError, match="not valid Unicode"):
        from_json(text, tp)
    with pytest.raises(JsonFormatError):
        load_document('{"format":"foundation-ai","version":1,"items":["\udc00"]}', Messages)


def test_escaped_lone_surrogate_and_invalid_utf8_are_the_typed_error() -> None:
    for data in (
        rb'{"type":"user","content":{"type":"text","content":"a\ud800b"}}',
        b'{"type":"user","content":{"type":"text","content":"a\xff\xfeb"}}',
    ):
        with pytest.raises(JsonFormatError):
            from_json(data, Messages)


# ---- tool arguments -----------------------------------------------------------------------


@tool
def echo(x: Any = None) -> str:
    """Echo."""
    return "ran"


def run_call(arguments: dict[str, Any]) -> ToolResultMessage:
    registry = ToolRegistry([echo])
    return asyncio.run(registry.run(ToolCall(id="c1", name="echo", arguments=arguments)))


def test_arguments_at_the_argument_limit_run() -> None:
    result = run_call({"x": nested_args(MAX_ARGUMENT_NESTING - 1)})
    assert result.error_detail is None
    assert result.content.content == "ran"  # type: ignore[union-attr]


@pytest.mark.parametrize("depth", [MAX_ARGUMENT_NESTING + 1, 254, 990])
def test_arguments_past_the_limit_are_an_error_result_not_an_exception(depth: int) -> None:
    result = run_call({"x": nested_args(depth - 1)})
    assert result.error_detail is not None
    assert f"deeper than {MAX_ARGUMENT_NESTING} levels" in result.error_detail


def test_deep_arguments_end_the_call_with_an_error_and_the_turn_goes_on() -> None:
    model = ScriptedModel([call("echo", {"x": nested_args(400)}), say("sorry")])
    agent = AgentSession.builder(model).with_tools(echo).with_store(InMemorySessionStore()).build()
    turn = agent.run_turn("go")
    assert turn.ok
    assert turn.text() == "sorry"
    (result,) = turn.tool_results()
    assert result.error_detail is not None and "deeper than" in result.error_detail
    agent.close()


def test_arguments_of_the_limit_fit_in_a_stored_record_and_a_document() -> None:
    rec = from_json(record_with_arguments(MAX_ARGUMENT_NESTING), SessionRecord)
    assert load_document(dump_document([rec]), SessionRecord) == [rec]


# ---- the store --------------------------------------------------------------------------------


def test_stored_record_past_the_limit_is_skipped_and_the_store_keeps_working(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    store = SqliteSessionStore(db)
    good = SessionRecord.Conversation(message=Messages.user("hi"))
    store.append("s1", [good])
    store.append("s2", [good])
    store.close()
    with sqlite3.connect(db) as conn:  # a row written by a buggy or hostile writer
        conn.execute(
            "INSERT INTO records(session_id, seq, kind, body) VALUES ('s1', 1, 'conversation', ?)",
            (record_with_arguments(990),),
        )
    store = SqliteSessionStore(db)
    assert store.load("s1") == [good]
    assert store.corrupt_records["s1"] == [1]
    assert set(store.sessions()) == {"s1", "s2"}
    store.close()
    for argv in (["show", "s1"], ["sessions"]):
        proc = subprocess.run(
            [sys.executable, "-m", "foundation_ai", *argv, "--db", str(db)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        assert "RecursionError" not in proc.stderr
    assert "hi" in proc.stdout or "s1" in proc.stdout


# ---- fuzzers -----------------------------------------------------------------------------------

any_text = st.text(st.characters(codec=None, categories=None), max_size=200)


def mutations(valid: bytes) -> st.SearchStrategy[bytes]:
    """Hostile variants of a valid text: truncated, a byte changed or inserted, deeply wrapped,
    a string holding a lone surrogate escape."""
    n = len(valid)
    return st.one_of(
        st.integers(0, n).map(lambda i: valid[:i]),
        st.tuples(st.integers(0, max(n - 1, 0)), st.binary(min_size=1, max_size=3)).map(
            lambda t: valid[: t[0]] + t[1] + valid[t[0] + 1 :]
        ),
        st.tuples(st.integers(0, n), st.sampled_from([b"[", b"{", b'"', b"\\", b"\\ud800", b"]}"])).map(
            lambda t: valid[: t[0]] + t[1] * 3 + valid[t[0] :]
        ),
        st.integers(1, 3000).map(lambda d: b'{"a":' * d + valid + b"}" * d),
        st.just(valid.replace(b'"hi', b'"\\udc00hi')),
    )


def only_typed_errors(data: bytes | str) -> None:
    for tp in TYPES:
        try:
            from_json(data, tp)
        except JsonFormatError:
            pass
    try:
        load_document(data, SessionRecord)
    except JsonFormatError:
        pass


@pytest.mark.fuzz
@fuzz_settings()
@given(st.binary(max_size=300) | any_text)
def test_fuzz_arbitrary_text_only_ever_raises_json_format_error(data: bytes | str) -> None:
    only_typed_errors(data)


@pytest.mark.fuzz
@fuzz_settings()
@given(st.one_of(messages, session_records).flatmap(lambda v: mutations(to_json(v))))
def test_fuzz_mutated_records_only_ever_raise_json_format_error(data: bytes) -> None:
    only_typed_errors(data)
    only_typed_errors(b'{"format":"foundation-ai","version":1,"items":[' + data + b"]}")


@pytest.mark.fuzz
@fuzz_settings()
@given(session_records)
def test_fuzz_valid_records_still_round_trip(record: SessionRecord) -> None:
    data = to_json(record)
    assert to_json(from_json(data, SessionRecord)) == data


deep_values: st.SearchStrategy[Any] = st.recursive(
    json_values,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=40,
)


@pytest.mark.fuzz
@fuzz_settings()
@given(
    st.dictionaries(st.text(max_size=8), deep_values, max_size=4),
    st.integers(0, 400),
    st.sampled_from(["echo", "typed", "missing"]),
)
def test_fuzz_tool_arguments_always_give_a_result(args: dict[str, Any], extra_depth: int, name: str) -> None:
    if extra_depth:
        args = {**args, "x": nested_args(extra_depth)}
    registry = ToolRegistry([echo, typed])
    result = asyncio.run(registry.run(ToolCall(id="c", name=name, arguments=args)))
    assert isinstance(result, ToolResultMessage)
    assert result.tool_call_id == "c"


@tool
def typed(q: str, n: int = 1, tags: list[str] | None = None) -> str:
    """Typed."""
    return q * n


def deep_argument_text(depth: int) -> str:
    """Argument text nesting ``depth`` objects: past the JSON decoders' own depth limits
    (msgspec and the standard library raise ``RecursionError`` near 1,000 levels)."""
    return '{"x": ' * depth + "1" + "}" * depth


@pytest.mark.parametrize("depth", [1_000, 5_000])
def test_argument_text_too_deep_to_decode_is_kept_as_text_by_every_backend(depth: int) -> None:
    """Each wire format's parser keeps arguments nested past the decoder's limit as
    ``raw_arguments`` (never a RecursionError that fails the whole response), and the agent
    answers the call with the nesting error."""
    from foundation_ai.backends._anthropic_stream import tool_arguments
    from foundation_ai.backends._llama_tools import parse_tool_calls
    from foundation_ai.backends._openai_chat_stream import _parse_args

    text = deep_argument_text(depth)
    assert _parse_args(text) == (None, text, None)  # Chat Completions
    assert tool_arguments(text) == (None, text)  # Anthropic Messages and Responses
    with pytest.raises(ValueError, match="not valid JSON"):  # llama.cpp: kept as text
        parse_tool_calls('{"name": "echo", "arguments": ' + text + "}", lambda: "call_1")
    registry = ToolRegistry([echo])
    result = asyncio.run(registry.run(ToolCall(id="c1", name="echo", arguments=None, raw_arguments=text)))
    assert result.error_detail is not None
    assert f"deeper than {MAX_ARGUMENT_NESTING} levels" in result.error_detail


def test_a_streamed_call_nested_past_the_decoder_limit_ends_with_an_error_result_and_the_turn_goes_on() -> (
    None
):
    """Over a real loopback Chat Completions stream: 2,000 levels of arguments. The turn
    completes (was: ``TurnFailedError`` "malformed stream (RecursionError ...)" with only the
    prompt stored), the call gets the nesting error, the model's next answer is kept."""
    from foundation_ai.backends._openai_chat import openai_chat

    from ._fixture_server import Canned, FixtureServer, sse

    text = deep_argument_text(2_000)
    call_chunk = {
        "id": "c1",
        "choices": [
            {
                "index": 0,
                "delta": {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "echo", "arguments": text},
                        }
                    ],
                },
            }
        ],
    }
    finish = {"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}
    answer = {"id": "c2", "choices": [{"index": 0, "delta": {"content": "sorry"}, "finish_reason": "stop"}]}
    with FixtureServer() as srv:
        srv.queue(Canned(chunks=sse([call_chunk, finish, "[DONE]"])), Canned(chunks=sse([answer, "[DONE]"])))
        model = openai_chat("m", base_url=srv.base_url + "/v1", api_key="k")
        agent = AgentSession.builder(model).with_tools(echo).with_store(InMemorySessionStore()).build()
        turn = agent.run_turn("go")
    assert turn.ok and turn.text() == "sorry"
    (result,) = turn.tool_results()
    assert (
        result.error_detail is not None
        and f"deeper than {MAX_ARGUMENT_NESTING} levels" in result.error_detail
    )
