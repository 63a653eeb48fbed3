"""The wired daemon without root: nodes in one process, linked over loopback UDP.

The link runs unbound (``link.interface = ""``) and "broadcasts" as unicast
copies to the static peers, so a line A - B - C needs no namespaces: B lists
A and C, A and C list only B. The namespace tests (test_mesh_root.py) show
the same on real interfaces, with real brokers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from meshsub.core.telemetry import parse_line
from meshsub.runtime.config import Config, parse_config
from meshsub.runtime.node import Node
from meshsub.runtime.sdnotify import SystemdNotifier
from meshsub.wire import FrameCodec, KeyRing

KEY = "071634b1e493c4a893be58547237e9cb25ee65c9c0a3a2db3f22fae24988d055"  # a test key


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_tcp_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_config(tmp: Path, node: int, port: int, peers: list[int], *,
                roles: tuple[str, ...] = (), **extra: Any) -> Config:
    doc: dict[str, Any] = {
        "node": {"id": node, "name": f"n{node}", "roles": list(roles)},
        "link": {"interface": "", "port": port},
        "discovery": {"beacon_interval": 0.5, "min_interval": 0.2, "zeroconf": False,
                      "static_peers": [f"127.0.0.1:{p}" for p in peers]},
        "protocol": {"name": "flooding", "params": {"ttl": 8, "jitter": 0.0}},
        "security": {"current_key": 1, "keys": {"1": KEY}},
        # nothing listens there: the bridge keeps retrying, the node does not care
        "mqtt": {"host": "127.0.0.1", "port": free_tcp_port()},
        "storage": {"state_dir": str(tmp / f"n{node}"), "spool_dir": str(tmp / f"n{node}/spool")},
        "log": {"level": "warning"},
    }
    for section, values in extra.items():
        doc.setdefault(section, {}).update(values)
    return parse_config(doc)


def kernel_drops(port: int) -> int:
    """The kernel's drop count of the UDP socket bound to ``port`` (/proc/net/udp)."""
    for line in Path("/proc/net/udp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].split(":")[1], 16) == port:
            return int(fields[-1])
    raise AssertionError(f"no UDP socket on port {port}")


async def until(cond: Callable[[], Any], what: str, guard: float = 20.0) -> None:
    deadline = time.monotonic() + guard  # a hang guard, not a timing assertion
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached: {what}")
        await asyncio.sleep(0.02)


async def control(node: Node, request: dict[str, Any]) -> Any:
    assert node.control is not None
    reader, writer = await asyncio.open_unix_connection(str(node.control.path))
    try:
        writer.write(json.dumps(request).encode() + b"\n")
        reply = json.loads(await reader.readline())
    finally:
        writer.close()
    assert reply["ok"], reply
    return reply["result"]


class Stream:
    """A ``meshsubctl sub`` client on the control socket, collecting deliveries."""

    def __init__(self) -> None:
        self.deliveries: list[dict[str, Any]] = []
        self._task: asyncio.Task[None] | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def open(self, node: Node, expr: str) -> str:
        assert node.control is not None
        reader, self._writer = await asyncio.open_unix_connection(str(node.control.path))
        self._writer.write(json.dumps({"cmd": "sub", "expr": expr}).encode() + b"\n")
        reply = json.loads(await reader.readline())
        assert reply["ok"], reply

        async def pump() -> None:
            while line := await reader.readline():
                self.deliveries.append(json.loads(line)["deliver"])

        self._task = asyncio.create_task(pump())
        return str(reply["result"]["sub_id"])

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        if self._task is not None:
            self._task.cancel()


@pytest.fixture
async def line(tmp_path: Path) -> AsyncIterator[list[Node]]:
    """A - B - C over loopback (A and C do not know each other)."""
    pa, pb, pc = free_udp_port(), free_udp_port(), free_udp_port()
    configs = [make_config(tmp_path, 1, pa, [pb]), make_config(tmp_path, 2, pb, [pa, pc]),
               make_config(tmp_path, 3, pc, [pb])]
    nodes = [Node(c, notifier=SystemdNotifier({})) for c in configs]
    try:
        for n in nodes:
            await n.start()
        yield nodes
    finally:
        for n in nodes:
            await n.stop()


async def test_event_crosses_two_hops_once(line: list[Node]) -> None:
    a, b, c = line
    await until(lambda: len(b.table) == 2 and len(a.table) == 1 and len(c.table) == 1,
                "neighbours")
    stream = Stream()
    await stream.open(c, "sensors/# v>1")
    try:
        result = await control(a, {"cmd": "pub", "event": "sensors/t v=5"})
        await until(lambda: stream.deliveries, "delivery on C")
        d = stream.deliveries[0]
        assert d["event_id"] == result["event_id"] and d["hop"] == 2
        assert d["origin"] == 1 and d["attrs"] == {"v": 5} and d["node"] == 3
        assert d["latency_s"] >= 0
        # a second event after the first: the first is not delivered again
        await control(a, {"cmd": "pub", "event": "sensors/t v=6"})
        await until(lambda: len(stream.deliveries) >= 2, "second delivery")
        assert [x["attrs"]["v"] for x in stream.deliveries] == [5, 6]
    finally:
        await stream.close()
    status = await control(b, {"cmd": "status"})
    assert status["frames"]["counters"]["messages_in"] >= 2
    assert status["protocol"]["protocol"] == "flooding"
    rows = await control(c, {"cmd": "neighbors"})
    assert [r["node"] for r in rows] == [2]


async def test_bad_frames_are_counted_and_do_not_stop_delivery(line: list[Node]) -> None:
    a, _, c = line
    await until(lambda: len(c.table) == 1 and len(a.table) == 1, "neighbours")
    assert c.link is not None and c.link.local is not None
    target = ("127.0.0.1", c.config.link.port)
    good = FrameCodec(0x99, 1, KeyRing.from_hex({"1": KEY}, 1))
    stranger = FrameCodec(0x98, 1, KeyRing.from_hex({"1": "22" * 32}, 1))
    other_id = FrameCodec(0x97, 1, KeyRing.from_hex({"7": KEY}, 7))
    from meshsub.core.api import Message, MessageId

    msg = Message(16, MessageId(0x99, 1, 1), ["x", 1.0], ttl=1)
    frame = good.encode(1, msg)[0]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(b"\xffgarbage that is not a frame at all", target)
        s.sendto(frame[:9], target)  # truncated below the minimum
        s.sendto(stranger.encode(1, msg)[0], target)  # wrong key, same key id
        s.sendto(other_id.encode(1, msg)[0], target)  # a key id we do not have
        s.sendto(frame, target)
        s.sendto(frame, target)  # replayed
    await until(lambda: c.codec.counters["replay"] == 1, "replay counted")
    status = await control(c, {"cmd": "status"})
    drops = status["drops"]
    # what cannot be a frame of ours never reaches the daemon: the kernel filter drops it
    assert status["admission"]["kernel_filter"] is True
    assert kernel_drops(c.config.link.port) == 3  # garbage, truncated, unknown key id
    assert "bad_version" not in drops["frame"] and "unknown_key" not in drops["frame"]
    assert "malformed" not in drops["frame"]
    assert drops["frame"]["bad_tag"] == 1
    assert drops["frame"]["replay"] == 1
    assert status["admission"]["refused"] == {"bad_tag": 1, "replay": 1}
    assert drops["protocol"]["malformed"] == 1  # the one good frame's body is not flooding's
    foreign = FrameCodec(0x96, 1, KeyRing.from_hex({"1": KEY}, 1)).encode(2, msg)[0]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(foreign, target)  # authenticated, but epidemic's protocol id
    await until(lambda: c.frames.drops["wrong_protocol"] == 1, "foreign protocol counted")
    stream = Stream()
    await stream.open(c, "after")
    try:
        await control(a, {"cmd": "pub", "event": "after ok=true"})
        await until(lambda: stream.deliveries, "delivery after the garbage")
    finally:
        await stream.close()


async def test_an_insiders_junk_frames_cost_one_summary_record_per_reason(
        line: list[Node]) -> None:
    """Issue 25: an insider with the key sending frames of unknown types, bodies that do
    not parse, another protocol's frames or link-layer frames that are not beacons wrote
    one ``drop`` record per frame (a spool filled at the radio's rate). Each reason is now
    counted exactly and recorded as one summary per interval, with its ``count``."""
    from meshsub.core.api import Message, MessageId

    _, _, c = line
    await until(lambda: len(c.table) == 1, "neighbours")
    target = ("127.0.0.1", c.config.link.port)
    insider = FrameCodec(0x95, 1, KeyRing.from_hex({"1": KEY}, 1))
    n = 60
    kinds = {"unknown_type": (1, 99), "malformed": (1, 16), "wrong_protocol": (2, 16),
             "link_unknown_type": (0, 9)}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for seq in range(n):
            for pid, mtype in kinds.values():
                msg = Message(mtype, MessageId(0x95, 1, seq * 4 + pid), ["x", 1.0], ttl=1)
                s.sendto(insider.encode(pid, msg)[0], target)
                await asyncio.sleep(0)
    await until(lambda: c.protocol.drops["unknown_type"] == n
                and c.protocol.drops["malformed"] == n
                and c.frames.drops["wrong_protocol"] == n
                and c.frames.drops["link_unknown_type"] == n, "every junk frame counted")
    for node in line:
        await node.stop()
    spool = Path(c.config.storage.spool_dir)
    drops = [r for f in sorted(spool.glob("*.jsonl"))
             for r in map(parse_line, f.read_text().splitlines()) if r["event"] == "drop"]
    for reason in kinds:
        records = [r for r in drops if r["reason"] == reason]
        assert len(records) == 1, (reason, len(records))  # one interval: one summary
        assert records[0]["count"] == n


async def test_outbox_held_while_link_down_and_refed(tmp_path: Path) -> None:
    """Accepted while the link cannot send: kept in the outbox, re-fed at the next start."""
    pa, pb = free_udp_port(), free_udp_port()
    cfg_a = make_config(tmp_path, 1, pa, [pb])
    a = Node(cfg_a, notifier=SystemdNotifier({}))
    await a.start()
    first_epoch = a.epoch
    try:
        assert a.link is not None
        await a.link.stop()  # the mesh interface is gone
        event_id = (await control(a, {"cmd": "pub", "event": "held x=1"}))["event_id"]
        assert a.store is not None and a.store.outbox_len() == 1
        assert (await control(a, {"cmd": "status"}))["held_publications"] == 1
    finally:
        await a.stop()
    b = Node(make_config(tmp_path, 2, pb, [pa]), notifier=SystemdNotifier({}))
    await b.start()
    stream = Stream()
    try:
        await stream.open(b, "held")
        a = Node(cfg_a, notifier=SystemdNotifier({}))
        await a.start()
        try:
            await until(lambda: stream.deliveries, "held event delivered after restart")
            assert stream.deliveries[0]["event_id"] == event_id
            assert a.store is not None and a.store.outbox_len() == 0
            assert a.epoch > first_epoch
        finally:
            await a.stop()
    finally:
        await stream.close()
        await b.stop()


async def test_telemetry_matches_the_schema(line: list[Node]) -> None:
    a, _, c = line
    await until(lambda: [len(n.table) for n in line] == [1, 2, 1], "neighbours")
    stream = Stream()
    await stream.open(c, "t")
    try:
        await control(a, {"cmd": "pub", "event": "t n=1"})
        await until(lambda: stream.deliveries, "delivery")
    finally:
        await stream.close()
    for n in line:
        await n.stop()
    spool = Path(c.config.storage.spool_dir)
    records = [parse_line(text) for f in sorted(spool.glob("*.jsonl"))
               for text in f.read_text().splitlines()]
    events = {r["event"] for r in records}
    assert {"subscribe", "rx", "deliver", "neighbor_up", "tx"} <= events
    rx = [r for r in records if r["event"] == "rx" and r["msg_kind"] == "data"]
    assert rx and all(r["peer"] == 2 and r["hop"] == 1 for r in rx)
    recs = [r["rec"] for r in records]
    assert recs == list(range(len(recs)))


BAD_CONFIGS = {
    "node.id": '[node]\nid = "seven"\n',
    "link.mtu": '[node]\nid = 7\n[link]\nmtu = 1500\n',
    "protocol.params.ttl": '[node]\nid = 7\n[protocol]\nname = "flooding"\n'
                           '[protocol.params]\nttl = 0\n',
}


@pytest.mark.parametrize("key", sorted(BAD_CONFIGS))
def test_bad_config_exits_2_with_one_line_naming_the_key(tmp_path: Path, key: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(BAD_CONFIGS[key])
    meshsubd = Path(sys.executable).parent / "meshsubd"
    proc = subprocess.run([str(meshsubd), "--config", str(path)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"meshsubd: {key}:"), proc.stderr
    assert proc.stdout == ""


def write_config(path: Path, port: int, peer: int, ttl: int, name: str) -> None:
    path.write_text(f"""
[node]
id = 5
name = "{name}"
[link]
port = {port}
[discovery]
zeroconf = false
static_peers = ["127.0.0.1:{peer}"]
[protocol]
name = "flooding"
[protocol.params]
ttl = {ttl}
[security]
current_key = 1
[security.keys]
1 = "{KEY}"
[mqtt]
port = {free_tcp_port()}
[storage]
state_dir = "{path.parent / 'state'}"
[log]
level = "warning"
""")


async def test_sighup_reload_applies_what_it_can(tmp_path: Path) -> None:
    from meshsub.runtime.config import load_config

    path = tmp_path / "meshsub.toml"
    port, peer, peer2 = free_udp_port(), free_udp_port(), free_udp_port()
    write_config(path, port, peer, 8, "before")
    notify = tmp_path / "notify.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as listener:
        listener.bind(str(notify))
        listener.setblocking(False)
        env = {"NOTIFY_SOCKET": str(notify), "WATCHDOG_USEC": "200000"}
        node = Node(load_config(path), notifier=SystemdNotifier(env))
        await node.start()
        try:
            assert listener.recv(4096).startswith(b"READY=1\nSTATUS=link up")
            assert node.discovery is not None
            assert node.discovery.peers["static"] == {("127.0.0.1", peer)}
            write_config(path, port, peer2, 12, "after")  # name needs a restart
            node.reload()
            assert node.protocol.params.ttl == 12  # type: ignore[attr-defined]
            assert node.discovery.peers["static"] == {("127.0.0.1", peer2)}
            assert node.config.node.name == "before"
            path.write_text("[node]\nid = 'x'\n")  # a broken file keeps the old config
            node.reload()
            assert node.counters["reload_errors"] == 1 and node.protocol.params.ttl == 12  # type: ignore[attr-defined]
            await asyncio.to_thread(lambda: None)
            messages = []
            with contextlib.suppress(BlockingIOError):
                while True:
                    messages.append(listener.recv(4096))
            assert b"RELOADING=1" in messages
            assert b"WATCHDOG=1" in messages  # pinged every 0.1 s while the loop turns
        finally:
            await node.stop()
        assert listener.recv(4096).startswith(b"STOPPING=1")
    assert node.state == "stopped"


async def test_second_daemon_on_the_same_state_exits_1(tmp_path: Path) -> None:
    path = tmp_path / "meshsub.toml"
    write_config(path, free_udp_port(), free_udp_port(), 8, "first")
    from meshsub.runtime.config import load_config

    first = Node(load_config(path), notifier=SystemdNotifier({}))
    await first.start()
    try:
        meshsubd = Path(sys.executable).parent / "meshsubd"
        proc = await asyncio.to_thread(
            subprocess.run, [str(meshsubd), "--config", str(path)], capture_output=True,
            text=True, timeout=60)
    finally:
        await first.stop()
    assert proc.returncode == 1
    errors = [line for line in proc.stderr.splitlines() if "level=error" in line]
    assert len(errors) == 1 and "another meshsubd is listening" in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr


async def test_epidemic_unicast_and_persistent_buffer(tmp_path: Path) -> None:
    """A unicast protocol over the same wiring: contacts, summary vectors, reliable send;
    its store-carry-forward buffer lives in the node's SQLite state."""
    pa, pb, pc = free_udp_port(), free_udp_port(), free_udp_port()
    proto = {"name": "epidemic", "params": {}}
    configs = [make_config(tmp_path, 1, pa, [pb], protocol=proto),
               make_config(tmp_path, 2, pb, [pa, pc], protocol=proto),
               make_config(tmp_path, 3, pc, [pb], protocol=proto)]
    nodes = [Node(cfg, notifier=SystemdNotifier({})) for cfg in configs]
    stream = Stream()
    try:
        for n in nodes:
            await n.start()
        a, b, c = nodes
        await until(lambda: [len(n.table) for n in nodes] == [1, 2, 1], "neighbours")
        await stream.open(c, "dtn/#")
        event_id = (await control(a, {"cmd": "pub", "event": "dtn/x k=1"}))["event_id"]
        await until(lambda: stream.deliveries, "epidemic delivery on C")
        assert stream.deliveries[0]["event_id"] == event_id
        assert stream.deliveries[0]["hop"] == 2
        assert b.frames.counters["tx_unicast"] > 0
        assert b.protocol.reliable.stats["acked"] > 0
        assert b.store is not None and len(b.store.buffer()) == 1  # carried, on disk
    finally:
        await stream.close()
        for n in nodes:
            await n.stop()


def test_config_conflict_found_at_start_exits_2(tmp_path: Path) -> None:
    """A telemetry topic inside the application namespace is refused like any bad key."""
    path = tmp_path / "meshsub.toml"
    write_config(path, free_udp_port(), free_udp_port(), 8, "n")
    path.write_text(path.read_text() + '[telemetry]\nmqtt_topic = "meshsub/pub/telemetry"\n')
    meshsubd = Path(sys.executable).parent / "meshsubd"
    proc = subprocess.run([str(meshsubd), "--config", str(path)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.splitlines()[-1]
    assert last.startswith("meshsubd: ") and "mqtt" in last and "telemetry" in last
    assert "Traceback" not in proc.stderr


async def test_live_feed_without_broker_counts_what_the_spool_bound_deleted(
        tmp_path: Path) -> None:
    """The node wires the live feed to its spool: with the broker away the backlog stays on
    disk; what the size bound deletes before it was shipped shows in the status and, at
    stop, as the spool's last ``telemetry_unshipped`` counter record."""
    cfg = make_config(tmp_path, 1, free_udp_port(), [],
                      telemetry={"mqtt_topic": "meshsub/telemetry/1",
                                 "max_spool_bytes": 1_000_000, "roll_bytes": 100_000})
    node = Node(cfg, notifier=SystemdNotifier({}))
    await node.start()
    try:
        assert node.spool is not None and node.feed is not None
        for _ in range(100):  # ~50 kB a round, below roll_bytes: roll() closes the file
            for n in range(500):
                node.record("neighbor_up", {"peer": n})
            node.spool.roll()
            await asyncio.sleep(0)
            if node.spool.counters["files_deleted"] >= 2:
                break
        assert node.spool.counters["files_deleted"] >= 2
        await until(lambda: node.feed is not None and node.feed.reader.lost > 0, "loss seen")
        live = (await control(node, {"cmd": "status"}))["telemetry"]["live"]
        assert live["state"] != "connected" and live["acked"] is None
        # all but the deleted files wait on disk (a 10-digit epoch in every record: ~55 kB files)
        assert live["lost"] == node.feed.reader.lost and live["backlog_bytes"] > 850_000
    finally:
        await node.stop()
    spool = Path(cfg.storage.spool_dir)
    last = sorted(spool.glob("1-*.jsonl"), key=lambda p: int(p.stem.split("-")[2]))[-1]
    counters = [r for r in map(parse_line, last.read_text().splitlines())
                if r["event"] == "counter" and r["reason"] == "telemetry_unshipped"]
    assert counters and counters[-1]["bytes"] == node.feed.reader.lost


async def test_a_copy_sent_to_a_restarting_neighbour_is_offered_to_its_next_process(
        tmp_path: Path) -> None:
    """B restarts while A still lists it (B beacons slowly, so A's timeout outlasts the
    restart), and A's epidemic copy to B's old process is given up after its
    retransmissions. B's restart is a new contact on A too (down, then up), so A offers
    its summary vector again and B fetches the copy. (With the restart taken as the same
    contact, B asked A only for what A lacked and never got the copy.)"""
    ports = [free_udp_port() for _ in range(2)]
    slow = {"beacon_interval": 2.5, "min_interval": 2.5}

    def config(i: int) -> Config:
        return make_config(tmp_path, i + 1, ports[i], [ports[1 - i]],
                           protocol={"name": "epidemic", "params": {"ttl_s": 600.0}},
                           discovery=slow if i == 1 else {})

    a = Node(config(0), notifier=SystemdNotifier({}))
    b = Node(config(1), notifier=SystemdNotifier({}))
    try:
        await a.start()
        await b.start()
        await until(lambda: 2 in a.table and 1 in b.table, "A and B meet")
        await b.stop()
        event_id = (await control(a, {"cmd": "pub", "event": "restart/copy n=1"}))["event_id"]
        given_up = a.protocol.reliable.stats["given_up"]
        await until(lambda: a.protocol.reliable.stats["given_up"] > given_up,
                    "A gives the copy to B's old process up")
        assert 2 in a.table  # still listed: the restart is shorter than A's timeout for B
        b = Node(config(1), notifier=SystemdNotifier({}))
        await b.start()
        await until(lambda: event_id in {str(m) for m in b.protocol.buffer.summary_vector()},  # type: ignore[attr-defined]
                    "B's new process carries the copy")
        assert a.table.restarts == 1
    finally:
        await b.stop()
        await a.stop()


async def test_inputs_at_the_links_first_moment_meet_the_restored_subscriptions(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A restarted subscriber's persisted MQTT subscriptions are the protocol's before any
    frame or local publication is. On a device the link binds in its watcher task while
    ``Node.start`` waits for it (``_link_settled``), and the loop runs: a neighbour's
    retransmission of an epidemic copy sent to the node's previous process arrives at
    once, and the control socket already takes ``meshsubctl pub``. Both used to meet a
    protocol without subscriptions (the bridge restored them only after the link): the
    events were carried and marked seen but never delivered to them, and no later copy
    is (the rolling upgrade's lost delivery, docs/benchmarks.md). Now the link reads
    nothing and the publisher feeds nothing before the subscriptions are back."""
    from meshsub.core.api import Message, MessageId
    from meshsub.core.content import Event
    from meshsub.protocols.epidemic import DATA, Epidemic, encode_data
    from meshsub.runtime.store import Store

    port, peer_port = free_udp_port(), free_udp_port()
    cfg = make_config(tmp_path, 2, port, [peer_port],
                      protocol={"name": "epidemic", "params": {"ttl_s": 600.0}})
    with Store.in_state_dir(Path(cfg.storage.state_dir)) as store:  # the previous process's
        store.put_subscription("app/all", "upgrade/#", source="mqtt")
    event = Event("upgrade/t", {"v": 1})
    copy = Message(DATA, MessageId(1, 7, 1), encode_data(event.to_wire(), time.time(), 600.0),
                   hop=0, ttl=32)
    frame = FrameCodec(1, 7, KeyRing.from_hex({"1": KEY}, 1)).encode(Epidemic.protocol_id,
                                                                      copy)[0]
    settled = Node._link_settled
    published: list[str] = []

    async def inputs_on_bind(self: Node, guard_s: float = 5.0) -> None:
        await settled(self, guard_s)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(frame, ("127.0.0.1", port))  # readable at once (loopback)
        published.append(self._ctl_publish(Event("upgrade/own", {"v": 2})))
        await asyncio.sleep(0.05)  # the loop turns: a reading socket is read now

    monkeypatch.setattr(Node, "_link_settled", inputs_on_bind)
    node = Node(cfg, notifier=SystemdNotifier({}))
    try:
        await node.start()
        await until(lambda: node.codec.counters["messages_in"] > 0, "the copy read")
        held = {str(m) for m in node.protocol.buffer.summary_vector()}  # type: ignore[attr-defined]
        assert {str(copy.id), published[0]} <= held
        assert node.bridge is not None and node.bridge.owns("app/all")
        assert node.counters["delivered_mqtt"] == 2, node.counters
    finally:
        await node.stop()


KEY_2 = "a3f1c85e07d94b26e1b8c4d39f0a7e52c6d81b4f93a2e70d5b18c6f4e29a03d7"


async def test_key_rotation_with_two_overlapping_keys_loses_nothing(tmp_path: Path) -> None:
    """docs/security.md's procedure, node by node with a restart each time, while node 1
    keeps publishing: add key 2 everywhere, make it current everywhere, drop key 1. Every
    acknowledged event reaches every node (epidemic carries it across the restarts), and
    not one frame is refused for its key (skipping the first step makes this fail)."""
    ports = [free_udp_port() for _ in range(3)]
    peers = {0: [ports[1]], 1: [ports[0], ports[2]], 2: [ports[1]]}
    rings = [({"1": KEY}, 1), ({"1": KEY, "2": KEY_2}, 1), ({"1": KEY, "2": KEY_2}, 2),
             ({"2": KEY_2}, 2)]

    def config(i: int, ring: tuple[dict[str, str], int]) -> Config:
        return make_config(tmp_path, i + 1, ports[i], peers[i],
                           protocol={"name": "epidemic", "params": {"ttl_s": 600.0}},
                           security={"keys": ring[0], "current_key": ring[1]})

    nodes = [Node(config(i, rings[0]), notifier=SystemdNotifier({})) for i in range(3)]
    published: list[str] = []
    refused = 0

    def refusals(i: int) -> int:
        """Frames this node's current socket refused for their key: the codec's count and
        the kernel filter's (a key id not in the ring never reaches the daemon)."""
        c = nodes[i].codec.counters
        return c["unknown_key"] + c["bad_tag"] + kernel_drops(ports[i])

    try:
        for n in nodes:
            await n.start()
        for step, ring in enumerate(rings[1:], 1):
            for i in range(3):
                published.append((await control(nodes[0], {
                    "cmd": "pub", "event": f"rotate/s{step} node={i}"}))["event_id"])
                refused += refusals(i)
                await nodes[i].stop()
                nodes[i] = Node(config(i, ring), notifier=SystemdNotifier({}))
                await nodes[i].start()
                await until(lambda: len(nodes[1].table) == 2, "B sees both again")
        published.append((await control(nodes[0], {"cmd": "pub", "event": "rotate/end"}))[
            "event_id"])

        def carried(n: Node) -> set[str]:
            return {str(m) for m in n.protocol.buffer.summary_vector()}  # type: ignore[attr-defined]

        try:
            await until(lambda: all(set(published) <= carried(n) for n in nodes),
                        "every event on every node", guard=60.0)
        except AssertionError:
            missing = {i + 1: sorted(set(published) - carried(n)) for i, n in enumerate(nodes)}
            raise AssertionError(f"not on every node after 60 s: {missing} "
                                 f"(published in order: {published})") from None
        refused += sum(refusals(i) for i in range(3))
        assert refused == 0
        assert all(n.codec.keys.key_ids == {2} for n in nodes)
    finally:
        for n in nodes:
            await n.stop()
