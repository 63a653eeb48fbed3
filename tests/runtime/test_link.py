"""Link on loopback (no root): unicast, emulated broadcast, size checks, address learning."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable

import pytest

from meshsub.runtime.link import InterfaceInfo, Link, LinkError, LinkState

Received = list[tuple[bytes, tuple[object, ...]]]


async def until(predicate: Callable[[], bool], guard: float = 20.0) -> None:
    deadline = time.monotonic() + guard  # hang guard, not a timing assertion
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


def loopback_link(host: str, got: Received, **kw: object) -> Link:
    return Link(interface="", port=0, bind_host=host,
                on_datagram=lambda data, addr: got.append((data, addr)), **kw)  # type: ignore[arg-type]


async def test_unicast_broadcast_and_learning() -> None:
    got_a: Received = []
    got_b: Received = []
    got_c: Received = []
    async with loopback_link("127.0.0.2", got_b) as b, loopback_link("127.0.0.3", got_c) as c:
        assert b.local is not None and c.local is not None
        async with loopback_link("127.0.0.1", got_a, max_datagram=300,
                                 broadcast_peers=[b.local, c.local]) as a:
            assert a.state == LinkState.UP and a.local is not None
            assert a.send_to(b.local, b"hello") is True
            await until(lambda: len(got_b) == 1)
            data, addr = got_b[0]
            assert data == b"hello" and addr == a.local
            assert a.send_broadcast(b"beacon") == 2
            await until(lambda: len(got_b) == 2 and len(got_c) == 1)
            # b learns a's address from the frame and answers by node id
            assert b.learn(1, got_c[0][1]) is True and b.learn(1, got_c[0][1]) is False
            assert b.send_to_node(1, b"reply") is True
            await until(lambda: any(d == b"reply" for d, _ in got_a))
            assert b.send_to_node(99, b"x") is False and b.drops["no_address"] == 1
            b.forget(1)
            assert b.address_of(1) is None
            # size checks both ways
            assert a.send_to(b.local, bytes(301)) is False and a.drops["oversize_tx"] == 1
            assert b.send_to(a.local, bytes(1000)) is True  # b allows 1200
            await until(lambda: a.drops["oversize_rx"] == 1)
            assert all(len(d) <= 300 for d, _ in got_a)
            status = a.status()
            assert status["state"] == "up" and status["counters"]["tx"] == 3
            assert status["drops"]["oversize_tx"] == 1
    assert a.status()["state"] == "stopped"
    assert a.send_to(("127.0.0.2", 9), b"x") is False and a.drops["link_down"] == 1


async def test_handler_errors_are_counted_not_fatal() -> None:
    calls = 0

    def bad(data: bytes, addr: tuple[object, ...]) -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError("bug in the node")

    got: Received = []
    async with Link(interface="", port=0, bind_host="127.0.0.4", on_datagram=bad) as a, \
            loopback_link("127.0.0.5", got) as b:
        assert a.local is not None
        b.send_to(a.local, b"one")
        b.send_to(a.local, b"two")
        await until(lambda: calls == 2)
        assert a.drops["handler_error"] == 2 and a.state == LinkState.UP


async def test_a_paused_link_sends_but_reads_only_after_resume() -> None:
    """The daemon starts its link paused (runtime/node.py): bound, so it can send, but
    nothing is read until the node's own state is restored; what came meanwhile waits
    in the socket's buffer and is read after ``resume``, in order."""
    got_a: Received = []
    got_b: Received = []
    async with loopback_link("127.0.0.6", got_a, paused=True) as a, \
            loopback_link("127.0.0.7", got_b) as b:
        assert a.state == LinkState.UP and a.local is not None and b.local is not None
        assert a.send_to(b.local, b"out") is True
        await until(lambda: len(got_b) == 1)
        b.send_to(a.local, b"one")
        b.send_to(a.local, b"two")
        await asyncio.sleep(0.05)  # the loop turns: a reading socket would be read now
        assert got_a == [] and a.counters["rx"] == 0
        a.resume()
        await until(lambda: len(got_a) == 2)
        assert [d for d, _ in got_a] == [b"one", b"two"]
        a.resume()  # again: nothing changes
        b.send_to(a.local, b"three")
        await until(lambda: len(got_a) == 3)


async def test_own_frames_dropped() -> None:
    got: Received = []
    async with loopback_link("127.0.0.6", got) as a:
        assert a.local is not None
        a.broadcast_peers = [a.local]
        a.send_broadcast(b"me")
        await until(lambda: a.drops["own"] == 1)
        assert got == []


async def test_waits_for_missing_interface() -> None:
    """With a fake lookup: the interface is absent, then present without address."""
    infos: list[InterfaceInfo | None] = [None, InterfaceInfo("msubx0", 999, None, None, None)]
    states: list[LinkState] = []

    def lookup(name: str) -> InterfaceInfo | None:
        return infos[0] if len(infos) == 1 else infos.pop(0)

    link = Link(interface="msubx0", port=0, on_datagram=lambda d, a: None, poll_interval=0.01,
                lookup=lookup, on_state=states.append)
    await link.start()
    await until(lambda: len(infos) == 1)
    await asyncio.sleep(0.05)
    assert link.state == LinkState.WAITING and states == [LinkState.WAITING]
    assert link.last_error == "interface has no usable address"
    assert link.send_broadcast(b"x") == 0 and link.drops["no_broadcast_target"] == 1
    await link.stop()


async def test_bind_failure_is_reported_and_retried() -> None:
    """batman mode needs no broadcast address; a failing bind (the device vanished
    between probe and bind) is counted and retried, never raised."""
    def lookup(name: str) -> InterfaceInfo | None:
        return InterfaceInfo(name, 999, "10.9.9.9", None, None)

    link = Link(interface="msubx1", port=0, mode="batman", on_datagram=lambda d, a: None,
                poll_interval=0.01, lookup=lookup)
    await link.start()
    try:
        await until(lambda: link.counters["bind_failures"] >= 3)
        assert link.state == LinkState.WAITING
        assert (link.last_error or "").startswith("bind: ")
    finally:
        await link.stop()


def test_batman_broadcast_is_unicast_to_one_hop_peers() -> None:
    link = Link(interface="bat0", port=4790, mode="batman", on_datagram=lambda d, a: None)
    link.info = InterfaceInfo("bat0", 7, "10.42.0.9", "10.42.255.255", "fe80::9")
    assert link.broadcast_targets() == []  # never the bat0 broadcast address
    link.set_one_hop_peers([("10.42.0.2", 4790), ("10.42.0.1", 4790), ("10.42.0.2", 4790)])
    assert link.broadcast_targets() == [("10.42.0.1", 4790), ("10.42.0.2", 4790)]
    adhoc = Link(interface="wlan0", port=4790, on_datagram=lambda d, a: None)
    adhoc.info = InterfaceInfo("wlan0", 3, "10.1.0.5", "10.1.255.255", None)
    assert adhoc.broadcast_targets() == [("10.1.255.255", 4790)]
    v6 = Link(interface="wlan0", port=4790, family="ipv6", on_datagram=lambda d, a: None)
    v6.info = InterfaceInfo("wlan0", 3, None, None, "fe80::5")
    assert v6.broadcast_targets() == [("ff02::4d53", 4790, 0, 3)]
    assert v6.peer_address("fe80::7", 4790) == ("fe80::7", 4790, 0, 3)
    assert v6.peer_address("fe80::7%1", 4790) == ("fe80::7", 4790, 0, 1)
    assert v6.peer_address("2001:db8::1", 4790) == ("2001:db8::1", 4790, 0, 0)
    assert v6.send_to(("not-an-address", 4790), b"x") is False
    assert v6.drops["bad_address"] == 1


async def test_bind_permission_refused_is_a_clear_error(monkeypatch: pytest.MonkeyPatch
                                                      ) -> None:
    """Kernels before 5.7 refuse SO_BINDTODEVICE without CAP_NET_RAW: one clear message."""
    real = socket.socket.setsockopt

    def refuse(self: socket.socket, level: int, option: int, *args: object) -> None:
        if option == socket.SO_BINDTODEVICE:
            raise PermissionError(1, "Operation not permitted")
        real(self, level, option, *args)  # type: ignore[call-overload]

    monkeypatch.setattr(socket.socket, "setsockopt", refuse)
    link = Link(interface="wlan0", port=0, on_datagram=lambda d, a: None)
    with pytest.raises(LinkError, match=r"needs root or CAP_NET_RAW.*AmbientCapabilities"):
        await link.start()
    assert link.state == LinkState.STOPPED


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        Link(interface="", port=0, family="ipx", on_datagram=lambda d, a: None)
    with pytest.raises(ValueError):
        Link(interface="", port=0, mode="mesh", on_datagram=lambda d, a: None)
    assert issubclass(LinkError, RuntimeError)


def test_ids_from_one_address_share_its_tuple_in_the_address_map() -> None:
    """Issue 25 item 10: an insider's 4096 made-up ids from one address (each frame's
    address a fresh tuple from ``recvfrom``) keep one address object, not 4096."""
    import tracemalloc

    link = loopback_link("127.0.0.1", [])
    def fresh() -> tuple[str, int]:  # what recvfrom returns: a new tuple and string
        return (".".join(["10", "99", "0", str(2)]), 5000)

    link.learn(1, fresh())
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for node in range(2, 4097):
            link.learn(node, fresh())
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 400_000, f"4096 ids keep {kept} bytes"  # dict and int keys: ~270 kB
    assert len({id(addr) for addr in link.addresses.values()}) == 1
    assert link.address_of(4096) == ("10.99.0.2", 5000)
