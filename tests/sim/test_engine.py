"""The engine's driver semantics, with a tiny scripted protocol defined here."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, ClassVar

import pytest
from simhelpers import base_doc, read_run

import meshsim.des.engine as engine_mod
import meshsim.scenario.load as load_mod
from meshsim.des.engine import Simulation
from meshsim.des.run import run_scenario
from meshsim.scenario import from_dict
from meshsub.core.api import FIRST_PROTOCOL_TYPE, Input, Message, MessageId, MsgKind
from meshsub.core.content import Event
from meshsub.core.protocol import Protocol
from meshsub.core.registry import get_protocol

DATA = FIRST_PROTOCOL_TYPE


class Probe(Protocol):
    """Does what the published event's ``cmd`` says and logs every input."""

    name: ClassVar[str] = "probe"
    protocol_id: ClassVar[int] = 9
    message_kinds: ClassVar[dict[int, MsgKind]] = {DATA: MsgKind.DATA}
    log: ClassVar[list[tuple[float, int, str, Any]]] = []

    def handle(self, inp: Input) -> list[Any]:
        detail = getattr(inp, "name", None) or getattr(inp, "sender", None) \
            or getattr(inp, "node", None) or getattr(getattr(inp, "neighbor", None), "node", None)
        Probe.log.append((inp.now, self.node, type(inp).__name__, detail))
        return super().handle(inp)

    def on_publish(self, event: Event, event_id: MessageId) -> None:
        cmd, arg = event.attrs["cmd"], event.attrs.get("arg", 0)
        msg = Message(DATA, event_id, "x")
        if cmd == "bcast":
            self.broadcast(msg)
        elif cmd == "big":
            self.broadcast(Message(DATA, event_id, "y" * int(arg)))
        elif cmd == "uni":
            self.send(int(arg), msg)
        elif cmd == "many":
            self.send_many(frozenset({1, 3, 5}), msg)
        elif cmd == "timers":
            self.set_timer("a", 1.0)
            self.set_timer("a", 2.0)  # re-arming replaces
            self.set_timer("b", 1.0)
            self.cancel_timer("b")
        elif cmd == "unencodable":
            self.broadcast(Message(DATA, event_id, {1, 2}))


@pytest.fixture(autouse=True)
def probe(monkeypatch: pytest.MonkeyPatch) -> None:
    def lookup(name: str) -> type[Protocol]:
        return Probe if name == "probe" else get_protocol(name)

    monkeypatch.setattr(engine_mod, "get_protocol", lookup)
    monkeypatch.setattr(load_mod, "get_protocol", lookup)
    Probe.log = []


def probe_doc(*pubs: tuple[float, int, str], **radio: Any) -> dict[str, Any]:
    doc = base_doc()
    doc["protocol"] = {"name": "probe"}
    doc["radio"].update(radio)
    doc["workload"] = {"publications": [{"t": t, "node": n, "event": e} for t, n, e in pubs]}
    return doc


def inputs(kind: str, node: int | None = None) -> list[tuple[float, int, str, Any]]:
    return [r for r in Probe.log if r[2] == kind and (node is None or r[1] == node)]


def test_start_gives_positions_then_neighbours() -> None:
    sim = Simulation(from_dict(probe_doc()))
    sim.run()
    assert [r[1] for r in inputs("PositionChanged")] == [1, 2, 3, 4, 5]
    ups = {(r[1], r[3]) for r in inputs("NeighborUp")}
    assert ups == {(1, 2), (2, 1), (2, 3), (3, 2), (3, 4), (4, 3), (4, 5), (5, 4)}
    assert all(r[0] == 0.0 for r in Probe.log if r[2] not in ("LocalPublish", "Stopping"))
    assert [r[:3] for r in inputs("Stopping")] == [(sim.scenario.end_s, n, "Stopping")
                                                   for n in range(1, 6)]  # the last input


def test_timers_replace_and_cancel() -> None:
    Simulation(from_dict(probe_doc((1.0, 3, "t cmd=timers")))).run()
    assert inputs("TimerFired") == [(3.0, 3, "TimerFired", "a")]


def test_unicast_to_a_non_neighbour_is_transmitted_but_not_received(tmp_path: Path) -> None:
    result = run_scenario(from_dict(probe_doc((1.0, 1, "t cmd=uni arg=3"),
                                              (2.0, 1, "t cmd=uni arg=2"))), tmp_path / "r")
    assert result.stats.no_link == 1
    assert [(r[1], r[3]) for r in inputs("FrameReceived")] == [(2, 1)]
    _, records = read_run(tmp_path / "r")
    assert [r["peer"] for r in records if r["event"] == "tx"] == [3, 2]
    (rx,) = [r for r in records if r["event"] == "rx"]
    assert rx["node"] == 2 and rx["peer"] == 1 and rx["msg_kind"] == "data"


def test_send_to_many_is_one_unicast_per_destination(tmp_path: Path) -> None:
    result = run_scenario(from_dict(probe_doc((1.0, 4, "t cmd=many"))), tmp_path / "r")
    _, records = read_run(tmp_path / "r")
    assert sorted(r["peer"] for r in records if r["event"] == "tx") == [1, 3, 5]
    assert sorted(r[1] for r in inputs("FrameReceived")) == [3, 5]  # 1 is out of range
    assert result.stats.tx["data"] == 3 and result.stats.no_link == 1


def test_arrival_time_is_hop_delay_plus_serialisation(tmp_path: Path) -> None:
    doc = probe_doc((1.0, 3, "t cmd=bcast"), delay_s=0.01, bitrate_bps=8000.0)
    run_scenario(from_dict(doc), tmp_path / "r")
    _, records = read_run(tmp_path / "r")
    (tx,) = [r for r in records if r["event"] == "tx"]
    expected = 1.0 + 0.01 + tx["bytes"] * 8 / 8000.0
    got = sorted((r[1], r[0]) for r in inputs("FrameReceived"))
    assert [n for n, _ in got] == [2, 4]
    assert all(t == pytest.approx(expected) for _, t in got)
    assert all(r["ts_ns"] == round(expected * 1e9) for r in records if r["event"] == "rx")


def test_a_pair_delay_replaces_the_hop_delay_for_that_pair_only() -> None:
    doc = probe_doc((1.0, 3, "t cmd=bcast"), delay_s=0.01, bitrate_bps=8000.0,
                    links=[{"a": 3, "b": 4, "delay_s": 0.5}])
    sim = Simulation(from_dict(doc))
    sim.run()
    serial = sim.stats.tx_bytes["data"] * 8 / 8000.0
    got = dict((r[1], r[0]) for r in inputs("FrameReceived"))
    assert got[2] == pytest.approx(1.0 + 0.01 + serial)
    assert got[4] == pytest.approx(1.0 + 0.5 + serial)  # both directions, link unchanged


def test_large_messages_are_sized_by_the_real_codec_with_segmentation() -> None:
    sim = Simulation(from_dict(probe_doc((1.0, 3, "t cmd=big arg=5000"), payload_size=1200)))
    stats = sim.run()
    assert stats.tx["data"] == 1 and stats.tx_frames >= 5
    assert stats.tx_bytes["data"] > 5000


def test_an_unencodable_message_is_a_counted_drop(tmp_path: Path) -> None:
    result = run_scenario(from_dict(probe_doc((1.0, 3, "t cmd=unencodable"))), tmp_path / "r")
    assert sum(result.stats.encode_errors.values()) == 1 and result.stats.tx["data"] == 0
    _, records = read_run(tmp_path / "r")
    (drop,) = [r for r in records if r["event"] == "drop"]
    assert drop["node"] == 3 and drop["reason"].startswith("encode_")


def test_broadcast_loss_is_independent_per_receiver() -> None:
    n = 400
    doc = probe_doc(*[(1.0 + i * 0.01, 3, "t cmd=bcast") for i in range(n)], loss=0.3)
    doc["scenario"]["duration_s"] = 10.0
    Simulation(from_dict(doc)).run()
    got: dict[float, set[int]] = {}
    for t, node, _, _ in inputs("FrameReceived"):
        got.setdefault(round(t, 6), set()).add(node)
    per_node = Counter(node for nodes in got.values() for node in nodes)
    both = sum(1 for nodes in got.values() if nodes == {2, 4})
    # Binomial bounds at about 4 sigma: 0.7 * 400 = 280 (sigma 9.2), 0.49 * 400 = 196 (10).
    assert abs(per_node[2] - 280) < 40 and abs(per_node[4] - 280) < 40
    assert abs(both - 196) < 42


def test_scripted_mobility_moves_links() -> None:
    doc = probe_doc()
    doc["scenario"]["duration_s"] = 20.0
    doc["mobility"] = {"model": "scripted", "tick_s": 1.0,
                       "waypoints": [[5, 5, 250, 50], [6, 5, 250, 90], [10, 5, 200, 50]]}
    sim = Simulation(from_dict(doc))
    sim.run()
    # Node 5 starts at x=250 (line, 50 m apart from x=50): it moves up out of range of 4
    # between t=5 and 6 (distance sqrt(50^2+40^2) = 64 > 60) and comes back by t=10.
    downs = [(r[0], r[1], r[3]) for r in inputs("NeighborDown")]
    assert downs == [(6.0, 4, 5), (6.0, 5, 4)]
    ups = [(r[0], r[1], r[3]) for r in inputs("NeighborUp") if r[0] > 0]
    assert ups and ups[0][1:] == (4, 5) and 6.0 < ups[0][0] <= 10.0
    assert len(inputs("PositionChanged", 5)) >= 5
    assert sim.nodes[5].position == (200.0, 50.0)


def test_contacts_replace_the_radio_model() -> None:
    doc = probe_doc((3.0, 1, "t cmd=bcast"), (6.0, 1, "t cmd=bcast"))
    doc["contacts"] = {"events": ["2 CONN 1 5 up", "5 CONN 1 5 down"]}
    Simulation(from_dict(doc)).run()
    assert [(r[0], r[1], r[3]) for r in inputs("NeighborUp")] == [(2.0, 1, 5), (2.0, 5, 1)]
    assert [(r[0], r[1], r[3]) for r in inputs("NeighborDown")] == [(5.0, 1, 5), (5.0, 5, 1)]
    assert [(r[1], r[3]) for r in inputs("FrameReceived")] == [(5, 1)]  # only the t=3 one


def test_redundant_receptions_are_the_data_copies_beyond_one_per_node(tmp_path: Path) -> None:
    """``SimStats.redundant_rx`` from its per-message sets equals the count from the
    ``rx`` records: every DATA reception of a message at a node after its first."""
    doc = base_doc()
    doc["nodes"] = {"count": 12, "placement": "grid"}
    doc["radio"]["range_m"] = 250.0
    result = run_scenario(from_dict(doc), tmp_path / "run")
    _, records = read_run(tmp_path / "run")
    copies = Counter((r["event_id"], r["node"]) for r in records
                     if r["event"] == "rx" and r["msg_kind"] == "data")
    expected = sum(c - 1 for c in copies.values())
    assert expected > 0 and result.stats.redundant_rx == expected
