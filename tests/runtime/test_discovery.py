"""Discovery: beacon body and validation, cadence, real UDP exchange, DNS-SD."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from typing import Any

import pytest

from meshsub.core.api import CoreType, Message, MessageId, Position
from meshsub.runtime.discovery import (
    Beacon,
    BeaconError,
    BeaconScheduler,
    BeaconTiming,
    Discovery,
    DnsSd,
    decode_beacon,
    interface_network,
    parse_txt,
)
from meshsub.runtime.link import Address, Link
from meshsub.runtime.neighbors import EventKind, NeighborEvent, NeighborTable
from meshsub.wire import FrameCodec, FrameError, KeyRing

KEY = bytes(range(32))


async def until(predicate: Callable[[], bool], guard: float = 30.0) -> None:
    deadline = time.monotonic() + guard  # hang guard, not a timing assertion
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


# ------------------------------------------------------------------ beacon body


def beacon_message(**body: Any) -> Message:
    base = Beacon(7, 3, 5.0, "n7", "flooding", ("geo",), Position(1.5, -2.0, 0.5, 4.5, 9.0),
                  1.25).body()
    base.update(body)
    return Message(CoreType.BEACON, MessageId(7, 1, 1), base, ttl=1)


def test_beacon_round_trip() -> None:
    b = Beacon(7, 3, 5.0, "n7", "flooding", ("geo", "sf"), Position(1.5, -2.0, 0.5, 4.5, 9.0),
               1.25)
    msg = b.message(MessageId(7, 1, 42))
    assert msg.type == CoreType.BEACON and msg.ttl == 1 and msg.hop == 0
    got = decode_beacon(msg, sender=7, received_at=100.0)
    assert (got.node, got.seq, got.interval, got.name, got.protocol, got.capabilities) == \
        (7, 3, 5.0, "n7", "flooding", ("geo", "sf"))
    assert got.position == Position(1.5, -2.0, 0.5, 4.5, 98.75)  # fixed 1.25 s before receipt
    nopos = Beacon(7, 4, 0.5).message(MessageId(7, 1, 43))
    assert decode_beacon(nopos, 7).position is None


def test_beacon_body_is_small() -> None:
    import msgpack

    body = Beacon(0xFFFFFFFF, 0xFFFFFFFF, 5.0, "x" * 63, "flooding", ("geo",),
                  Position(1e5, 1e5, 100, 50, 0), 3600).body()
    assert len(msgpack.packb(body)) < 160


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"v": 0}, "bad_version"),
        ({"v": True}, "bad_version"),
        ({"n": 8}, "node_mismatch"),
        ({"n": -1}, "bad_node"),
        ({"n": "7"}, "bad_node"),
        ({"s": 2**32}, "bad_seq"),
        ({"i": 0}, "bad_interval"),
        ({"i": 5.0}, "bad_interval"),
        ({"nm": "x" * 64}, "bad_name"),
        ({"nm": None}, "bad_name"),
        ({"pr": 3}, "bad_protocol"),
        ({"c": ["a"] * 17}, "bad_capabilities"),
        ({"c": [""]}, "bad_capabilities"),
        ({"c": "geo"}, "bad_capabilities"),
        ({"p": [1, 2, 3]}, "bad_position"),
        ({"p": [1, 2, 3, -1, 0]}, "bad_position"),
        ({"p": [float("nan"), 2, 3, 1, 0]}, "bad_position"),
        ({"p": [1e9, 2, 3, 1, 0]}, "bad_position"),
        ({"p": [1, 2, 3, 1, True]}, "bad_position"),
    ],
)
def test_bad_beacons(body: dict[str, Any], reason: str) -> None:
    with pytest.raises(BeaconError) as info:
        decode_beacon(beacon_message(**body), sender=7)
    assert info.value.reason == reason


def test_bad_beacon_shapes() -> None:
    with pytest.raises(BeaconError, match="not_beacon"):
        decode_beacon(Message(20, MessageId(7, 1, 1), {}), 7)
    with pytest.raises(BeaconError, match="bad_body"):
        decode_beacon(Message(CoreType.BEACON, MessageId(7, 1, 1), [1, 2]), 7)
    with pytest.raises(BeaconError, match="node_mismatch"):
        decode_beacon(beacon_message(), sender=9)  # relayed or spoofed: not one hop from 7


def test_newer_version_with_extra_keys_accepted() -> None:
    assert decode_beacon(beacon_message(v=2, future="x"), 7).seq == 3


# ------------------------------------------------------------------ cadence


def test_scheduler_fast_start_backoff_and_reset() -> None:
    s = BeaconScheduler(BeaconTiming(interval=8.0, min_interval=1.0, jitter=0.25), random.Random(1))
    assert [s.next_nominal(0) for _ in range(6)] == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    s.changed()
    assert s.next_nominal(0) == 1.0
    assert s.advertised(4.0) == 5.0
    for _ in range(200):
        assert 0.75 <= s.jittered(1.0) <= 1.25


def test_scheduler_budget_floor() -> None:
    s = BeaconScheduler(BeaconTiming(interval=5.0, min_interval=1.0, budget=100.0),
                        random.Random(1))
    assert s.next_nominal(0) == 1.0
    assert s.next_nominal(1000) == 10.0  # 1000 bytes at 100 B/s: wait 10 s, not 2 s
    assert s.budget_limited == 1
    with pytest.raises(ValueError):
        BeaconTiming(interval=1.0, min_interval=2.0)


# ------------------------------------------------------------------ two nodes over UDP


class Node:
    """The minimum of a node: link + codec + discovery, wired as node.py will do it."""

    def __init__(self, node_id: int, host: str, *, broadcast: bool = True,
                 timing: BeaconTiming | None = None) -> None:
        self.id = node_id
        self.events: list[NeighborEvent] = []
        self.codec = FrameCodec(node_id, 1, KeyRing.single(KEY), payload_size=1200)
        self.link = Link(interface="", port=0, bind_host=host, on_datagram=self.received)
        self.seq = 0
        self.bad_frames = 0
        self.discovery = Discovery(
            node=node_id, name=f"n{node_id}", protocol="flooding", table=NeighborTable(),
            timing=timing or BeaconTiming(interval=0.2, min_interval=0.05, jitter=0.1),
            transmit=self.transmit, new_message_id=self.new_id, on_event=self.events.append,
            clock=time.monotonic, position=lambda: Position(float(node_id), 0.0),
            learn=self.link.learn, capabilities=("geo",), broadcast=broadcast,
            rng=random.Random(node_id))

    def new_id(self) -> MessageId:
        self.seq += 1
        return MessageId(self.id, 1, self.seq)

    def transmit(self, message: Message, addr: Address | None) -> int:
        sent = 0
        for frame in self.codec.encode(0, message):
            ok = self.link.send_broadcast(frame) if addr is None else self.link.send_to(addr,
                                                                                          frame)
            sent += len(frame) if ok else 0
        return sent

    def received(self, data: bytes, addr: Address) -> None:
        try:
            decoded = self.codec.decode(data, time.monotonic())
        except FrameError:
            self.bad_frames += 1
            return
        if decoded is not None and decoded.protocol_id == 0 and \
                decoded.message.type == CoreType.BEACON:
            self.discovery.on_beacon(decoded.message, decoded.transmitter, addr)

    def kinds(self, node: int) -> list[EventKind]:
        return [e.kind for e in self.events if e.node == node]

    async def start(self) -> None:
        await self.link.start()
        await self.discovery.start()

    async def stop(self) -> None:
        await self.discovery.stop()
        await self.link.stop()


async def test_two_nodes_discover_each_other_and_detect_loss() -> None:
    a, b = Node(1, "127.0.0.11"), Node(2, "127.0.0.12")
    await a.link.start()
    await b.link.start()
    assert a.link.local is not None and b.link.local is not None
    a.link.broadcast_peers = [b.link.local]  # loopback stands in for the radio broadcast
    b.link.broadcast_peers = [a.link.local]
    await a.discovery.start()
    await b.discovery.start()
    try:
        await until(lambda: EventKind.UP in a.kinds(2) and EventKind.UP in b.kinds(1))
        up = next(e for e in a.events if e.kind == EventKind.UP)
        assert up.info is not None and up.info.protocol == "flooding"
        assert up.info.capabilities == ("geo",)
        assert up.info.position is not None and up.info.position.x == 2.0
        assert a.link.address_of(2) == b.link.local  # learned from the frame's sender
        await until(lambda: a.discovery.counters["received"] >= 10)
        kinds = a.kinds(2)  # steady: up once, never down while b beacons (a CHANGED from a
        assert kinds[0] == EventKind.UP and kinds.count(EventKind.UP) == 1  # late beacon on a
        assert EventKind.DOWN not in kinds  # busy CI host is tolerated)
        await b.stop()  # b goes silent
        await until(lambda: EventKind.DOWN in a.kinds(2))
        assert 2 not in a.discovery.table
    finally:
        await a.stop()
        await b.stop()
    assert a.bad_frames == 0 and a.discovery.drops == {}


async def test_static_peer_probing_without_broadcast() -> None:
    """No broadcast reaches anyone; a static peer and unicast replies still connect."""
    a, b = Node(3, "127.0.0.13"), Node(4, "127.0.0.14", broadcast=False)
    await a.start()
    await b.start()
    try:
        assert b.link.local is not None
        a.discovery.set_peers("static", [b.link.local])
        await until(lambda: EventKind.UP in b.kinds(3))
        # b (batman-like: never broadcasts) unicasts to its live neighbours: a hears it
        await until(lambda: EventKind.UP in a.kinds(4))
        assert a.link.drops["no_broadcast_target"] > 0  # a's broadcast went nowhere
        assert b.link.counters["broadcasts"] == 0
        status = a.discovery.status()
        host, port = b.link.local[:2]
        assert status["probe_peers"] == {"static": [f"{host}:{port}"]}
    finally:
        await a.stop()
        await b.stop()


async def test_bad_beacons_are_counted() -> None:
    a = Node(5, "127.0.0.15")
    msg = beacon_message()
    assert a.discovery.on_beacon(msg, sender=9, addr=("127.0.0.1", 1)) is None
    assert a.discovery.on_beacon(Beacon(5, 1, 1.0).message(MessageId(5, 1, 1)), 5,
                                 ("127.0.0.1", 1)) is None
    assert a.discovery.drops == {"node_mismatch": 1, "own": 1}
    assert len(a.discovery.table) == 0


async def test_new_neighbour_triggers_fast_beacons() -> None:
    a = Node(6, "127.0.0.16", timing=BeaconTiming(interval=5.0, min_interval=1.0))
    for _ in range(4):
        a.discovery.scheduler.next_nominal(0)
    assert a.discovery.scheduler.current == 5.0
    a.discovery.on_beacon(beacon_message(), sender=7, addr=("127.0.0.1", 1))
    assert a.kinds(7) == [EventKind.UP]
    assert a.discovery.scheduler.current == 1.0  # back to fast beacons


def fake_discovery(clock: list[float], **kw: Any) -> tuple[Discovery, list[tuple[int, Any]]]:
    learned: list[tuple[int, Any]] = []
    d = Discovery(node=1, name="n1", protocol="flooding", table=NeighborTable(),
                  timing=BeaconTiming(interval=2.0, min_interval=1.0), transmit=lambda m, a: 0,
                  new_message_id=lambda: MessageId(1, 1, 1), on_event=lambda e: None,
                  clock=lambda: clock[0], learn=lambda n, a: learned.append((n, a)), **kw)
    return d, learned


def test_a_stale_beacon_is_counted_and_teaches_no_address() -> None:
    clock = [0.0]
    d, learned = fake_discovery(clock)
    real, attacker = ("10.0.0.7", 4790), ("10.0.0.66", 4790)
    assert d.on_beacon(beacon_message(s=5), 7, real, 0.0, epoch=50) is not None
    d.on_beacon(beacon_message(s=6), 7, real, 1.0, epoch=50)
    d.on_beacon(beacon_message(s=5), 7, attacker, 2.0, epoch=50)  # replayed
    d.on_beacon(beacon_message(s=99), 7, attacker, 2.0, epoch=49)  # an earlier boot
    assert learned == [(7, real), (7, real)]
    assert d.drops == {"beacon_stale": 2} and d.table.get(7).address == real  # type: ignore[union-attr]


def test_dnssd_peers_expire_without_valid_beacons_and_are_capped() -> None:
    """Issue 25 item 9: 300 fake services must not become 300 beacon targets for ever."""
    clock = [0.0]
    d, _ = fake_discovery(clock, max_learned_peers=5, peer_timeout_beacons=3)
    d.set_peers("static", [("10.0.0.1", 4790)])
    for i in range(300):
        d.add_peer("dnssd", (f"10.0.1.{i % 250}", 4790 + i // 250))
    assert len(d.peers["dnssd"]) == 5 and d.drops["dnssd_peers_full"] == 295
    real = sorted(d.peers["dnssd"])[0]
    clock[0] = 5.0
    d.on_beacon(beacon_message(), 7, real, 5.0, epoch=1)  # a real node answers from there
    assert d.expire_peers(5.9) == 0
    assert d.expire_peers(6.1) == 4  # 3 intervals of 2 s without a beacon
    assert d.peers["dnssd"] == {real} and d.counters["peers_expired"] == 4
    assert d.expire_peers(11.1) == 1  # it went silent as well
    assert d.probe_targets() == [("10.0.0.1", 4790)]  # static peers never expire
    d.add_peer("dnssd", ("10.0.1.1", 4790))  # room again
    assert len(d.peers["dnssd"]) == 1


def test_dnssd_keeps_to_the_mesh_subnet() -> None:
    import ipaddress

    sd = DnsSd(node=1, name="n", port=4790, protocol="flooding", addresses=["10.42.0.1"],
               on_peer=lambda n, a: None, network=ipaddress.IPv4Network("10.42.0.0/16"))
    assert sd.reachable(ipaddress.ip_address("10.42.3.4"))
    assert not sd.reachable(ipaddress.ip_address("192.168.1.9"))
    assert sd.reachable(ipaddress.ip_address("fe80::1"))
    assert not sd.reachable(ipaddress.ip_address("2001:db8::1"))
    assert interface_network("lo", "127.0.0.1") == ipaddress.IPv4Network("127.0.0.0/8")
    assert interface_network("msub-nonexistent", "10.0.0.1") is None


# ------------------------------------------------------------------ DNS-SD


def test_parse_txt() -> None:
    assert parse_txt({b"node": b"17", b"port": b"4790", b"protocol": b"flooding"}) == (17, 4790)
    for bad in ({b"node": b"x", b"port": b"1"}, {b"node": b"1"}, {b"node": b"1", b"port": b"0"},
                {b"node": b"-1", b"port": b"1"}, {b"node": None, b"port": b"1"}):
        with pytest.raises(ValueError):
            parse_txt(bad)


async def test_dnssd_register_and_browse_on_loopback() -> None:
    found_a: list[tuple[int, list[Address]]] = []
    found_b: list[tuple[int, list[Address]]] = []
    a = DnsSd(node=0x1001, name="msub-a", port=4791, protocol="flooding",
              addresses=["127.0.0.21"], on_peer=lambda n, addrs: found_a.append((n, addrs)),
              interfaces=["127.0.0.1"])
    b = DnsSd(node=0x1002, name="msub-b", port=4792, protocol="flooding",
              addresses=["127.0.0.22"], on_peer=lambda n, addrs: found_b.append((n, addrs)),
              interfaces=["127.0.0.1"])
    await a.start()
    await b.start()
    try:
        await until(lambda: any(n == 0x1002 for n, _ in found_a)
                    and any(n == 0x1001 for n, _ in found_b))
    finally:
        await a.stop()
        await b.stop()
    assert (0x1002, [("127.0.0.22", 4792)]) in found_a
    assert all(n != 0x1001 for n, _ in found_a)  # never reports itself
