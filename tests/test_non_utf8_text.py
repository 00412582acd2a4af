"""Text that is not valid UTF-8 never crashes a turn (docs/json-format.md, "Text").

Python hands the library *lone surrogates* for bytes that are not UTF-8 (``os.listdir`` on a
Latin-1 file name, anything decoded with ``errors="surrogateescape"``); UTF-8 (JSON, SQLite,
HTTP) cannot carry them. They become U+FFFD where text enters a message and when JSON is written,
so the turn completes, is stored, and the session stays usable.
"""

from __future__ import annotations

import os
from pathlib import Path

from foundation_ai import AgentSession, tool
from foundation_ai.agentic import ScriptedModel, SqliteSessionStore, call, say
from foundation_ai.agentic.stores import conversation_of
from foundation_ai.agentic.toolsets import FileToolset
from foundation_ai.types import (
    MessageRole,
    Messages,
    SessionRecord,
    TextContent,
    ToolResultMessage,
    UserMessage,
    from_json,
    to_json,
)

LATIN1_NAME = b"caf\xe9.txt".decode("utf-8", "surrogateescape")  # what os.listdir gives


def _texts(messages: list[Messages]) -> list[str]:
    return [m.content.content for m in messages if isinstance(getattr(m, "content", None), TextContent)]


def test_a_tool_returning_a_non_utf8_file_name_completes_the_turn_and_is_stored(tmp_path: Path) -> None:
    @tool
    def read_name() -> str:
        """A file name as os.listdir decodes a Latin-1 name."""
        return LATIN1_NAME

    db = tmp_path / "s.db"
    model = ScriptedModel([call("read_name", {}), say("done"), say("after")])
    agent = AgentSession.builder(model).with_tools(read_name).with_store(SqliteSessionStore(db)).build()
    assert agent.run_turn("list files").text() == "done"
    assert agent.run_turn("hello again").text() == "after"  # the session stays usable
    store = SqliteSessionStore(db)
    stored = conversation_of(store.load(agent.session_id))
    store.close()
    result = next(m for m in stored if isinstance(m, ToolResultMessage))
    assert result.content == TextContent("caf\ufffd.txt")
    assert _texts(stored)[-1] == "after"


def test_the_list_tool_on_a_directory_holding_a_latin1_file_name(tmp_path: Path) -> None:
    root = os.fsencode(tmp_path / "dir")
    os.makedirs(root)
    (Path(os.fsdecode(root)) / LATIN1_NAME).write_bytes(b"x")  # the bytes name b"caf\xe9.txt"
    assert os.listdir(root) == [b"caf\xe9.txt"]
    tools = FileToolset(os.fsdecode(root)).tools(["list"])
    db = tmp_path / "s.db"
    model = ScriptedModel([call("list", {"path": "."}), say("done")])
    agent = AgentSession.builder(model).with_tools(*tools).with_store(SqliteSessionStore(db)).build()
    turn = agent.run_turn("go")
    assert turn.text() == "done"
    (result,) = turn.tool_results()
    assert result.error_detail is None
    assert "caf\ufffd.txt" in str(result.content)


def test_a_prompt_with_lone_surrogates_is_stored_with_replacement_characters(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    agent = AgentSession.builder(ScriptedModel([say("ok")])).with_store(SqliteSessionStore(db)).build()
    assert agent.run_turn("summarize caf\udce9 and \ud83d\ude00").text() == "ok"
    store = SqliteSessionStore(db)
    (meta,) = store.list_sessions()
    stored = conversation_of(store.load(agent.session_id))
    store.close()
    assert _texts(stored)[0] == "summarize caf\ufffd and 😀"  # a surrogate pair is joined
    assert meta.title == "summarize caf\ufffd and 😀"


def test_messages_constructors_replace_lone_surrogates() -> None:
    assert Messages.user("a\udc80b").content == TextContent("a\ufffdb")
    assert Messages.agent("\ud800").content == TextContent("\ufffd")
    assert Messages.system("plain").content == TextContent("plain")


def test_to_json_writes_a_lone_surrogate_as_a_replacement_character() -> None:
    """A message built by hand around the constructors still encodes: the JSON carries U+FFFD,
    and decodes to the same message with the character replaced."""
    raw = UserMessage(role=MessageRole.User, content=TextContent("caf\udce9"), id="03hc00000000000000000000a")
    clean = UserMessage(
        role=MessageRole.User, content=TextContent("caf\ufffd"), id="03hc00000000000000000000a"
    )
    assert to_json(raw) == to_json(clean)
    record = SessionRecord.Conversation(message=raw)
    assert from_json(to_json(record), SessionRecord) == SessionRecord.Conversation(message=clean)
    assert to_json({"caf\udce9": ["x\udc80"]}) == '{"caf\ufffd":["x\ufffd"]}'.encode()
