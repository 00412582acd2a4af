"""The connection pool of a backend's own async clients (``backends/_http/``): a cap on the
requests in flight, requests spread over several httpx clients, connections reused after the
``[DONE]`` event, one TLS context, ``aclose``; all against real loopback servers."""

from __future__ import annotations

import asyncio
import gc
import json
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx2
import pytest

from foundation_ai.backends._gate import SlotGate
from foundation_ai.backends._http import (
    MAX_CONNECTIONS,
    SHARD_CONNECTIONS,
    HttpOptions,
    HttpStreamError,
    astream_events,
    shared_ssl_context,
)
from foundation_ai.backends._openai_chat import openai_chat
from foundation_ai.errors import ConfigurationError
from foundation_ai.types import AssistantMessage, Messages, ModelInteraction, Stream, TextContent


def _chunk(text: str) -> bytes:
    obj = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    obj["choices"] = [{"index": 0, "delta": {"content": text}, "finish_reason": None}]
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


FINISH = (
    b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
    b'"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
)


class Server:
    """A loopback HTTP/1.1 server on the test's event loop (keep-alive, chunked SSE). Each
    request waits until ``hold_until`` requests are open at once (then all go on), so the
    most requests ever open together (``peak``) shows the client's concurrency."""

    def __init__(
        self,
        hold_until: int = 1,
        events: list[bytes] | None = None,
        stall: bool = False,
        cookie: bool = False,
        open_after_done: bool = False,
        requests_per_connection: int | None = None,
        idle_close: float | None = None,
    ) -> None:
        self.hold_until = hold_until
        self.requests_per_connection = requests_per_connection
        """After this many answers on a connection, the next request that arrives on it is
        met by closing the connection unanswered (a keep-alive limit or timeout hit as the
        request was on its way)."""
        self.idle_close = idle_close
        """Seconds a kept-alive connection may stay idle before the server closes it."""
        self.unanswered = 0
        self.stall = stall
        self.open_after_done = open_after_done
        self.cookie = cookie
        self.cookies_seen: list[bytes] = []
        self.events = events if events is not None else [_chunk("hi"), FINISH, b"data: [DONE]\n\n"]
        self.open = 0
        self.peak = 0
        self.requests = 0
        self.connections = 0
        self.closed = 0
        self.release = asyncio.Event()
        self.server: asyncio.Server | None = None
        self.url = ""

    async def __aenter__(self) -> Server:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        self.release.set()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        answered = 0
        try:
            while True:
                try:
                    async with asyncio.timeout(self.idle_close if answered else None):
                        head = await reader.readuntil(b"\r\n\r\n")
                except TimeoutError:
                    return  # idle too long: closed by the server
                except (asyncio.IncompleteReadError, ConnectionError):
                    self.closed += 1  # the client closed the connection
                    return
                if self.requests_per_connection is not None and answered >= self.requests_per_connection:
                    self.unanswered += 1
                    return
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                    elif name.strip().lower() == b"cookie":
                        self.cookies_seen.append(value.strip())
                await reader.readexactly(length)
                self.requests += 1
                self.open += 1
                self.peak = max(self.peak, self.open)
                if self.open >= self.hold_until:
                    self.release.set()
                if self.stall:  # headers and one event, then nothing more
                    one = self.events[0]
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n")
                    writer.write(b"transfer-encoding: chunked\r\n\r\n%x\r\n%s\r\n" % (len(one), one))
                    await writer.drain()
                    await asyncio.Event().wait()
                await self.release.wait()
                body = b"".join(self.events)
                if self.open_after_done:  # every event, [DONE] included, but the body never ends
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n")
                    writer.write(b"transfer-encoding: chunked\r\n\r\n%x\r\n%s\r\n" % (len(body), body))
                    await writer.drain()
                    await asyncio.Event().wait()
                cookie = b"set-cookie: affinity=tenant-a; Path=/\r\n" if self.cookie else b""
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
                    + cookie
                    + b"\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
                )
                await writer.drain()
                self.open -= 1
                answered += 1
        except ConnectionError:
            return
        finally:
            writer.close()


def _content(answer: list[Messages]) -> object:
    last = answer[-1]
    assert isinstance(last, AssistantMessage)
    return last.content


async def _events(opts: HttpOptions, url: str) -> list[str]:
    return [e.data async for e in astream_events(opts, url + "/v1/chat/completions", b"{}", {})]


async def test_no_more_requests_are_in_flight_than_max_connections() -> None:
    async with Server(hold_until=3) as srv:
        opts = HttpOptions(api_key=None, base_url=srv.url, max_connections=3)
        got = await asyncio.gather(*(_events(opts, srv.url) for _ in range(12)))
        await opts.aclose()
    assert srv.peak == 3  # three at once (the server held them until three were open), never four
    assert srv.requests == 12
    assert all(g[-1] == "[DONE]" and len(g) == 3 for g in got)


async def test_requests_beyond_one_client_s_connections_run_at_once_over_more_clients() -> None:
    n = 2 * SHARD_CONNECTIONS + 5
    async with Server(hold_until=n) as srv:
        opts = HttpOptions(api_key=None, base_url=srv.url, max_connections=None)
        got = await asyncio.gather(*(_events(opts, srv.url) for _ in range(n)))
        clients = len(opts.async_pool()._clients)
        await opts.aclose()
    assert srv.peak == n  # all in flight together: none waited for another to finish
    assert clients == -(-n // SHARD_CONNECTIONS)  # SHARD_CONNECTIONS connections per httpx client
    assert all(g[-1] == "[DONE]" for g in got)


async def test_a_request_cancelled_while_waiting_for_a_slot_leaks_no_slot() -> None:
    async with Server(hold_until=2) as srv:  # holds the first request until released
        opts = HttpOptions(api_key=None, base_url=srv.url, max_connections=1)
        first = asyncio.create_task(_events(opts, srv.url))
        while srv.open < 1:
            await asyncio.sleep(0.01)
        waiting = asyncio.create_task(_events(opts, srv.url))
        await asyncio.sleep(0.05)
        assert srv.requests == 1  # the second waits for the only slot
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        srv.release.set()
        assert (await first)[-1] == "[DONE]"
        assert (await _events(opts, srv.url))[-1] == "[DONE]"  # the slot came back
        await opts.aclose()
    assert srv.requests == 2


async def test_cancelling_a_stream_blocked_in_a_read_cancels_it_and_is_no_timeout() -> None:
    async with Server(stall=True) as srv:
        opts = HttpOptions(api_key=None, base_url=srv.url, deadline=60.0)
        seen: list[str] = []

        async def read() -> None:
            async for ev in astream_events(opts, srv.url + "/v1/chat/completions", b"{}", {}):
                seen.append(ev.data)

        task = asyncio.create_task(read())
        while not seen:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)  # now blocked reading the next event
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert task.cancelled()
        await opts.aclose()
    assert len(seen) == 1


async def test_a_stream_ended_by_done_leaves_its_connection_for_the_next_request() -> None:
    async with Server() as srv:
        backend = openai_chat("m", base_url=srv.url)
        ask = ModelInteraction(messages=[Messages.user("hi")])
        first = await backend.agenerate(ask)
        second = await backend.agenerate(ask)
        await backend.aclose()
    assert _content(first) == TextContent("hi") and _content(second) == TextContent("hi")
    assert srv.requests == 2
    assert srv.connections == 1  # the second request reused the first one's connection


async def test_a_server_keeping_the_body_open_after_done_still_gives_the_answer() -> None:
    async with Server(open_after_done=True) as srv:
        backend = openai_chat("m", base_url=srv.url)
        async with asyncio.timeout(30):  # a guard against a hang, not a measurement
            answer = await backend.agenerate(ModelInteraction(messages=[Messages.user("hi")]))
        await backend.aclose()
    assert _content(answer) == TextContent("hi")
    assert srv.requests == 1


async def test_a_kept_alive_connection_the_server_closes_as_the_request_arrives_is_sent_again_on_a_new_one() -> (
    None
):
    # the keep-alive race made certain: every connection takes one request, and the server
    # closes it unanswered when the next one arrives on it; no retries are allowed
    async with Server(requests_per_connection=1) as srv:
        opts = HttpOptions(api_key=None, base_url=srv.url, max_retries=0)
        got = [await _events(opts, srv.url) for _ in range(3)]
        await opts.aclose()
    assert all(g[-1] == "[DONE]" for g in got)
    assert srv.unanswered == 2  # the 2nd and 3rd requests first went out on a dead connection
    assert srv.requests == 3 and srv.connections == 3


def test_a_sync_stream_on_a_connection_the_server_closes_as_the_request_arrives_is_sent_again() -> None:
    from foundation_ai.backends._http import stream_events

    async def serve(ready: Any, stop: asyncio.Event) -> None:
        async with Server(requests_per_connection=1) as srv:
            ready.append(srv)
            await stop.wait()

    loop = asyncio.new_event_loop()
    ready: list[Server] = []
    stop = asyncio.Event()
    t = threading.Thread(target=loop.run_until_complete, args=(serve(ready, stop),), daemon=True)
    t.start()
    while not ready:
        time.sleep(0.01)
    srv = ready[0]
    opts = HttpOptions(api_key=None, base_url=srv.url, max_retries=0)
    try:
        got = [[e.data for e in stream_events(opts, srv.url + "/x", b"{}", {})] for _ in range(2)]
    finally:
        opts.close()
        loop.call_soon_threadsafe(stop.set)
        t.join(10)
    assert all(g[-1] == "[DONE]" for g in got)
    assert srv.unanswered == 1 and srv.connections == 2


async def test_a_server_that_always_closes_unanswered_fails_after_one_immediate_resend() -> None:
    async with Server(requests_per_connection=0) as srv:  # never answers
        opts = HttpOptions(api_key=None, base_url=srv.url, max_retries=0)
        with pytest.raises(HttpStreamError, match="without sending a response"):
            await _events(opts, srv.url)
        await opts.aclose()
    assert srv.unanswered == 2  # the request, then once more at once; no loop


async def test_kept_alive_connections_the_server_closed_while_idle_are_not_reused() -> None:
    async with Server(idle_close=0.05) as srv:
        opts = HttpOptions(api_key=None, base_url=srv.url, max_retries=0)
        first = await _events(opts, srv.url)
        await asyncio.sleep(0.3)  # the server has closed the idle connection by now
        second = await _events(opts, srv.url)
        await opts.aclose()
    assert first[-1] == second[-1] == "[DONE]"
    assert srv.connections == 2 and srv.unanswered == 0


async def test_a_second_round_at_full_capacity_runs_after_a_first_round_cancelled_midway() -> None:
    # round one: as many streams as the pool holds, cancelled at every stage (waiting for the
    # connection, sent, reading); round two: the pool's whole capacity must be usable at once
    # (the server holds every request until all are open), or the round waits past its
    # deadline: a connection leaked by round one would leave a request queued in its shard
    n = 3 * SHARD_CONNECTIONS
    async with Server(stall=True) as slow:
        opts = HttpOptions(api_key=None, base_url=slow.url, max_retries=0, max_connections=n, timeout=5.0)
        tasks = [asyncio.create_task(_events(opts, slow.url)) for _ in range(n)]
        for i, task in enumerate(tasks):
            await asyncio.sleep(0.002 * (i % 4))
            task.cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        assert all(isinstance(r, asyncio.CancelledError) for r in results)
        pool = opts.async_pool()
        assert sum(pool._busy) == 0 and pool.gate is not None and pool.gate._free == n
    async with Server(hold_until=n) as srv:
        opts2 = HttpOptions(api_key=None, base_url=srv.url, max_retries=0, max_connections=n, timeout=5.0)
        for _ in range(2):  # back to back, on the connections the first round left
            srv.release.clear()
            got = await asyncio.gather(*(_events(opts2, srv.url) for _ in range(n)))
            assert all(g[-1] == "[DONE]" for g in got)
        await opts2.aclose()
    await opts.aclose()
    assert srv.peak == n


async def test_aclose_closes_the_kept_alive_connections_and_the_backend_stays_usable() -> None:
    async with Server() as srv:
        backend = openai_chat("m", base_url=srv.url)
        ask = ModelInteraction(messages=[Messages.user("hi")])
        await backend.agenerate(ask)
        await backend.aclose()
        again = await backend.agenerate(ask)
        await backend.aclose()
    assert _content(again) == TextContent("hi")
    assert srv.connections == 2  # aclose dropped the first connection


async def test_a_user_client_keeps_its_own_limits_and_is_not_closed() -> None:
    async with Server(hold_until=4) as srv:
        client = httpx2.AsyncClient()
        opts = HttpOptions(api_key=None, base_url=srv.url, async_client=client, max_connections=1)
        got = await asyncio.gather(*(_events(opts, srv.url) for _ in range(4)))
        await opts.aclose()
        assert not client.is_closed
        await client.aclose()
    assert srv.peak == 4  # max_connections applies to the options' own clients only
    assert all(g[-1] == "[DONE]" for g in got)


async def test_backends_with_the_same_settings_share_their_connections() -> None:
    async with Server() as srv:
        a = openai_chat("m", base_url=srv.url, api_key="sk-tenant-a-0000")
        b = openai_chat("m", base_url=srv.url, api_key="sk-tenant-b-0000")
        ask = ModelInteraction(messages=[Messages.user("hi")])
        await a.agenerate(ask)
        await b.agenerate(ask)
        await a.aclose()  # b still uses the pool: it stays open
        again = await b.agenerate(ask)
        await b.aclose()
    assert _content(again) == TextContent("hi")
    assert srv.requests == 3
    assert srv.connections == 1  # one kept-alive connection served both backends


async def test_a_cookie_set_by_a_response_is_never_sent_with_a_later_request() -> None:
    async with Server(cookie=True) as srv:
        a = openai_chat("m", base_url=srv.url, api_key="sk-tenant-a-0000")
        b = openai_chat("m", base_url=srv.url, api_key="sk-tenant-b-0000")
        ask = ModelInteraction(messages=[Messages.user("hi")])
        await a.agenerate(ask)
        await a.agenerate(ask)
        await b.agenerate(ask)
        await a.aclose()
        await b.aclose()
    assert srv.requests == 3
    assert srv.cookies_seen == []  # pools are shared between backends: no state rides along


def test_every_own_client_uses_the_one_shared_tls_context() -> None:
    a = HttpOptions(api_key=None, base_url="https://a.example")
    b = HttpOptions(api_key=None, base_url="https://b.example")
    ctx = shared_ssl_context()
    for opts in (a, b):
        pool: Any = opts.get_sync_client()._transport._pool  # type: ignore[attr-defined]
        assert pool._ssl_context is ctx
        opts.close()


async def test_every_own_async_client_uses_the_one_shared_tls_context() -> None:
    opts = HttpOptions(api_key=None, base_url="https://a.example")
    client = opts.get_async_client()
    assert client._transport._pool._ssl_context is shared_ssl_context()  # type: ignore[attr-defined]
    await opts.aclose()


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "10"])
def test_max_connections_must_be_a_positive_integer_or_none(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="max_connections"):
        HttpOptions(api_key=None, base_url="http://127.0.0.1:9", max_connections=bad)


@contextmanager
def _server_in_thread(**kw: Any) -> Iterator[Server]:
    """A :class:`Server` on its own event loop in a thread, for the sync (blocking) path."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    async def start() -> Server:
        srv = Server(**kw)
        return await srv.__aenter__()

    srv = asyncio.run_coroutine_threadsafe(start(), loop).result()

    async def stop() -> None:
        await srv.__aexit__()
        handlers = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in handlers:  # e.g. a connection held open after [DONE]
            t.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)

    try:
        yield srv
    finally:
        asyncio.run_coroutine_threadsafe(stop(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


def test_a_sync_stream_ended_by_done_leaves_its_connection_for_the_next_request() -> None:
    with _server_in_thread() as srv:
        backend = openai_chat("m", base_url=srv.url)
        ask = ModelInteraction(messages=[Messages.user("hi")])
        first = backend.generate(ask)
        second = backend.generate(ask)
        backend.close()
    assert _content(first) == TextContent("hi") and _content(second) == TextContent("hi")
    assert srv.requests == 2
    assert srv.connections == 1  # the sync path read past [DONE]: the connection was reused


def test_a_sync_stream_whose_server_keeps_the_body_open_after_done_still_gives_the_answer() -> None:
    with _server_in_thread(open_after_done=True) as srv:
        backend = openai_chat("m", base_url=srv.url)
        ask = ModelInteraction(messages=[Messages.user("hi")])
        first = backend.generate(ask)  # the drain gives up (bounded): that connection is shut
        second = backend.generate(ask)
        backend.close()
    assert _content(first) == TextContent("hi") and _content(second) == TextContent("hi")
    assert srv.requests == 2
    assert srv.connections == 2  # a body never ended: its connection was not reused


@pytest.mark.parametrize("factory", ["openai_chat", "openai_responses", "anthropic"])
def test_every_http_factory_takes_max_connections(factory: str) -> None:
    from foundation_ai import backends

    make = getattr(backends, factory)
    assert (
        make("m", base_url="http://127.0.0.1:9", api_key="k", max_connections=5000).options.max_connections
        == 5000
    )
    assert (
        make("m", base_url="http://127.0.0.1:9", api_key="k", max_connections=None).options.max_connections
        is None
    )
    assert make("m", base_url="http://127.0.0.1:9", api_key="k").options.max_connections == MAX_CONNECTIONS
    with pytest.raises(ConfigurationError, match="max_connections"):
        make("m", base_url="http://127.0.0.1:9", api_key="k", max_connections=0)


async def test_max_connections_given_to_the_factory_caps_the_requests_in_flight() -> None:
    async with Server(hold_until=2) as srv:
        backend = openai_chat("m", base_url=srv.url, max_connections=2)
        ask = ModelInteraction(messages=[Messages.user("hi")])
        answers = await asyncio.gather(*(backend.agenerate(ask) for _ in range(5)))
        await backend.aclose()
    assert all(_content(a) == TextContent("hi") for a in answers)
    assert srv.requests == 5
    assert srv.peak == 2


# the wait for a slot (backends/_gate.py)


async def test_a_request_waiting_for_its_slot_past_first_byte_timeout_fails_with_that_deadline() -> None:
    async with Server(hold_until=2) as srv:  # holds the first request: the only slot stays taken
        patient = HttpOptions(api_key=None, base_url=srv.url, max_connections=1)
        hasty = HttpOptions(
            api_key=None, base_url=srv.url, max_connections=1, first_byte_timeout=0.2, max_retries=0
        )
        first = asyncio.create_task(_events(patient, srv.url))  # same settings: the same pool
        while srv.open < 1:
            await asyncio.sleep(0.01)
        with pytest.raises(HttpStreamError, match="first_byte_timeout"):
            await _events(hasty, srv.url)
        assert srv.requests == 1  # it never got a slot: the wait counted toward its deadline
        srv.release.set()
        assert (await first)[-1] == "[DONE]"
        assert (await _events(patient, srv.url))[-1] == "[DONE]"  # no slot was lost
        await patient.aclose()
        await hasty.aclose()
    assert srv.requests == 2


async def test_the_slot_queue_is_first_come_first_served_and_no_one_jumps_it() -> None:
    gate = SlotGate(1)
    loop = asyncio.get_running_loop()
    assert gate.try_take()
    order: list[int] = []

    async def waiter(k: int) -> None:
        await gate.wait(loop, None)
        order.append(k)
        gate.release()

    tasks = [asyncio.create_task(waiter(k)) for k in range(5)]
    await asyncio.sleep(0)
    assert gate.waiting == 5
    gate.release()
    assert not gate.try_take()  # the freed slot went to the first waiter, not to a newcomer
    await asyncio.gather(*tasks)
    assert order == [0, 1, 2, 3, 4]
    assert gate.try_take() and not gate.try_take()  # one slot, back once everyone is done


async def test_a_slot_handed_to_a_waiter_cancelled_before_it_ran_goes_to_the_next() -> None:
    gate = SlotGate(1)
    loop = asyncio.get_running_loop()
    assert gate.try_take()
    got: list[str] = []

    async def waiter(name: str) -> None:
        fut = gate.wait(loop, None)
        try:
            await fut
        except BaseException:
            gate.give_up(fut)
            raise
        got.append(name)

    a = asyncio.create_task(waiter("a"))
    b = asyncio.create_task(waiter("b"))
    await asyncio.sleep(0)
    gate.release()  # handed to a ...
    a.cancel()  # ... which is cancelled before it runs
    with pytest.raises(asyncio.CancelledError):
        await a
    await b
    assert got == ["b"]
    assert gate.waiting == 0 and not gate.try_take()  # b holds the only slot


async def test_a_waiter_whose_due_time_passes_fails_alone_and_the_others_keep_their_place() -> None:
    gate = SlotGate(1)
    loop = asyncio.get_running_loop()
    assert gate.try_take()
    early = gate.wait(loop, None)
    due = gate.wait(loop, loop.time() + 0.05)
    late = gate.wait(loop, loop.time() + 60)
    with pytest.raises(TimeoutError):
        await due
    gate.give_up(due)
    assert gate.waiting == 2 and not early.done() and not late.done()
    gate.release()
    assert early.done() and not late.done()  # the order is kept
    gate.release()
    assert late.done()
    gate.release()
    assert gate.waiting == 0 and gate.try_take()


async def test_waiting_requests_share_one_timer_whatever_their_number() -> None:
    def timers() -> int:
        gc.collect()
        return sum(isinstance(o, asyncio.TimerHandle) and not o.cancelled() for o in gc.get_objects())

    gate = SlotGate(1)
    loop = asyncio.get_running_loop()
    assert gate.try_take()
    before = timers()
    futs = [gate.wait(loop, loop.time() + 60 + k) for k in range(200)]
    assert timers() - before == 1  # one timer for the queue, not one per waiter
    for f in futs:
        f.cancel()
        gate.give_up(f)
    assert gate.waiting == 0
    assert timers() == before  # an empty queue keeps no timer running


async def test_acquire_waits_for_a_released_slot_and_a_cancelled_acquire_leaks_none() -> None:
    gate = SlotGate(1)
    await gate.acquire()
    second = asyncio.create_task(gate.acquire())
    third = asyncio.create_task(gate.acquire())
    await asyncio.sleep(0)
    assert not second.done() and gate.waiting == 2
    third.cancel()
    with pytest.raises(asyncio.CancelledError):
        await third
    assert gate.waiting == 1
    gate.release()
    await second  # the released slot went to the waiter
    gate.release()
    assert gate.waiting == 0 and gate.try_take()


async def test_finished_streams_leave_no_cyclic_garbage_for_the_collector() -> None:
    # each request's objects (httpx response, parser, deadlines, slot) are freed by reference
    # counting as the stream ends: thousands of sessions add no work to full collections
    async with Server() as srv:
        backend = openai_chat("m", base_url=srv.url)
        ask = ModelInteraction(messages=[Messages.user("hi")])
        await backend.agenerate(ask)  # the pool and its first connection
        gc.collect()
        gc.disable()
        try:
            for _ in range(5):
                items = [item async for item in backend.astream(ask)]
            found = gc.collect()
        finally:
            gc.enable()
        await backend.aclose()
    assert found == 0
    assert _content([i.value for i in items if isinstance(i, Stream.Next)]) == TextContent("hi")


def test_the_items_of_a_streamed_text_chunk_are_not_tracked_by_the_collector() -> None:
    from foundation_ai.backends._http import SseEvent
    from foundation_ai.backends._openai_chat_stream import ChatStreamParser
    from foundation_ai.types import ModelId

    parser = ChatStreamParser(ModelId.Name("m"), None, ())
    out = parser.feed(SseEvent("message", _chunk("hi")[len(b"data: ") :].decode().strip()))
    assert out is not None and len(out) == 1
    item = out[0]
    assert not gc.is_tracked(parser)
    assert not gc.is_tracked(item) and not gc.is_tracked(item.value)
    assert not gc.is_tracked(item.value.content)


def test_closing_a_blocking_session_closes_the_connections_it_kept_alive() -> None:
    from foundation_ai.agentic import AgentSession, InMemorySessionStore

    with _server_in_thread() as srv:
        session = (
            AgentSession.builder(openai_chat("m", base_url=srv.url, api_key="k"))
            .with_store(InMemorySessionStore())
            .build()
        )
        assert session.run_turn("hi").text() == "hi"
        assert session.run_turn("again").text() == "hi"
        assert srv.connections == 1 and srv.closed == 0, "kept alive between turns"
        with warnings.catch_warnings():
            warnings.simplefilter("error", ResourceWarning)
            session.close()
            gc.collect()
        deadline = time.monotonic() + 10
        while srv.closed < srv.connections and time.monotonic() < deadline:
            time.sleep(0.01)
        assert srv.closed == srv.connections == 1, "the session's close closed its connection"
