"""The /metrics endpoint's bounds: a slow, hostile or greedy client cannot stall the loop.

Each test runs a real ``MetricsServer`` on a loopback port and talks raw TCP to
it; short timeouts keep the tests quick (the daemon uses the defaults).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from meshsub.runtime.metricsserver import MAX_REQUEST, MetricsServer

BODY = "meshsub_uptime_seconds 1\n"


@pytest.fixture
async def server() -> AsyncIterator[MetricsServer]:
    srv = MetricsServer("127.0.0.1", 0, lambda: BODY, content_type="text/plain; version=0.0.4",
                        max_clients=3, request_timeout_s=0.3, write_timeout_s=0.3)
    await srv.start()
    try:
        yield srv
    finally:
        await srv.stop()


def port(srv: MetricsServer) -> int:
    return int(srv.address.rsplit(":", 1)[1])


async def exchange(srv: MetricsServer, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port(srv))
    writer.write(request)
    try:
        return await asyncio.wait_for(reader.read(), 5.0)
    finally:
        writer.close()


async def test_get_metrics_answers_the_exposition(server: MetricsServer) -> None:
    reply = await exchange(server, b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\n\r\n")
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"Content-Type: text/plain; version=0.0.4\r\n" in head
    assert f"Content-Length: {len(BODY)}".encode() in head
    assert body == BODY.encode()
    head_only = await exchange(server, b"HEAD /metrics HTTP/1.0\r\n\r\n")
    assert head_only.startswith(b"HTTP/1.1 200 OK") and head_only.endswith(b"\r\n\r\n")
    assert server.counters["scrapes"] == 2


@pytest.mark.parametrize("request_bytes,code,reason", [
    (b"POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc", b"405", "method"),
    (b"GET / HTTP/1.1\r\n\r\n", b"404", "not_found"),
    (b"\x16\x03\x01 hello TLS\r\n\r\n", b"400", "bad_request"),
    (b"GET /metrics\r\n\r\n", b"400", "bad_request"),
])
async def test_other_requests_get_one_clear_answer(
        server: MetricsServer, request_bytes: bytes, code: bytes, reason: str) -> None:
    reply = await exchange(server, request_bytes)
    assert reply.split(b" ")[1] == code
    assert reply.count(b"\n") <= 8 and b"Connection: close" in reply
    assert server.counters[f"refused:{reason}"] == 1
    assert server.counters["scrapes"] == 0


async def test_an_oversized_request_is_refused_without_buffering_it(
        server: MetricsServer) -> None:
    huge = b"GET /metrics HTTP/1.1\r\nX-Junk: " + b"a" * (4 * MAX_REQUEST) + b"\r\n\r\n"
    reader, writer = await asyncio.open_connection("127.0.0.1", port(server))
    writer.write(huge)
    with contextlib.suppress(ConnectionError):
        await writer.drain()
    reply = await asyncio.wait_for(reader.read(), 5.0)
    writer.close()
    assert reply.startswith(b"HTTP/1.1 431 ")
    assert server.counters["refused:too_large"] == 1


async def test_a_slow_client_times_out_and_others_are_served_meanwhile(
        server: MetricsServer) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port(server))
    writer.write(b"GET /metrics HTTP/1.1\r\n")  # and never the blank line
    # the loop is not blocked: another client is answered while this one dawdles
    assert (await exchange(server, b"GET /metrics HTTP/1.1\r\n\r\n")).endswith(BODY.encode())
    reply = await asyncio.wait_for(reader.read(), 5.0)
    writer.close()
    assert reply.startswith(b"HTTP/1.1 408 ")
    assert server.counters["refused:timeout"] == 1


async def test_connections_beyond_the_limit_are_closed_at_once(server: MetricsServer) -> None:
    idle = [await asyncio.open_connection("127.0.0.1", port(server)) for _ in range(3)]
    await asyncio.sleep(0.05)
    reader, writer = await asyncio.open_connection("127.0.0.1", port(server))
    with contextlib.suppress(ConnectionError):
        assert await asyncio.wait_for(reader.read(), 0.25) == b""  # well before the timeout
    writer.close()
    assert server.counters["refused:too_many_clients"] == 1
    assert server.status()["clients"] == 3
    for _, w in idle:  # the idle ones leave: the endpoint serves again
        w.close()
    await asyncio.sleep(0.05)
    assert (await exchange(server, b"GET /metrics HTTP/1.1\r\n\r\n")).endswith(BODY.encode())


async def test_a_client_that_does_not_read_is_cut_off() -> None:
    big = "x" * (8 << 20)  # far more than the socket buffers take
    srv = MetricsServer("127.0.0.1", 0, lambda: big, content_type="text/plain",
                        request_timeout_s=0.3, write_timeout_s=0.3)
    await srv.start()
    try:
        _reader, writer = await asyncio.open_connection("127.0.0.1", port(srv), limit=1024)
        writer.write(b"GET /metrics HTTP/1.1\r\n\r\n")
        deadline = asyncio.get_running_loop().time() + 5.0  # a hang guard
        while not srv.counters["refused:slow_reader"]:
            assert asyncio.get_running_loop().time() < deadline, srv.counters
            await asyncio.sleep(0.05)
        assert srv.status()["clients"] == 0
        writer.close()
    finally:
        await srv.stop()


async def test_a_failing_status_answers_500_and_the_endpoint_goes_on() -> None:
    calls = iter([RuntimeError("boom"), None])

    def render() -> str:
        exc = next(calls)
        if exc is not None:
            raise exc
        return BODY

    srv = MetricsServer("127.0.0.1", 0, render, content_type="text/plain")
    await srv.start()
    try:
        assert (await exchange(srv, b"GET /metrics HTTP/1.1\r\n\r\n")).startswith(
            b"HTTP/1.1 500 ")
        assert (await exchange(srv, b"GET /metrics HTTP/1.1\r\n\r\n")).endswith(BODY.encode())
        assert srv.counters["refused:internal_error"] == 1
    finally:
        await srv.stop()


async def test_a_client_scraping_in_a_loop_does_not_render_every_time() -> None:
    """The render (the whole status) runs at most once per interval, however often
    clients ask; every answer is still a full scrape."""
    renders = []

    def render() -> str:
        renders.append(1)
        return BODY

    srv = MetricsServer("127.0.0.1", 0, render, content_type="text/plain",
                        render_every_s=3600.0)
    await srv.start()
    try:
        for _ in range(20):
            assert (await exchange(srv, b"GET /metrics HTTP/1.1\r\n\r\n")).endswith(
                BODY.encode())
        assert len(renders) == 1 and srv.counters["scrapes"] == 20
        srv.render_every_s = 0.0
        await exchange(srv, b"GET /metrics HTTP/1.1\r\n\r\n")
        assert len(renders) == 2
    finally:
        await srv.stop()
