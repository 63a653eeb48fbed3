"""The control socket: requests, errors, streaming subscriptions, socket hygiene."""

from __future__ import annotations

import asyncio
import json
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from meshsub.core.content import Event, Subscription
from meshsub.runtime.control import MAX_LINE, ControlError, ControlHandlers, ControlServer


class FakeNode:
    def __init__(self) -> None:
        self.published: list[Event] = []
        self.subs: dict[str, Subscription] = {}
        self.fail_status = False

    def status(self) -> dict[str, Any]:
        if self.fail_status:
            raise RuntimeError("provider broke")
        return {"node": 42, "protocol": "flooding", "counters": {"drops": {"ttl": 1}}}

    def handlers(self) -> ControlHandlers:
        return ControlHandlers(
            status=self.status,
            neighbors=lambda: [{"node": 7, "link_quality": 0.9}],
            subscriptions=lambda: [{"sub_id": s, "expression": "x"} for s in self.subs],
            publish=self.publish,
            subscribe=self.subs.__setitem__,
            unsubscribe=self.subs.pop,
        )

    async def publish(self, event: Event) -> str:
        self.published.append(event)
        return f"2a-1-{len(self.published):x}"


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[tuple[ControlServer, FakeNode]]:
    node = FakeNode()
    srv = ControlServer(tmp_path / "meshsubd.sock", node.handlers())
    await srv.start()
    yield srv, node
    await srv.stop()


async def _connect(srv: ControlServer) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_unix_connection(str(srv.path), limit=4 * MAX_LINE)


async def _ask(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
               raw: bytes) -> dict[str, Any]:
    writer.write(raw + b"\n")
    await writer.drain()
    return json.loads(await asyncio.wait_for(reader.readline(), 10))  # type: ignore[no-any-return]


async def test_socket_mode_and_cleanup(tmp_path: Path) -> None:
    srv = ControlServer(tmp_path / "s" / "meshsubd.sock", FakeNode().handlers())
    await srv.start()
    assert stat.S_IMODE(srv.path.stat().st_mode) == 0o660
    assert stat.S_ISSOCK(srv.path.stat().st_mode)
    await srv.stop()
    assert not srv.path.exists()


async def test_stale_socket_is_replaced_live_one_refused(tmp_path: Path) -> None:
    path = tmp_path / "meshsubd.sock"
    first = ControlServer(path, FakeNode().handlers())
    await first.start()
    with pytest.raises(ControlError, match="another meshsubd"):
        await ControlServer(path, FakeNode().handlers()).start()
    first._server.close()  # type: ignore[union-attr]  # dies without cleaning up
    await first._server.wait_closed()  # type: ignore[union-attr]
    assert path.exists()
    second = ControlServer(path, FakeNode().handlers())
    await second.start()
    await second.stop()


async def test_requests(server: tuple[ControlServer, FakeNode]) -> None:
    srv, node = server
    r, w = await _connect(srv)
    status = await _ask(r, w, b'{"cmd": "status"}')
    assert status == {"ok": True, "result": {"node": 42, "protocol": "flooding",
                                             "counters": {"drops": {"ttl": 1}}}}
    assert (await _ask(r, w, b'{"cmd": "neighbors"}'))["result"][0]["node"] == 7
    pub = await _ask(r, w, b'{"cmd": "pub", "event": "sensors/t v=1"}')
    assert pub == {"ok": True, "result": {"event_id": "2a-1-1"}}
    assert node.published[0].topic == "sensors/t"
    w.close()


async def test_bad_requests_get_one_line_errors(server: tuple[ControlServer, FakeNode]) -> None:
    srv, node = server
    r, w = await _connect(srv)
    for raw, needle in [
        (b"{not json", "not JSON"),
        (b"[1]", "JSON object"),
        (b'{"cmd": "reboot"}', "unknown command"),
        (b'{"cmd": "pub"}', "needs 'event'"),
        (b'{"cmd": "pub", "event": "a/+ x=1"}', "wildcard"),
        (b'{"cmd": "sub", "expr": "t x >>> 1"}', ""),
    ]:
        reply = await _ask(r, w, raw)
        assert reply["ok"] is False and needle in reply["error"], (raw, reply)
    node.fail_status = True
    reply = await _ask(r, w, b'{"cmd": "status"}')
    assert reply["ok"] is False and "provider broke" in reply["error"]
    node.fail_status = False
    assert (await _ask(r, w, b'{"cmd": "status"}'))["ok"] is True  # still serving
    assert srv.counters["rejected:bad_json"] == 1
    w.close()


async def test_overlong_request(server: tuple[ControlServer, FakeNode]) -> None:
    srv, _ = server
    r, w = await _connect(srv)
    reply = await _ask(r, w, b'{"cmd": "' + b"x" * (MAX_LINE + 10) + b'"}')
    assert reply["ok"] is False and "longer" in reply["error"]
    w.close()


async def test_sub_streams_until_hangup(server: tuple[ControlServer, FakeNode]) -> None:
    srv, node = server
    r, w = await _connect(srv)
    reply = await _ask(r, w, b'{"cmd": "sub", "expr": "sensors/# v>1"}')
    sub_id = reply["result"]["sub_id"]
    assert sub_id.startswith("ctl-") and sub_id in node.subs and srv.owns(sub_id)
    assert srv.stream_subscriptions() == {sub_id: "sensors/# v>1"}
    w.write(b"ignored chatter\n")  # only EOF ends a stream
    await w.drain()
    await asyncio.sleep(0.05)
    assert srv.deliver(sub_id, {"event_id": "1-1-1", "topic": "sensors/a", "attrs": {"v": 2}})
    assert not srv.deliver("ctl-unknown", {})
    line = json.loads(await asyncio.wait_for(r.readline(), 10))
    assert line == {"deliver": {"event_id": "1-1-1", "topic": "sensors/a", "attrs": {"v": 2}}}
    w.close()
    for _ in range(500):
        if sub_id not in node.subs:
            break
        await asyncio.sleep(0.01)
    assert sub_id not in node.subs and not srv.owns(sub_id)


async def test_slow_stream_counts_drops(server: tuple[ControlServer, FakeNode]) -> None:
    srv, _ = server
    r, w = await _connect(srv)
    sub_id = (await _ask(r, w, b'{"cmd": "sub", "expr": "t"}'))["result"]["sub_id"]
    stream = srv._streams[sub_id]
    for n in range(stream.queue.maxsize + 5):  # no await: the client cannot drain meanwhile
        srv.deliver(sub_id, {"n": n})
    assert srv.counters["dropped:stream_full"] == 5
    first = json.loads(await asyncio.wait_for(r.readline(), 10))
    assert first["deliver"] == {"n": 0} and first["dropped"] == 5
    w.close()


async def test_stop_ends_streams(server: tuple[ControlServer, FakeNode]) -> None:
    srv, node = server
    r, w = await _connect(srv)
    await _ask(r, w, b'{"cmd": "sub", "expr": "t"}')
    await srv.stop()
    assert await asyncio.wait_for(r.read(), 10) == b""
    assert node.subs == {}
    w.close()


# ------------------------------------------------------------------ hostile clients (issue 25)


async def test_nested_json_and_garbage_never_stop_the_server(
        server: tuple[ControlServer, FakeNode]) -> None:
    srv, _ = server
    r, w = await _connect(srv)
    for raw in (b"[" * 60_000, b'{"cmd": ' + b"[" * 30_000 + b"]" * 30_000 + b"}",
                b"\xff\xfe\x00", b'{"cmd": "pub", "event": {"a": [1]}}'):
        reply = await _ask(r, w, raw)
        assert reply["ok"] is False
    assert srv.counters["rejected:bad_json"] == 3 and "errors" not in srv.counters
    assert (await _ask(r, w, b'{"cmd": "status"}'))["ok"] is True
    w.close()


@pytest.mark.parametrize("line", [b"", b"{}", b'{"cmd": null}', b"\x00" * 100, b'"x"', b"1e999"])
async def test_odd_lines_answer_or_are_ignored(server: tuple[ControlServer, FakeNode],
                                               line: bytes) -> None:
    srv, _ = server
    r, w = await _connect(srv)
    if line.strip():
        assert (await _ask(r, w, line))["ok"] is False
    else:
        w.write(line + b"\n")  # ignored: no answer
    assert (await _ask(r, w, b'{"cmd": "status"}'))["ok"] is True
    assert "errors" not in srv.counters
    w.close()


async def test_publish_records_the_callers_uid(server: tuple[ControlServer, FakeNode],
                                               caplog: pytest.LogCaptureFixture) -> None:
    """Issue 25 item 8: nothing recorded who published through the socket."""
    import os

    srv, _node = server
    r, w = await _connect(srv)
    with caplog.at_level("INFO", logger="meshsub.control"):
        assert (await _ask(r, w, b'{"cmd": "pub", "event": "ops/t v=1"}'))["ok"] is True
    assert srv.counters[f"published_by_uid:{os.getuid()}"] == 1
    from meshsub.runtime.logging import LogfmtFormatter

    line = next(LogfmtFormatter().format(rec) for rec in caplog.records
                if rec.getMessage() == "control publish")
    assert f"uid={os.getuid()}" in line and f"pid={os.getpid()}" in line
    w.close()


async def test_streams_are_capped(server: tuple[ControlServer, FakeNode]) -> None:
    from meshsub.runtime.control import MAX_STREAMS

    srv, node = server
    clients = []
    for _ in range(MAX_STREAMS):
        r, w = await _connect(srv)
        assert (await _ask(r, w, b'{"cmd": "sub", "expr": "t"}'))["ok"] is True
        clients.append(w)
    r, w = await _connect(srv)
    reply = await _ask(r, w, b'{"cmd": "sub", "expr": "t"}')
    assert reply["ok"] is False and "at most" in reply["error"]
    assert srv.counters["rejected:too_many"] == 1 and len(node.subs) == MAX_STREAMS
    for c in [*clients, w]:
        c.close()
