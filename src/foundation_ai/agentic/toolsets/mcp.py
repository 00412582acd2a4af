"""MCP servers as tool sources, with the official ``mcp`` SDK (``pip install 'foundation-ai[mcp]'``;
without it, building a source raises ``ConfigurationError`` with that hint at once).

    from foundation_ai.agentic.toolsets.mcp import MCPServerTools

    server = MCPServerTools.stdio(["python", "my_server.py"])       # a subprocess over stdio
    web = MCPServerTools.http("http://127.0.0.1:8000/mcp")           # streamable HTTP
    agent = AgentSession.builder(model).with_tools(server.list_tools()).build()
    # or discover them: ToolShed().tools(server.list_tools())

Each tool of the server becomes an ordinary tool: its ``inputSchema`` is the tool's ``Args``, so
calls are validated like any other before they are sent; the server's answer becomes the tool
result (text parts joined; ``isError`` answers, a timeout, a protocol error and a server that
crashed or closed the connection become error results). A server that stopped is started again
(stdio) or reconnected (HTTP) on the next call. A streamable HTTP server that lost the session
(HTTP 404 on the session id, e.g. after a restart on the same port: the MCP specification,
https://modelcontextprotocol.io/specification/2025-06-18/basic/transports#session-management,
says to start a new session) is initialized again once and the request retried once; a second
loss is an error result naming the server. A paged tool list (``nextCursor``) is read to its
end. An input schema is made self-contained (:func:`~foundation_ai.schema.refs.self_contained`):
a ``$ref`` to another document is never fetched, and such a tool is refused, visibly
(:attr:`MCPServerTools.refused`, a warning in the log). A message the SDK cannot parse fails
the request at once (not at its timeout) with the server and the cause named; an answer larger
than ``max_result_bytes`` is an error result. A stdio server that fails to start (exits, or
never completes the handshake) is reported with the last lines it wrote to stderr. Names that providers would refuse are made safe
(``[a-zA-Z0-9_-]``, at most 64 characters; an optional ``prefix`` keeps servers apart) and
unique (:func:`tool_names`: ``get.item`` beside ``get_item`` is offered as ``get_item_2``); the
call goes out under the server's own name.

The connection lives on one background event loop thread shared by every MCP source of the
process, so tools work whatever loop (or thread) runs the session; a call cancelled by a steer
or an abort is cancelled on the server connection too. Protocol: https://modelcontextprotocol.io
; SDK: https://github.com/modelcontextprotocol/python-sdk . See ``docs/tools.md``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import os
import re
import sys
import threading
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TextIO

from ...errors import ConfigurationError, FoundationAIError
from ...schema.refs import self_contained
from ...types import Args, Tool, ToolDefinition

__all__ = ["MCPServerTools", "MCPTool", "MCPToolError", "MCPToolRefused", "tool_names", "trace_meta"]

log = logging.getLogger(__name__)

DEFAULT_CALL_TIMEOUT = 60.0
"""Seconds an MCP tool call may take before it becomes an error result."""
DEFAULT_CONNECT_TIMEOUT = 30.0
"""Seconds to start (or reach) a server and complete the MCP handshake."""
DEFAULT_MAX_RESULT_BYTES = 8 * 1024 * 1024
"""Bytes an MCP answer may have (8 MiB; its text once decoded, and the HTTP body on the
streamable HTTP transport, cut as soon as it passes): a larger one is an error result."""
MAX_TOOL_PAGES = 1000
"""Pages of a paged ``tools/list`` read at most (a server whose cursors never end is an error)."""
STDERR_TAIL_LINES = 8
"""Lines of a stdio server's stderr quoted when it fails to start (each cut to 300 characters)."""
_STDERR_KEEP = 8192
"""Bytes of a stdio server's stderr kept in memory (the most recent ones)."""

_BAD = re.compile(r"[^a-zA-Z0-9_-]")


class MCPToolError(FoundationAIError):
    """An MCP tool call failed: the server answered ``isError``, timed out, refused the request,
    or stopped. The agent loop reports it to the model as an error result.

    Attributes:
        transient: True when the server could not be reached, stopped or timed out (a retry
            may succeed; see ``toolsets.policy.is_transient``).
    """

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


class MCPToolRefused(MCPToolError):
    """A tool of an MCP server that is not offered to the model: its input schema refers to
    another document (never fetched) or cannot be used.

    Attributes:
        server: the server's label.
        tool: the tool's name on the server.
    """

    def __init__(self, server: str, tool: str, why: str) -> None:
        super().__init__(f"the MCP server {server!r}: tool {tool!r} is refused: {why}")
        self.server = server
        self.tool = tool


class _SessionGone(Exception):
    """The server does not know our session any more (HTTP 404 on the session id)."""


class _Background:
    """One daemon thread running an event loop for every MCP connection of the process."""

    _lock = threading.Lock()
    _instance: _Background | None = None

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="foundation-ai-mcp", daemon=True)
        self.thread.start()

    @classmethod
    def get(cls) -> _Background:
        with cls._lock:
            if cls._instance is None:
                cls._instance = _Background()
            return cls._instance

    def submit(self, coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)


def _require_mcp() -> None:
    """Raises ``ConfigurationError`` with the install hint when the ``mcp`` SDK is missing."""
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise ConfigurationError(
            f"MCP servers need the 'mcp' package: pip install 'foundation-ai[mcp]' ({exc})"
        ) from None


class _StderrTail:
    """A pipe given to a stdio server as its stderr; a daemon thread drains it and keeps the
    last :data:`_STDERR_KEEP` bytes, quoted when the server fails to start."""

    def __init__(self) -> None:
        read_fd, write_fd = os.pipe()
        self.writer: TextIO = open(write_fd, "w")  # noqa: SIM115 (closed by close_writer)
        self._buf = bytearray()
        self._lock = threading.Lock()
        self._thread = threading.Thread(
            target=self._drain, args=(read_fd,), name="foundation-ai-mcp-stderr", daemon=True
        )
        self._thread.start()

    def _drain(self, fd: int) -> None:
        try:
            while True:
                chunk = os.read(fd, 4096)
                if not chunk:
                    return
                with self._lock:
                    self._buf += chunk
                    if len(self._buf) > _STDERR_KEEP:
                        del self._buf[: len(self._buf) - _STDERR_KEEP]
        except OSError:
            return
        finally:
            os.close(fd)

    def close_writer(self) -> None:
        """Close this process's end of the pipe (the thread ends when the server's is closed)."""
        with contextlib.suppress(OSError):
            self.writer.close()

    def tail(self, wait: float = 1.0) -> str:
        """The last :data:`STDERR_TAIL_LINES` non-blank lines, after waiting up to ``wait``
        seconds for the stream to end (the server has exited by then); control characters are
        shown as spaces."""
        self.close_writer()
        self._thread.join(wait)
        with self._lock:
            text = self._buf.decode("utf-8", errors="replace")
        lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
        clean = ["".join(c if c.isprintable() else " " for c in ln)[:300] for ln in lines]
        return "\n".join(clean[-STDERR_TAIL_LINES:])


def _with_tail(message: str, tail: _StderrTail | None) -> str:
    """``message`` followed by the server's last stderr lines, when there are any."""
    if tail is None:
        return message
    text = tail.tail()
    if not text:
        return message
    return message + "; its stderr ended with:\n" + "\n".join("  " + ln for ln in text.splitlines())


def _joined(name: str, prefix: str | None) -> str:
    """``prefix_name`` (no second ``_`` after a prefix ending in ``_`` or ``-``), or ``name``."""
    if not prefix:
        return name
    return f"{prefix}{name}" if prefix[-1] in "_-" else f"{prefix}_{name}"


def tool_names(names: Sequence[str], prefix: str | None = None) -> list[str]:
    """The names the model sees for a server's tools ``names`` (in order): each made safe for
    every provider (``[a-zA-Z0-9_-]``, at most 64 characters, ``prefix_`` in front) and unique.
    A name that is safe as it is keeps it; one whose safe form is taken (``get.item`` beside
    ``get_item``, or two long names cut to the same 64 characters) gets ``_2``, ``_3``, ... so
    no tool of the server hides another."""
    full = [_joined(n, prefix) for n in names]
    safe = [_BAD.sub("_", f)[:64] or "tool" for f in full]
    kept = {s for f, s in zip(full, safe, strict=True) if s == f}  # safe as they are
    used: set[str] = set()
    out: list[str] = []
    for f, s in zip(full, safe, strict=True):
        if s in used or (s in kept and s != f):
            k = 2
            while (c := f"{s[: 63 - len(str(k))]}_{k}") in used or c in kept:
                k += 1
            s = c
        used.add(s)
        out.append(s)
    return out


def trace_meta() -> dict[str, str] | None:
    """The current OpenTelemetry trace context as W3C Trace Context fields (``traceparent``,
    ``tracestate``) for a request's ``params._meta``, so spans the MCP server opens join the
    caller's trace (OpenTelemetry semantic conventions for MCP: context propagation through
    ``params._meta``, https://opentelemetry.io/docs/specs/semconv/gen-ai/mcp/); ``None`` when
    OpenTelemetry is not in use in this process (never imported here) or no span is current."""
    if sys.modules.get("opentelemetry.trace") is None:
        return None
    from opentelemetry import propagate

    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier or None


class MCPServerTools:
    """The tools of one MCP server. Build with :meth:`stdio` or :meth:`http`.

    Attributes:
        name: a label for the server (``category`` of its tools is ``"mcp:<name>"``).
        starts: how many times a connection was opened (restarts = ``starts - 1``).
        refused: the tools not offered (external ``$ref``, unusable schema), by remote name.
        max_result_bytes: the largest answer accepted (bytes).
    """

    def __init__(
        self,
        *,
        transport: str,
        command: Sequence[str] = (),
        env: dict[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        url: str | None = None,
        headers: dict[str, str] | None = None,
        name: str | None = None,
        prefix: str | None = None,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        errlog: TextIO | None = None,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
    ) -> None:
        _require_mcp()
        if not isinstance(max_result_bytes, int) or max_result_bytes < 1:
            raise ConfigurationError(f"max_result_bytes must be a positive integer, got {max_result_bytes!r}")
        self.max_result_bytes = max_result_bytes
        self.refused: dict[str, MCPToolRefused] = {}
        """The server's tools not offered, by their name on the server (see :class:`MCPToolRefused`)."""
        self._fault: asyncio.Future[BaseException] | None = None
        self.transport = transport
        self.command = list(command)
        self.env = env
        self.cwd = cwd
        self.url = url
        self.headers = headers
        self.name = name or (os.path.basename(self.command[0]) if self.command else (url or "mcp"))
        self.prefix = prefix
        self.call_timeout = call_timeout
        self.connect_timeout = connect_timeout
        self.errlog = errlog
        self.starts = 0
        self._session: Any = None
        self._task: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._connecting: asyncio.Lock | None = None
        self._bg = _Background.get()
        self._stderr: _StderrTail | None = None

    @classmethod
    def stdio(
        cls,
        command: str | Sequence[str],
        args: Sequence[str] = (),
        *,
        env: dict[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        name: str | None = None,
        prefix: str | None = None,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        errlog: TextIO | None = None,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
    ) -> MCPServerTools:
        """A server started as a subprocess, speaking MCP over its stdin/stdout.

        Args:
            command: the program (a string, split on whitespace when ``args`` is empty, or a
                list: program then arguments).
            args: more arguments.
            env: the environment (default: the SDK's safe default variables).
            cwd: the working directory.
            name: a label (default: the program's name).
            prefix: prepended to tool names (``prefix_tool``).
            call_timeout: seconds per call.
            connect_timeout: seconds to start and initialize.
            errlog: a file (with a ``fileno``) where the server's stderr goes; by default it is
                read into memory (the last 8 KiB are kept) and its last lines are quoted when the
                server fails to start.
            max_result_bytes: the largest answer accepted, in bytes (default 8 MiB).

        Raises:
            ConfigurationError: an empty command, or the ``mcp`` package is not installed
                (``pip install 'foundation-ai[mcp]'``).
        """
        parts = (command.split() if not args else [command]) if isinstance(command, str) else list(command)
        parts += list(args)
        if not parts:
            raise ConfigurationError("an MCP stdio server needs a command")
        return cls(
            transport="stdio",
            command=parts,
            env=env,
            cwd=cwd,
            name=name,
            prefix=prefix,
            call_timeout=call_timeout,
            connect_timeout=connect_timeout,
            errlog=errlog,
            max_result_bytes=max_result_bytes,
        )

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        name: str | None = None,
        prefix: str | None = None,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
    ) -> MCPServerTools:
        """A server reached over MCP's streamable HTTP transport at ``url`` (e.g.
        ``http://127.0.0.1:8000/mcp``); ``headers`` are sent with every request; an HTTP body
        past ``max_result_bytes`` is cut as it arrives.

        Raises:
            ConfigurationError: the ``mcp`` package is not installed
                (``pip install 'foundation-ai[mcp]'``).
        """
        return cls(
            transport="http",
            url=url,
            headers=headers,
            name=name,
            prefix=prefix,
            call_timeout=call_timeout,
            connect_timeout=connect_timeout,
            max_result_bytes=max_result_bytes,
        )

    def __repr__(self) -> str:
        where = " ".join(self.command) if self.transport == "stdio" else self.url
        return f"MCPServerTools({self.transport}: {where!r})"

    # -- the connection (runs on the background loop) ---------------------------------------------

    async def _run(self, ready: asyncio.Future[Any], tail: _StderrTail | None) -> None:
        stop = self._stop
        assert stop is not None
        fault: asyncio.Future[BaseException] = asyncio.get_running_loop().create_future()
        self._fault = fault

        async def on_message(message: Any) -> None:
            """The SDK's ``message_handler``: a transport exception (a message it could not
            parse) fails the connection at once instead of leaving the request to time out."""
            if isinstance(message, Exception) and not fault.done():
                fault.set_result(message)
                if not ready.done():
                    ready.set_exception(self._garbled(message))

        try:
            import mcp

            async with contextlib.AsyncExitStack() as stack:
                if self.transport == "stdio":
                    from mcp.client.stdio import StdioServerParameters, stdio_client

                    params = StdioServerParameters(
                        command=self.command[0],
                        args=self.command[1:],
                        env=self.env,
                        cwd=None if self.cwd is None else os.fspath(self.cwd),
                    )
                    errlog = self.errlog if tail is None else tail.writer
                    assert errlog is not None
                    read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
                else:
                    from mcp.client.streamable_http import streamable_http_client

                    client = None
                    if self.headers:
                        from mcp.shared._httpx_utils import create_mcp_http_client

                        client = create_mcp_http_client(headers=self.headers)
                        await stack.enter_async_context(client)
                    read, write = await stack.enter_async_context(
                        streamable_http_client(
                            self.url or "", http_client=client, max_sse_event_size=self.max_result_bytes
                        )
                    )
                session = await stack.enter_async_context(
                    mcp.ClientSession(read, write, message_handler=on_message)
                )
                await session.initialize()
                self._session = session
                if not ready.done():
                    ready.set_result(session)
                await stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(repr(exc)))
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self._session = None
            if tail is not None:  # the server is gone: its stderr ends when it has exited
                tail.close_writer()

    def _garbled(self, exc: BaseException) -> MCPToolError:
        return MCPToolError(
            f"the MCP server {self.name!r} sent a message that is not valid JSON-RPC ({_describe(exc)[:300]}); "
            "the connection was closed (it is opened again on the next call)"
        )

    async def _ensure(self) -> Any:
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self._session is not None and self._task is not None and not self._task.done():
                return self._session
            await self._disconnect()
            self._stop = asyncio.Event()
            ready: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            self.starts += 1
            tail = _StderrTail() if self.transport == "stdio" and self.errlog is None else None
            self._stderr = tail
            self._task = asyncio.ensure_future(self._run(ready, tail))
            try:
                return await asyncio.wait_for(asyncio.shield(ready), self.connect_timeout)
            except TimeoutError:
                await self._disconnect()
                message = await self._quoted(
                    f"the MCP server {self.name!r} did not complete its handshake within {self.connect_timeout:g} s",
                    tail,
                )
                raise MCPToolError(message, transient=True) from None
            except MCPToolError:
                await self._disconnect()
                raise
            except Exception as exc:
                await self._disconnect()
                message = await self._quoted(
                    f"could not start the MCP server {self.name!r}: {_describe(exc)}", tail
                )
                raise MCPToolError(message) from None

    @staticmethod
    async def _quoted(message: str, tail: _StderrTail | None) -> str:
        """``message`` with the stderr tail, read off the event loop (it may wait up to 1 s)."""
        return await asyncio.get_running_loop().run_in_executor(None, _with_tail, message, tail)

    async def _disconnect(self) -> None:
        task, self._task = self._task, None
        self._session = None
        if task is None:
            return
        if self._stop is not None:
            self._stop.set()
        try:
            await asyncio.wait_for(task, 5.0)
        except BaseException:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    async def _request(self, what: str, send: Callable[[Any], Coroutine[Any, Any, Any]]) -> Any:
        """``send(session)`` on a live connection: a lost session (:class:`_SessionGone`) is
        initialized again and the request sent once more; a second loss is an error naming the
        server.

        Raises:
            MCPToolError: see :meth:`_once`.
        """
        try:
            return await self._once(what, send)
        except _SessionGone as first:
            log.info("MCP server %s lost the session (%s): initializing a new one", self.name, first)
            await self._disconnect()
        try:
            return await self._once(what, send)
        except _SessionGone as again:
            await self._disconnect()
            raise MCPToolError(
                f"the MCP server {self.name!r} lost the session again after a new one was initialized ({again});"
                f" {what} was not run",
                transient=True,
            ) from None

    async def _once(self, what: str, send: Callable[[Any], Coroutine[Any, Any, Any]]) -> Any:
        from mcp.shared.exceptions import MCPError

        session = await self._ensure()
        task, fault = self._task, self._fault
        assert task is not None and fault is not None
        call = asyncio.ensure_future(send(session))  # a task: it runs in a copy of this context
        try:
            done, _ = await asyncio.wait({call, task, fault}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            call.cancel()
            raise
        if call not in done:
            call.cancel()
            await self._disconnect()
            if fault.done():
                raise self._garbled(fault.result())
            raise MCPToolError(
                f"the MCP server {self.name!r} stopped during {what}; it will be restarted on the next call",
                transient=True,
            )
        try:
            return call.result()
        except MCPError as exc:
            raise await self._mapped(exc, what) from None
        except MCPToolError:
            raise
        except Exception as exc:
            await self._disconnect()
            raise MCPToolError(
                f"the MCP server {self.name!r} failed ({_describe(exc)}); it will be restarted on the next call",
                transient=True,
            ) from None

    async def _mapped(self, exc: BaseException, what: str) -> BaseException:
        """The error an ``MCPError`` of ``what`` becomes (a lost session: :class:`_SessionGone`)."""
        code = getattr(getattr(exc, "error", None), "code", None)
        if code is None:
            code = getattr(exc, "code", None)
        text = str(exc)
        lower = text.lower()
        if code == _INVALID_REQUEST and "session" in lower:
            return _SessionGone(text)
        if _TOO_LARGE in lower:  # the SDK's SSE reader stopped at max_sse_event_size
            await self._disconnect()
            return MCPToolError(
                f"the MCP server {self.name!r} answered more than max_result_bytes ({self.max_result_bytes:,} bytes);"
                f" the answer was dropped ({text[:200]})"
            )
        if code == _CONNECTION_CLOSED or "connection closed" in lower:
            await self._disconnect()
            return MCPToolError(
                f"the MCP server {self.name!r} closed the connection ({exc}); it will be restarted on the next call",
                transient=True,
            )
        if code == _REQUEST_TIMEOUT or "timed out" in lower:
            return MCPToolError(
                f"the MCP call timed out after {self.call_timeout:g} s ({exc})", transient=True
            )
        if code == _PARSE_ERROR:
            await self._disconnect()
            return MCPToolError(
                f"the MCP server {self.name!r} sent an answer that cannot be parsed: {text[:300]}"
            )
        return MCPToolError(f"the MCP server {self.name!r} refused {what}: {exc}")

    async def _list(self) -> list[Any]:
        from mcp.types import PaginatedRequestParams

        tools: list[Any] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(MAX_TOOL_PAGES):
            params = None if cursor is None else PaginatedRequestParams(cursor=cursor)
            page = await self._request("the tool list", functools.partial(_list_page, params=params))
            tools += page.tools
            cursor = page.next_cursor or None
            if cursor is None:
                return tools
            if cursor in seen:
                raise MCPToolError(f"the MCP server {self.name!r} sent the tool-list cursor {cursor!r} twice")
            seen.add(cursor)
        raise MCPToolError(f"the MCP server {self.name!r} listed tools over more than {MAX_TOOL_PAGES} pages")

    async def _call(self, remote: str, arguments: dict[str, Any]) -> Any:
        meta = trace_meta()  # the tool span's context, for a server that joins the trace
        extra: dict[str, Any] = {"meta": meta} if meta else {}

        def send(session: Any) -> Coroutine[Any, Any, Any]:
            return session.call_tool(remote, arguments, read_timeout_seconds=self.call_timeout, **extra)  # type: ignore[no-any-return]

        return await self._request(f"the call of {remote!r}", send)

    # -- public API ------------------------------------------------------------------------------

    def _wait(self, coro: Coroutine[Any, Any, Any], timeout: float | None) -> Any:
        if threading.current_thread() is self._bg.thread:
            raise FoundationAIError("blocking MCP calls cannot run on the MCP background loop")
        return self._bg.submit(coro).result(timeout)

    async def alist_tools(self) -> list[MCPTool]:
        """The server's tools as agent tools (connects, or starts the server, when needed); a
        tool whose input schema refers to another document or cannot be used is left out and
        recorded in :attr:`refused` (a warning is logged).

        Raises:
            MCPToolError: the server could not be started or reached.
        """
        raw = await asyncio.wrap_future(self._bg.submit(self._list()))
        out: list[MCPTool] = []
        self.refused = {}
        for t, name in zip(raw, tool_names([t.name for t in raw], self.prefix), strict=True):
            if name != _joined(t.name, self.prefix):
                log.info("MCP server %s: tool %r is offered as %r", self.name, t.name, name)
            try:  # self-contained first: a remote $ref is refused here, never fetched
                schema = self_contained(dict(t.input_schema or {"type": "object"}), where="inputSchema")
                args = Args.from_value(schema)
            except ConfigurationError as exc:
                refusal = MCPToolRefused(self.name, t.name, str(exc))
                self.refused[t.name] = refusal
                log.warning("%s; the tool is not offered", refusal)
                continue
            definition = ToolDefinition(
                name=name, description=t.description or "", arguments=args, category=f"mcp:{self.name}"
            )
            out.append(MCPTool(self, t.name, definition))
        return out

    def list_tools(self) -> list[MCPTool]:
        """Blocking :meth:`alist_tools` (any thread; inside a running event loop it blocks that
        loop until the server answers — prefer ``await alist_tools()`` there)."""
        return self._wait(self.alist_tools(), self.connect_timeout + 30.0)  # type: ignore[no-any-return]

    async def acall(self, name: str, arguments: dict[str, Any]) -> Any:
        """Call the server's tool ``name`` (its own name) and return the SDK's ``CallToolResult``.

        Raises:
            MCPToolError: the server refused, timed out or stopped (restarted on the next call).
        """
        return await asyncio.wrap_future(self._bg.submit(self._call(name, arguments)))

    async def aclose(self) -> None:
        """Close the connection (a stdio server is stopped); a later call reconnects."""
        await asyncio.wrap_future(self._bg.submit(self._disconnect()))

    def close(self) -> None:
        """Blocking :meth:`aclose`."""
        self._wait(self._disconnect(), 15.0)

    def __enter__(self) -> MCPServerTools:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_CONNECTION_CLOSED = -32000
"""``mcp_types.CONNECTION_CLOSED``."""
_REQUEST_TIMEOUT = -32001
"""``mcp_types.REQUEST_TIMEOUT``."""
_INVALID_REQUEST = -32600
"""``mcp_types.INVALID_REQUEST``: with "Session terminated" / "Session not found", a lost session."""
_PARSE_ERROR = -32700
"""``mcp_types.PARSE_ERROR``: the SDK could not parse the server's answer."""
_TOO_LARGE = "byte limit"
"""In the SDK's error for an SSE event past ``max_sse_event_size`` (httpx2: "Server-sent event
exceeded the N byte limit.")."""


def _list_page(session: Any, *, params: Any) -> Coroutine[Any, Any, Any]:
    """One ``tools/list`` request (``params``: the page's cursor, or ``None``)."""
    return session.list_tools(params=params)  # type: ignore[no-any-return]


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _describe(exc.exceptions[0])
    return f"{type(exc).__name__}: {exc}"


class MCPTool:
    """One tool of an MCP server, as an agent tool (see the module docstring).

    Attributes:
        source: the :class:`MCPServerTools` it belongs to.
        remote_name: the tool's name on the server.
        definition: its ``ToolDefinition`` (safe name, description, ``inputSchema`` as ``Args``).
    """

    timeout: float | None = None
    sequential = False

    def __init__(self, source: MCPServerTools, remote_name: str, definition: ToolDefinition) -> None:
        self.source = source
        self.remote_name = remote_name
        self.definition = definition

    def __repr__(self) -> str:
        return f"MCPTool({self.definition.name!r} of {self.source.name!r})"

    @property
    def declaration(self) -> Tool:
        """``Tool.SingleCommand(self.definition)``."""
        return Tool.SingleCommand(self.definition)

    async def run(self, definition: ToolDefinition, arguments: dict[str, Any]) -> str:
        """Call the tool on its server; the text of the answer.

        Raises:
            MCPToolError: an ``isError`` answer (its text), an answer over ``max_result_bytes``,
                or see :meth:`MCPServerTools.acall`.
        """
        result = await self.source.acall(self.remote_name, arguments)
        text = _result_text(result)
        size = len(text.encode("utf-8", "replace"))
        cap = self.source.max_result_bytes
        if size > cap:
            raise MCPToolError(
                f"the MCP tool {self.remote_name!r} of {self.source.name!r} answered {size:,} bytes, "
                f"more than max_result_bytes ({cap:,}); the answer was dropped"
            )
        if getattr(result, "is_error", False):
            raise MCPToolError(text or f"the MCP tool {self.remote_name!r} failed")
        return text


def _result_text(result: Any) -> str:
    parts: list[str] = []
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            parts.append(
                f"[{kind} {getattr(block, 'mime_type', '')}, {len(getattr(block, 'data', '') or '')} base64 characters]"
            )
        elif kind == "resource_link":
            parts.append(f"[resource {getattr(block, 'uri', '')}]")
        elif kind == "resource":
            res = getattr(block, "resource", None)
            parts.append(getattr(res, "text", None) or f"[resource {getattr(res, 'uri', '')}]")
    if not parts and getattr(result, "structured_content", None) is not None:
        import msgspec

        return msgspec.json.encode(result.structured_content).decode()
    return "\n".join(parts)
