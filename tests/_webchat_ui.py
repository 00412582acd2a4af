"""Shared pieces of the web chat UI tests (``tests/test_serve_webchat_ui*.py``): a scripted
agent whose answers exercise Markdown, hostile text, images, a shell-like tool needing approval,
and a headless Chromium page at a given width (desktop 1280 px, phone 400 px)."""

from __future__ import annotations

import base64
import random
import struct
import zlib
from typing import Any

from foundation_ai.agentic import ScriptedModel, call, pause, say, tool
from foundation_ai.serve import Agent
from foundation_ai.types import ImageContent, ModelInteraction, ToolResultMessage, UserMessage

DESKTOP = (1280, 860)
PHONE = (400, 860)

BIDI_COMMAND = "true ls -la # \u202e ; touch PWNED ; :\u2066"
"""The issue's Trojan Source command: shown as ``true ls -la # ; touch PWNED ; :``-ish, runs
``touch PWNED``."""

MULTILINE_COMMAND = "ls\n\n\n\n\ntouch pwned"

MARKDOWN = """## Plan

Steps:

- first *item*
- second **item**

1. one
2. two

| name | value |
| --- | --- |
| alpha | 1 |
| beta | 2 |

```python
print("hi")
```

See [the docs](https://example.com/docs) and `inline`."""

HOSTILE = (
    '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">\n\n'
    "[click me](javascript:window.__pwned=3) [data](data:text/html,<script>alert(1)</script>) "
    '<a href="javascript:window.__pwned=4">raw link</a>\n\n'
    "bidi: abc\u202edef\u2066 esc: \x1b[2J\x1b]52;c;SGVsbG8=\x07 bell\x07 nul\x00 c1\x9b end\r\n"
    "```\ncode \u202e inside\n```"
)

COMMANDS_RUN: list[str] = []


@tool
def run_command(command: str) -> str:
    """Run a shell command (recorded, never executed)."""
    COMMANDS_RUN.append(command)
    return "ran"


@tool
def echo(text: str) -> str:
    """Return ``text`` with a hostile suffix (a tool result with controls)."""
    return text + " \u202eresult\x1b[31m"


ANSWERS: dict[str, int] = {}


def ui_reply(inter: ModelInteraction) -> Any:
    """The prompt's keywords pick the answer; otherwise "Answer #n to: <prompt>"."""
    last = inter.messages[-1]
    if isinstance(last, ToolResultMessage):
        return say(f"Tool said: {last.text()}")
    images = [
        m.content
        for m in inter.messages
        if isinstance(m, UserMessage) and isinstance(m.content, ImageContent)
    ]
    text = last.text() or ""
    if images and not text.startswith("again"):
        sizes = ", ".join(f"{i.mime_type.value} of {len(base64.b64decode(i.b64))} bytes" for i in images)
        return say(f"I see {len(images)} image(s): {sizes}. You said: {text or '(nothing)'}")
    if "slow" in text:
        return [say("Starting a long answer"), pause(60), say(" that never ends")]
    if "markdown" in text:
        return say(MARKDOWN)
    if "hostile" in text:
        return say(HOSTILE)
    if "multiline command" in text:
        return [say("Running it."), call("run_command", {"command": MULTILINE_COMMAND})]
    if "command" in text:
        return [say("Running it."), call("run_command", {"command": BIDI_COMMAND})]
    if "echo" in text:
        return [say("Echoing."), call("echo", {"text": "x\u202ey"})]
    n = ANSWERS[text] = ANSWERS.get(text, 0) + 1
    return say(f"Answer #{n} to: {text}")


def ui_agent(name: str = "bot") -> Agent:
    """A ScriptedModel agent with ``run_command`` (needs approval) and ``echo``."""
    model = ScriptedModel([ui_reply] * 10_000, chunk_mode="delta")
    return Agent(
        name,
        model=model,
        tools=[run_command, echo],
        requires_approval=["run_command"],
        description="web chat UI test agent",
    )


def png(width: int = 3, height: int = 2, *, noise: bool = False) -> bytes:
    """A valid RGB PNG, built with zlib (PNG spec, www.w3.org/TR/png/): red pixels, or with
    ``noise`` random ones (which do not compress: about ``3 * width * height`` bytes)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(
        b"\x00" + (random.randbytes(3 * width) if noise else b"\xff\x00\x00" * width) for _ in range(height)
    )
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def set_width(driver: Any, size: tuple[int, int]) -> None:
    """Emulate a viewport of ``size`` CSS pixels (a phone is also touch/mobile)."""
    width, height = size
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 800},
    )


def set_scheme(driver: Any, scheme: str) -> None:
    """Emulate ``prefers-color-scheme: scheme`` ("light" or "dark")."""
    driver.execute_cdp_cmd(
        "Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": scheme}]}
    )
