"""Input that is not valid UTF-8 reaches the model and the store as text with U+FFFD in place
of the bad bytes, never as a crash: text piped into ``run``, lines piped into ``chat``, and
``-a`` text files, whether Python's standard input is strict (a UTF-8 desktop locale) or passes bad bytes on as
lone surrogates (the C locale, UTF-8 mode).

Turns go to the loopback fixture server (canned OpenAI Chat streams), which records what the CLI
sent; the session store is a real SQLite file, read back with ``show --json``.
"""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from foundation_ai._cli.prompt_input import attachment_messages, decode_text, read_prompt
from foundation_ai.errors import ConfigurationError
from tests._cli_helpers import CLI, cli_env, text_stream
from tests._fixture_server import FixtureServer

LATIN1 = b"caf\xe9 cr\xe8me\n"
"""``café crème`` in Latin-1: not valid UTF-8."""

LOCALES = {
    "utf-8 strict": {"PYTHONIOENCODING": "utf-8:strict"},  # a UTF-8 desktop locale's stdin
    "C locale": {"LC_ALL": "C", "PYTHONUTF8": "0"},  # ASCII, errors=surrogateescape
    "UTF-8 mode": {"PYTHONUTF8": "1"},  # UTF-8, errors=surrogateescape
}
"""How Python's standard input decodes, by environment (``sys.stdin.encoding`` / ``errors``)."""


def fa(home: Path, *args: str, stdin: bytes, **env: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [*CLI, *args], input=stdin, capture_output=True, timeout=120, env=cli_env(home, **env)
    )


def stored_texts(home: Path, db: Path) -> list[str]:
    """The text of every stored message of the (only) session in ``db``."""
    listing = subprocess.run(
        [*CLI, "sessions", "--json", "--db", str(db)], capture_output=True, text=True, env=cli_env(home)
    )
    session_id = json.loads(listing.stdout.splitlines()[0])["session_id"]
    shown = subprocess.run(
        [*CLI, "show", session_id, "--json", "--db", str(db)],
        capture_output=True,
        text=True,
        env=cli_env(home),
    )
    assert shown.returncode == 0, shown.stderr
    records = [json.loads(line) for line in shown.stdout.splitlines()]
    return [r["message"]["content"]["content"] for r in records if r["type"] == "conversation"]


def user_texts(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "user"]


@pytest.mark.parametrize("locale", list(LOCALES))
def test_a_latin1_pipe_into_run_gives_a_stored_turn(tmp_path: Path, locale: str) -> None:
    db = tmp_path / "s.db"
    with FixtureServer() as srv:
        srv.queue(text_stream("A coffee with cream."))
        r = fa(tmp_path, "run", "-q", "-m", "openai:m", "--base-url", srv.base_url, "--db", str(db),
               "Summarize", stdin=LATIN1, **LOCALES[locale])  # fmt: skip
        assert r.returncode == 0, r.stderr.decode()
        sent = user_texts(srv.requests[0].json())
    assert r.stdout == b"A coffee with cream.\n" and r.stderr == b""
    assert sent == ["caf\ufffd cr\ufffdme\n\nSummarize"]
    assert stored_texts(tmp_path, db) == ["caf\ufffd cr\ufffdme\n\nSummarize", "A coffee with cream."]


@pytest.mark.parametrize("locale", list(LOCALES))
def test_a_latin1_line_piped_into_chat_is_a_turn(tmp_path: Path, locale: str) -> None:
    db = tmp_path / "s.db"
    with FixtureServer() as srv:
        srv.queue(text_stream("Noted."))
        r = fa(tmp_path, "chat", "-m", "openai:m", "--base-url", srv.base_url, "--db", str(db),
               stdin=b"Order: " + LATIN1, **LOCALES[locale])  # fmt: skip
        assert r.returncode == 0, r.stderr.decode()
        sent = user_texts(srv.requests[0].json())
    assert sent == ["Order: caf\ufffd cr\ufffdme"]
    assert "you> Order: caf\ufffd cr\ufffdme" in r.stdout.decode("utf-8")
    assert stored_texts(tmp_path, db) == ["Order: caf\ufffd cr\ufffdme", "Noted."]


def test_a_latin1_text_file_is_attached_with_replacement_characters(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_bytes(LATIN1)
    db = tmp_path / "s.db"
    with FixtureServer() as srv:
        srv.queue(text_stream("Read it."))
        r = fa(tmp_path, "run", "-q", "-a", str(notes), "-m", "openai:m", "--base-url", srv.base_url,
               "--db", str(db), "What is in the file?", stdin=b"")  # fmt: skip
        assert r.returncode == 0, r.stderr.decode()
        sent = user_texts(srv.requests[0].json())
    assert sent == ["Attachment notes.txt:\ncaf\ufffd cr\ufffdme\n", "What is in the file?"]


# ---------------------------------------------------------------------------------------------
# the decoding step itself


def test_decode_text_replaces_invalid_bytes_and_keeps_valid_text() -> None:
    assert decode_text(b"caf\xe9") == "caf\ufffd"
    assert decode_text("café ☕".encode()) == "café ☕"
    assert decode_text("café".encode(), "ascii") == "café"  # the C locale's ASCII means UTF-8
    assert decode_text("café".encode("latin-1"), "latin-1") == "café"  # a Latin-1 locale is honoured


@pytest.mark.parametrize("errors", ["strict", "surrogateescape"])
def test_read_prompt_decodes_a_non_utf8_pipe(errors: str) -> None:
    class Piped(io.TextIOWrapper):
        def isatty(self) -> bool:
            return False

    stdin = Piped(io.BytesIO(LATIN1), encoding="utf-8", errors=errors)
    assert read_prompt("Summarize", stdin) == "caf\ufffd cr\ufffdme\n\nSummarize"


def test_read_prompt_scrubs_surrogates_from_a_text_only_stream() -> None:
    class Piped(io.StringIO):
        def isatty(self) -> bool:
            return False

    assert read_prompt("-", Piped("caf\udce9")) == "caf\ufffd"


def test_binary_attachments_are_still_refused(tmp_path: Path) -> None:
    blob = tmp_path / "data.bin"
    blob.write_bytes(b"PK\x03\x04\x00\x00\xff")
    with pytest.raises(ConfigurationError, match="nor UTF-8 text"):
        attachment_messages([str(blob)])
