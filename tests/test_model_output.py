"""Seed 000 sections 2-3: ``ModelOutput``, ``UserModelContent``, ``GenerationMetadata``."""

from __future__ import annotations

import pytest

from foundation_ai.types import (
    ExecutionHint,
    GenerationMetadata,
    ImageContent,
    Messages,
    MimeType,
    ModelId,
    ModelOutput,
    TextContent,
    ThinkingContent,
    TokenLogProb,
    ToolCall,
    UserModelContent,
    from_json,
    to_json,
)


def test_text_and_image_are_shared_by_both_unions() -> None:
    assert ModelOutput.Text is UserModelContent.Text is TextContent
    assert ModelOutput.Image is UserModelContent.Image is ImageContent
    t = TextContent("hello")
    assert isinstance(t, ModelOutput) and isinstance(t, UserModelContent)
    assert not isinstance(ModelOutput.ThinkingContent("x"), UserModelContent)


def test_tool_call_defaults() -> None:
    call = ModelOutput.ToolCall(id="call_1", name="search")
    assert call.arguments is None
    assert call.depends_on == []
    assert call.execution_hint is ExecutionHint.Unspecified
    assert call.signature is None and call.raw_arguments is None


def test_tool_call_with_dependencies_round_trips() -> None:
    call = ToolCall(
        id="c2",
        name="write",
        arguments={"path": "a.txt", "body": {"lines": ["x", "y"]}},
        depends_on=["c1"],
        execution_hint=ExecutionHint.Sequential,
    )
    data = to_json(call)
    assert b'"execution_hint":"sequential"' in data
    assert b'"depends_on":["c1"]' in data
    assert from_json(data, ModelOutput) == call


def test_tool_call_signature_kept_through_json() -> None:
    """C26: a provider signature on a function-call part is carried and echoed back."""
    call = ToolCall(id="c", name="f", arguments={}, signature="sig-abc==")
    back = from_json(to_json(call), ModelOutput)
    assert isinstance(back, ToolCall) and back.signature == "sig-abc=="


def test_truncated_arguments_keep_raw_text() -> None:
    """C06: arguments cut off mid-JSON are kept as text, never silently ``{}``."""
    call = ToolCall(id="c", name="f", arguments=None, raw_arguments='{"q": "we')
    back = from_json(to_json(call), ModelOutput)
    assert isinstance(back, ToolCall)
    assert back.arguments is None and back.raw_arguments == '{"q": "we'


def test_empty_thinking_with_signature_round_trips() -> None:
    """C23: a thinking block with empty text and a signature is kept."""
    t = ThinkingContent("", signature="EqQBCkYIBxgCKkA")
    back = from_json(to_json(t), ModelOutput)
    assert back == t
    assert isinstance(back, ThinkingContent) and back.thinking == "" and back.signature == "EqQBCkYIBxgCKkA"


def test_thinking_without_encrypted_content_round_trips() -> None:
    """C31: a reasoning item with no encrypted content passes a round trip unchanged."""
    t = ThinkingContent("", signature=None, item_id="rs_123")
    assert from_json(to_json(t), ModelOutput) == t


def test_redacted_thinking() -> None:
    t = ThinkingContent("", signature="opaque-data", redacted=True)
    data = to_json(t)
    assert b'"redacted":true' in data
    assert from_json(data, ModelOutput) == t


def test_embedding() -> None:
    e = ModelOutput.Embedding(dimensions=3, values=[0.25, -1.0, 0.5])
    assert from_json(to_json(e), ModelOutput) == e


@pytest.mark.parametrize(
    ("mime", "text"),
    [
        (MimeType.Png, "image/png"),
        (MimeType.Jpeg, "image/jpeg"),
        (MimeType.Gif, "image/gif"),
        (MimeType.Webp, "image/webp"),
    ],
)
def test_mime_types_serialize_as_mime_strings(mime: MimeType, text: str) -> None:
    img = ImageContent("AAAA", mime)
    assert mime.value == text
    if mime is not MimeType.Png:  # the default is omitted when writing
        assert f'"mime_type":"{text}"'.encode() in to_json(img)
    assert from_json(to_json(img), UserModelContent) == img


def test_match_on_model_output() -> None:
    def kind(o: ModelOutput) -> str:
        match o:
            case ModelOutput.Text(content=c):
                return f"text {c}"
            case ModelOutput.ThinkingContent(thinking=t, signature=s):
                return f"thinking {t} {s}"
            case ModelOutput.ToolCall(name=n, arguments=a):
                return f"call {n} {a}"
            case ModelOutput.Embedding(dimensions=d):
                return f"embedding {d}"
            case _:
                return "other"

    assert kind(TextContent("a")) == "text a"
    assert kind(ThinkingContent("t", signature="s")) == "thinking t s"
    assert kind(ToolCall(id="1", name="f", arguments={"x": 1})) == "call f {'x': 1}"
    assert kind(ModelOutput.Embedding(dimensions=2, values=[0.0, 1.0])) == "embedding 2"
    assert kind(ImageContent("AAAA")) == "other"


def test_generation_metadata_variants_round_trip() -> None:
    meta = [
        GenerationMetadata.LogProbs(tokens=[TokenLogProb("Hi", -0.1, [("Hello", -2.5)])]),
        GenerationMetadata.SystemFingerprint("fp_44709d6fcb"),
        GenerationMetadata.Timing(time_to_first_token=0.21, tokens_per_second=55.5, duration=1.7),
        GenerationMetadata.RefusalReason("I can't help with that."),
    ]
    msg = Messages.Assistant(model=ModelId.Name("gpt-4o"), content=TextContent(""), metadata=meta)
    back = from_json(to_json(msg), Messages)
    assert isinstance(back, Messages.Assistant)
    assert back.metadata == meta
    assert [m.__struct_config__.tag for m in meta] == [
        "log_probs",
        "system_fingerprint",
        "timing",
        "refusal_reason",
    ]


def test_no_refusal_or_multipart_variant() -> None:
    assert not hasattr(ModelOutput, "Refusal")
    assert set(vars(UserModelContent)) >= {"Text", "Image"}
    assert not hasattr(UserModelContent, "Parts")
