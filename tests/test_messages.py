"""Seed 000 section 1: ``Messages`` constructors, ``str`` coercion, ids, roles and ``match``."""

from __future__ import annotations

from datetime import UTC

import pytest

from foundation_ai.ids import is_scru128
from foundation_ai.types import (
    ImageContent,
    MessageRole,
    Messages,
    MimeType,
    ModelId,
    ModelOutput,
    StopReason,
    TextContent,
    from_json,
    to_json,
)


def _assistant(**kw: object) -> Messages:
    return Messages.Assistant(model=ModelId.Name("m"), content=ModelOutput.Text("hi"), **kw)  # type: ignore[arg-type]


def _tool_result() -> Messages:
    return Messages.ToolResult(tool_call_id="call_1", name="search", content=TextContent("42"))


@pytest.mark.parametrize(
    ("make", "role"),
    [
        (Messages.user, MessageRole.User),
        (Messages.agent, MessageRole.Agent),
        (Messages.system, MessageRole.System),
    ],
)
def test_constructors_set_role_text_and_fresh_id(make, role) -> None:
    a, b = make("Hi"), make("Hi")
    assert isinstance(a, Messages.User)
    assert a.role == role
    assert a.content == TextContent("Hi")
    assert a.text() == "Hi"
    assert a.signature is None
    assert is_scru128(a.id) and is_scru128(b.id)
    assert a.id != b.id


def test_roles_serialize_as_lowercase_strings() -> None:
    assert (MessageRole.User, MessageRole.Agent, MessageRole.System, MessageRole.Tool) == (
        "user",
        "agent",
        "system",
        "tool",
    )
    assert b'"role":"system"' in to_json(Messages.system("x"))
    # the default role (user) is the default value and may be omitted; it reads back as "user"
    assert from_json(to_json(Messages.user("x")), Messages).role == "user"


def test_custom_role_is_its_bare_string() -> None:
    role = MessageRole.Custom("critic")
    assert role == "critic"
    assert MessageRole.is_custom(role)
    assert not MessageRole.is_custom(MessageRole.Tool)
    msg = Messages.User(role=role, content=TextContent("looks wrong"))
    data = to_json(msg)
    assert b'"role":"critic"' in data
    assert from_json(data, Messages) == msg


def test_coerce_str_becomes_user_message() -> None:
    m = Messages.coerce("Hi")
    assert isinstance(m, Messages.User)
    assert m.role == MessageRole.User
    assert m.text() == "Hi"
    same = Messages.system("x")
    assert Messages.coerce(same) is same


def test_coerce_rejects_other_types() -> None:
    with pytest.raises(TypeError, match="str or Messages"):
        Messages.coerce(42)  # type: ignore[arg-type]


def test_every_variant_has_an_id() -> None:
    for msg in (Messages.user("a"), _assistant(), _tool_result()):
        assert isinstance(msg, Messages)
        assert is_scru128(msg.id)
        assert len(msg.id) == 25


def test_ids_are_time_ordered() -> None:
    ids = [Messages.user(str(i)).id for i in range(50)]
    assert ids == sorted(ids)


def test_explicit_id_is_kept() -> None:
    m = Messages.User(id="03hbt73h1zzmii7zf3sugzw4a", content=TextContent("x"))
    assert m.id == "03hbt73h1zzmii7zf3sugzw4a"


def test_assistant_defaults() -> None:
    m = _assistant()
    assert isinstance(m, Messages.Assistant)
    assert m.stop_reason == StopReason.Stop()
    assert m.usage.total_tokens == 0.0
    assert m.provider == "unknown"
    assert m.error_detail is None and m.signature is None and m.metadata is None
    assert m.timestamp.tzinfo is UTC


def test_tool_result_is_error() -> None:
    ok = _tool_result()
    failed = Messages.ToolResult(tool_call_id="c", name="t", content=TextContent("boom"), error_detail="boom")
    assert isinstance(ok, Messages.ToolResult) and not ok.is_error
    assert failed.is_error
    assert ok.text() == "42"


def test_image_content_and_text_of_non_text() -> None:
    img = Messages.User(content=ImageContent("aGVsbG8=", MimeType.Jpeg))
    assert img.text() is None
    assert b'"mime_type":"image/jpeg"' in to_json(img)
    assert from_json(to_json(img), Messages) == img


def test_messages_are_frozen() -> None:
    m = Messages.user("x")
    with pytest.raises(AttributeError):
        m.id = "other"  # type: ignore[misc]


def test_variant_names_read_like_the_seed() -> None:
    assert Messages.User.__name__ == "Messages.User"
    assert repr(Messages.user("x")).startswith("Messages.User(")


def test_match_on_variants_and_content() -> None:
    def describe(m: Messages) -> str:
        match m:
            case Messages.User(role=MessageRole.System, content=TextContent(content=t)):
                return f"system:{t}"
            case Messages.User(content=TextContent(content=t)):
                return f"user:{t}"
            case Messages.Assistant(content=ModelOutput.ToolCall(name=name)):
                return f"call:{name}"
            case Messages.Assistant(content=ModelOutput.Text(content=t)):
                return f"text:{t}"
            case Messages.ToolResult(tool_call_id=cid):
                return f"result:{cid}"
            case _:
                return "other"

    call = Messages.Assistant(model=ModelId.Name("m"), content=ModelOutput.ToolCall(id="c", name="add"))
    assert describe(Messages.user("a")) == "user:a"
    assert describe(Messages.system("b")) == "system:b"
    assert describe(call) == "call:add"
    assert describe(_assistant()) == "text:hi"
    assert describe(_tool_result()) == "result:call_1"


def test_is_context_overflow_false_for_user_and_tool_result() -> None:
    assert not Messages.user("prompt is too long").is_context_overflow(10)
    bad = Messages.ToolResult(
        tool_call_id="c", name="t", content=TextContent("x"), error_detail="prompt is too long"
    )
    assert not bad.is_context_overflow(10)
