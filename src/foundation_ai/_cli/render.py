"""Terminal output for the CLI, with rich: streamed text, dimmed thinking, compact tool panels,
a usage line after each turn, and transcripts of stored sessions.

:class:`TurnRenderer` is fed one ``TurnEvent`` at a time (from ``TurnStream.events()``) and
writes it at once, so tokens appear as they arrive. It is safe to call from a worker thread
while the main thread waits for input (rich's ``Console`` serialises writes with a lock).
"""

from __future__ import annotations

import errno
import json
from collections.abc import Container, Iterable, Mapping
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.text import Text

from ..types import (
    AssistantMessage,
    CostStatus,
    ImageContent,
    MessageRole,
    Messages,
    ModelProviders,
    SessionRecord,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from .safe_text import visible, visible_line

__all__ = [
    "INTERRUPTED",
    "PLAIN_WIDTH",
    "TurnRenderer",
    "format_usage",
    "make_console",
    "RecordPrinter",
    "render_records",
    "short",
    "tool_call_panel",
    "tool_result_panel",
]

INTERRUPTED = "(turn interrupted)"
"""How ``run``, ``chat`` and ``show`` mark a turn that was aborted (Ctrl-C, ``abort()``)."""

PANEL_MAX_CHARS = 600
"""Characters of tool arguments or results shown in a panel (the model gets everything)."""


PLAIN_WIDTH = 100_000
"""Console width when the output is not a terminal (a file or a pipe): wide enough that rich
never inserts line breaks that are not in the content (panels are as wide as their content)."""


def make_console(*, stderr: bool = False) -> Console:
    """A rich console on stdout (or stderr) for the CLI's human-readable output; a closed
    output raises ``BrokenPipeError`` (the entry point exits 141).

    On a terminal: rich's defaults (colours, wrapping at the terminal width). Otherwise
    (``show ID > file``, a pipe): no colours and no hard wrapping, ``soft_wrap`` on and
    :data:`PLAIN_WIDTH` columns, so the text written is the content's own lines.
    """
    console = _Console(highlight=False, stderr=stderr)
    if console.is_terminal:
        return console
    return _Console(highlight=False, stderr=stderr, soft_wrap=True, width=PLAIN_WIDTH)


class _Console(Console):
    """A rich ``Console`` that reports a closed output (``sessions | head -1``) as
    ``BrokenPipeError``, for the CLI's entry point to end quietly with exit status 141 (rich's
    default exits the process with status 1)."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError(errno.EPIPE, "the reader of the output went away")


def short(text: str, limit: int = PANEL_MAX_CHARS) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis note, control characters shown
    escaped (:func:`~foundation_ai._cli.safe_text.visible`; the cut counts the original
    characters)."""
    text = text.rstrip()
    if len(text) <= limit:
        return visible(text)
    return f"{visible(text[:limit])}… ({len(text) - limit} more characters)"


def _title(kind: str, name: str) -> Text:
    """A panel title: ``kind`` in bold, then the (model-chosen, so escaped) tool name."""
    return Text.assemble((kind, "bold"), " ", visible_line(name))


def _args_text(call: ToolCall) -> str:
    if call.arguments is not None:
        return json.dumps(call.arguments, ensure_ascii=False)
    return call.raw_arguments or "{}"


def tool_call_panel(call: ToolCall) -> Panel:
    """A one-line-ish panel: ``⚙ name`` as title, the JSON arguments as body."""
    return Panel(
        Text(short(_args_text(call)), style="cyan"),
        title=_title("tool call", call.name),
        title_align="left",
        border_style="cyan",
        expand=False,
    )


def _content_text(content: Any) -> str:
    if isinstance(content, TextContent):
        return content.content
    if isinstance(content, ImageContent):
        return f"[image {content.mime_type.value}, {len(content.b64) * 3 // 4} bytes]"
    return str(content)


def tool_result_panel(result: ToolResultMessage) -> Panel:
    """The tool's result (green) or its error (red), cut to :data:`PANEL_MAX_CHARS`."""
    if result.error_detail is not None:
        return Panel(
            Text(short(result.error_detail), style="red"),
            title=_title("tool error", result.name),
            title_align="left",
            border_style="red",
            expand=False,
        )
    return Panel(
        Text(short(_content_text(result.content)) or "(empty)"),
        title=_title("tool result", result.name),
        title_align="left",
        border_style="green",
        expand=False,
    )


def format_usage(
    input_tokens: float,
    output_tokens: float,
    cost_usd: float | None = None,
    cache_read: float = 0.0,
    cache_write: float = 0.0,
    *,
    local: bool = False,
) -> str:
    """``"tokens: 42 in · 17 out · cost $0.000123"``; cache counts when non-zero. The cost
    (USD) is ``$0 (local)`` for an in-process model (``local``), ``n/a`` when unknown
    (``None``), else six decimals. ``run``, ``chat`` and ``show`` all print usage with this."""
    parts = [f"{input_tokens:,.0f} in", f"{output_tokens:,.0f} out"]
    if cache_read:
        parts.append(f"{cache_read:,.0f} cache read")
    if cache_write:
        parts.append(f"{cache_write:,.0f} cache write")
    cost = "$0 (local)" if local else "n/a" if cost_usd is None else f"${cost_usd:.6f}"
    return f"tokens: {' · '.join(parts)} · cost {cost}"


LOCAL_PROVIDERS = frozenset({ModelProviders.LlamaCpp})
"""Providers whose models run in-process: their turns cost nothing (``$0 (local)``)."""


class TurnRenderer:
    """Writes one turn's events to a rich console as they arrive.

    Call :meth:`text` / :meth:`thinking` with new pieces, :meth:`tool_call`,
    :meth:`tool_result`, :meth:`retract`, then :meth:`usage` or :meth:`failed`.
    """

    def __init__(self, console: Console) -> None:
        self.console = console
        self._mode: str | None = None  # "text" | "thinking" | None (at a line start)
        self._output: str | None = None  # the message id being streamed

    def _switch(self, mode: str | None) -> None:
        if self._mode is not None and self._mode != mode:
            self.console.print()
        self._mode = mode

    def _next_output(self, message_id: str | None) -> None:
        if message_id is not None and message_id != self._output:
            if self._output is not None:
                self._switch(None)  # a new output starts on a new line
            self._output = message_id

    def text(self, piece: str, message_id: str | None = None) -> None:
        """Append a piece of the answer (``message_id``: its output; a new one starts a new line)."""
        if not piece:
            return
        self._next_output(message_id)
        self._switch("text")
        self.console.print(visible(piece), end="", markup=False, highlight=False, soft_wrap=True)

    def thinking(self, piece: str, message_id: str | None = None) -> None:
        """Append a piece of the model's reasoning, dimmed."""
        if not piece:
            return
        self._next_output(message_id)
        self._switch("thinking")
        self.console.print(
            visible(piece), end="", style="dim italic", markup=False, highlight=False, soft_wrap=True
        )

    def tool_call(self, call: ToolCall) -> None:
        """Show a tool call as a compact panel."""
        self._switch(None)
        self.console.print(tool_call_panel(call))

    def tool_result(self, result: ToolResultMessage) -> None:
        """Show a tool result (or error) as a compact panel."""
        self._switch(None)
        self.console.print(tool_result_panel(result))

    def retract(self, reason: str) -> None:
        """Say that the output shown since the last tool step is withdrawn."""
        self._switch(None)
        self.console.print(Text(f"[output above retracted: {visible_line(reason)}]", style="yellow"))

    def notice(self, message: str, style: str = "dim") -> None:
        """A line of commentary (steering accepted, aborting, …)."""
        self._switch(None)
        self.console.print(Text(visible(message), style=style), soft_wrap=True)

    def end_line(self) -> None:
        """Finish the current streamed line, if any."""
        self._switch(None)

    def usage(self, line: str) -> None:
        """The usage line after a turn."""
        self._switch(None)
        self.console.print(Text(visible(line), style="dim"), soft_wrap=True)

    def failed(self, message: str) -> None:
        """A failed turn, in red."""
        self._switch(None)
        self.console.print(Text(f"error: {visible_line(message)}", style="bold red"), soft_wrap=True)


def _message_lines(console: Console, message: Messages) -> None:
    if isinstance(message, UserMessage):
        who = "you" if message.role == MessageRole.User else visible_line(str(message.role))
        console.print(
            Text.assemble((f"{who}> ", "bold green"), (visible(_content_text(message.content)), ""))
        )
    elif isinstance(message, AssistantMessage):
        content = message.content
        if isinstance(content, TextContent):
            if content.content:
                console.print(Text.assemble(("assistant> ", "bold blue"), (visible(content.content), "")))
        elif isinstance(content, ThinkingContent):
            if content.thinking:
                console.print(Text(visible(content.thinking), style="dim italic"))
        elif isinstance(content, ToolCall):
            console.print(tool_call_panel(content))
        else:
            console.print(Text(f"[{type(content).__name__}]", style="dim"))
        if message.error_detail:
            console.print(Text(f"error: {visible(message.error_detail)}", style="red"))
    elif isinstance(message, ToolResultMessage):
        console.print(tool_result_panel(message))


def render_records(console: Console, records: Iterable[Any]) -> int:
    """Print a transcript of session records (``SessionRecord`` or bare ``Messages``).

    Messages are printed in order, the way ``conversation_of`` rebuilds them: a message id is
    printed once, in its latest version, and messages named by a ``Retracted`` record are left
    out. A turn that was aborted (an answer stopped with ``StopReason.Aborted``, or a tool call
    interrupted by the abort) is marked :data:`INTERRUPTED` before its usage line, as ``run``
    and ``chat`` mark it when it happens. ``Summary`` records print a usage line, with the cost shown as ``run`` and ``chat``
    show it: ``$0 (local)`` when the turn's assistant messages came from an in-process model
    (``ModelProviders.LlamaCpp``), ``n/a`` when nothing was charged and none of the turn's
    answers had a known price (``CostStatus.Unknown``, e.g. an unknown model behind a base URL),
    the stored USD figure otherwise. Returns the number of messages printed.
    """
    items = list(records)
    hidden: set[str] = set()
    latest: dict[str, Messages] = {}
    for rec in items:
        if isinstance(rec, SessionRecord.Retracted):
            hidden.update(rec.message_ids)
        message = _message_of(rec)
        if message is not None:
            latest[message.id] = message
    printer = RecordPrinter(console)
    for rec in items:
        printer.record(rec, latest, hidden)
    return len(printer.printed)


class RecordPrinter:
    """Prints session records one at a time as :func:`render_records` prints a whole list,
    keeping what a usage line needs from the turn's earlier records (whether its model ran
    in-process, whether an answer was priced, whether it was aborted): ``follow`` prints a
    turn's records as they arrive with one printer, so its usage line says what ``show``'s
    says."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.printed: set[str] = set()  # ids of the messages printed
        self._local = False  # the turn's model ran in-process (its assistant messages say so)
        self._priced = False  # an answer of the turn was priced (its usage cost is not Unknown)
        self._interrupted = False  # the turn was aborted (Ctrl-C, `abort()`)

    def record(
        self, rec: Any, latest: Mapping[str, Messages] | None = None, hidden: Container[str] = ()
    ) -> None:
        """Print ``rec`` (a ``SessionRecord`` or a bare ``Messages``): a message once, as its
        version in ``latest`` (default: itself), unless its id is in ``hidden``; a ``Summary``
        as a usage line."""
        message = _message_of(rec)
        if message is not None:
            self._interrupted = self._interrupted or _interrupted(message)
            if isinstance(message, AssistantMessage):
                self._local = message.provider in LOCAL_PROVIDERS
                self._priced = self._priced or message.usage.cost.status is not CostStatus.Unknown
            if message.id in hidden or message.id in self.printed:
                return
            self.printed.add(message.id)
            _message_lines(self.console, latest.get(message.id, message) if latest else message)
        elif isinstance(rec, SessionRecord.Summary):
            if self._interrupted:
                self.console.print(Text(INTERRUPTED, style="yellow"))
            u = rec.usage
            cost = u.cost_usd if (u.cost_usd or self._priced) else None  # nothing priced: n/a
            line = format_usage(u.input, u.output, cost, u.cache_read, u.cache_write, local=self._local)
            self.console.print(Text(line, style="dim"), soft_wrap=True)
            self._local = self._priced = self._interrupted = False


def _interrupted(message: Messages) -> bool:
    """``message`` shows its turn was aborted: an answer stopped with ``StopReason.Aborted``,
    or a tool call's result saying it was interrupted by the abort."""
    if isinstance(message, AssistantMessage):
        return message.stop_reason == StopReason.ABORTED
    return isinstance(message, ToolResultMessage) and message.error_detail == "interrupted: aborted"


def _message_of(rec: Any) -> Messages | None:
    if isinstance(rec, Messages):
        return rec
    if isinstance(rec, SessionRecord.Conversation):
        message: Messages = rec.message
        return message
    return None
