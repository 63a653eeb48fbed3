"""meshsubd running PUMA and GIANT from its configuration, on network namespaces (root).

Three namespaces on one bridge, each with its own mosquitto and meshsubd; the
medium's nftables rules decide who hears whom, and are rewritten to move the
mobile node (a client walking to the next cell, a ferry driving between
brokers). Roles come from ``node.roles`` (docs/config.md), cells from
``cell_x``/``cell_y``.

- **PUMA** (Zheng 2008, ch. 5): base stations A (cell (0, 0)) and C (cell
  (1, 0)) on a 2 x 1 grid, client B. B subscribes through A (its previous
  broker) and gets an event there directly; then B walks into C's cell (B hears
  only C). The next event published at A is predicted into C's cell, handed to
  B by C, and B's one reply comes back to A through C.
- **GIANT** (Zheng 2008, ch. 6): brokers A (cell (0, 0), the publisher's broker
  of topic ``reading``) and C (cell (1, 0), a subscriber) never hear each other;
  ferry B drives A -> C -> A -> C. The advertisement, C's subscription and then
  the event ride B, and C's application gets the event once.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from mesh import (
    IFACE,
    KEY,
    NodeProc,
    bridge_namespaces,
    free_port,
    remove_namespaces,
    sh,
    wait_for,
)

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, nftables)"),
    pytest.mark.skipif(not all(shutil.which(t) for t in ("mosquitto_pub", "mosquitto_sub",
                                                          "nft")),
                       reason="needs mosquitto clients and nft"),
]
PREFIX = "msub-pge"
MEDIUM = f"{PREFIX}-m"
TABLE = "msub_pge"
NAMES = ("a", "b", "c")


@dataclass
class CellNode(NodeProc):
    """A mesh node with roles and its own protocol parameters."""

    roles: tuple[str, ...] = ()
    own: dict[str, Any] = field(default_factory=dict)

    @property
    def ns(self) -> str:
        return f"{PREFIX}-{self.name}"

    def write_config(self) -> None:
        lines = [
            "[node]", f"id = {self.node_id}", f'name = "pge-{self.name}"',
            f"roles = {json.dumps(list(self.roles))}",
            "[link]", f'interface = "{IFACE}"', f"port = {self.udp_port}",
            "[discovery]", "beacon_interval = 0.5", "min_interval = 0.25",
            "neighbor_timeout = 2", "zeroconf = false",
            "[protocol]", f'name = "{self.protocol}"',
            "[protocol.params]", *(f"{k} = {json.dumps(v)}" for k, v in self.own.items()),
            "[security]", "current_key = 1",
            "[security.keys]", f'1 = "{KEY}"',
            "[mqtt]", 'host = "127.0.0.1"', f"port = {self.mqtt_port}",
            "[storage]", f'state_dir = "{self.state_dir}"', f'spool_dir = "{self.spool_dir}"',
            "[log]", 'level = "info"',
        ]
        self.config_path.write_text("\n".join(lines) + "\n")

    def proto(self) -> dict[str, Any]:
        status = self.try_status()
        return {} if status is None else dict(status["protocol"])

    def neighbours(self) -> list[int]:
        try:
            return sorted(r["node"] for r in self.ctl("neighbors"))
        except RuntimeError:
            return []


def _remove() -> None:
    remove_namespaces(PREFIX, NAMES)


def hear(*pairs: tuple[str, str]) -> None:
    """The medium forwards between exactly these pairs of nodes (both ways)."""
    allowed = {frozenset(p) for p in pairs}
    rules = "\n".join(f'        iifname "{PREFIX}-{x}0" oifname "{PREFIX}-{y}0" drop'
                      for x in NAMES for y in NAMES
                      if x != y and frozenset((x, y)) not in allowed)
    sh("nft", "-f", "-", ns=MEDIUM, input_text=f"""
table bridge {TABLE} {{
    chain forward {{
        type filter hook forward priority -1; policy accept;
    }}
}}
flush chain bridge {TABLE} forward
table bridge {TABLE} {{
    chain forward {{
{rules}
    }}
}}
""")


def _mesh(tmp: pytest.TempPathFactory, protocol: str,
          setup: dict[str, tuple[tuple[str, ...], dict[str, Any]]],
          first: tuple[tuple[str, str], ...]) -> Iterator[dict[str, CellNode]]:
    workdir = tmp.mktemp(protocol)
    nodes: dict[str, CellNode] = {}
    try:
        bridge_namespaces(PREFIX, NAMES, "10.97.0")
        hear(*first)
        udp_port = free_port(f"{PREFIX}-a")
        for index, name in enumerate(NAMES):
            (workdir / name).mkdir()
            roles, own = setup[name]
            node = CellNode(name, index, workdir / name, udp_port, protocol=protocol,
                            roles=roles, own=own)
            node.mqtt_port = free_port(node.ns)
            nodes[name] = node
        for node in nodes.values():
            node.start_broker()
        for node in nodes.values():
            node.start_daemon()
        yield nodes
    finally:
        for node in nodes.values():
            if node.daemon is not None and node.daemon.poll() is not None:
                print(f"--- meshsubd {node.name} exited {node.daemon.returncode}:\n"
                      f"{node.log_tail()}")
            node.stop_all()
        _remove()


GRID = {"cols": 2, "rows": 1, "cell_size_m": 100.0}


@pytest.fixture
def puma(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, CellNode]]:
    # walk_boundary "stay": from (0, 0) the 2 x 1 walk keeps mass on both cells at every t
    walk = {**GRID, "reliable_control": True, "unit_s": 2.0, "t_max": 60,
            "walk_boundary": "stay", "th": 0.6,
            "beacon_s": 2.0}
    yield from _mesh(tmp_path_factory, "puma", {
        "a": (("base_station",), {**walk, "cell_x": 0, "cell_y": 0}),
        "b": (("client",), walk),
        "c": (("base_station",), {**walk, "cell_x": 1, "cell_y": 0}),
    }, first=(("a", "b"), ("a", "c")))


@pytest.fixture
def giant(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, CellNode]]:
    common = {**GRID, "unit_s": 1.0, "DR": 0.9, "sweep_s": 1.0}
    yield from _mesh(tmp_path_factory, "giant", {
        "a": (("broker",), {**common, "cell_x": 0, "cell_y": 0, "adverts": ["reading"]}),
        "b": (("ferry",), common),
        "c": (("broker",), {**common, "cell_x": 1, "cell_y": 0}),
    }, first=(("a", "b"),))


def _until(what: str, cond: Callable[[], Any], guard: float = 30.0) -> Any:
    return wait_for(cond, what, guard=guard, step=0.2)


def test_puma_event_follows_a_client_into_the_next_cell(puma: dict[str, CellNode]) -> None:
    a, b, c = puma["a"], puma["b"], puma["c"]
    assert a.proto()["role"] == "base" and b.proto()["role"] == "client"
    _until("client with station A", lambda: b.proto().get("base") == a.node_id)
    sub = b.mqtt_sub("meshsub/deliver/pge/#")
    sub.wait_ready(b, "meshsub/deliver/pge/probe")
    b.mqtt_pub("meshsub/sub/pge", "reading value>1", retain=True)
    _until("A is B's previous broker", lambda: a.proto().get("clients") == 1)
    a.mqtt_pub("meshsub/pub/reading", json.dumps({"value": 5, "n": 1}))
    _until("event 1 at B", lambda: sub.events(n=1))
    assert a.proto()["stats"]["local"] == 1

    hear(("a", "c"), ("b", "c"))  # B walks into C's cell: A and B no longer hear each other
    _until("B with station C", lambda: b.proto().get("base") == c.node_id)
    _until("A lost B", lambda: b.node_id not in a.neighbours())
    a.mqtt_pub("meshsub/pub/reading", json.dumps({"value": 6, "n": 2}))
    _until("event 2 at B, through C", lambda: sub.events(n=2))
    stats = _until("B's reply back at A", lambda: a.proto()["stats"]
                   if a.proto()["stats"]["replies"] >= 2 else None)
    assert stats["local"] == 1 and stats["hot"] + stats["cold"] >= 1
    events = [d["event_id"] for d in sub.events()]
    assert len(events) == len(set(events)) == 2


def test_giant_ferry_carries_between_brokers_that_never_meet(
        giant: dict[str, CellNode]) -> None:
    a, b, c = giant["a"], giant["b"], giant["c"]
    assert b.proto()["role"] == "ferry" and c.proto()["role"] == "broker"
    sub = c.mqtt_sub("meshsub/deliver/pge/#")
    sub.wait_ready(c, "meshsub/deliver/pge/probe")
    c.mqtt_pub("meshsub/sub/pge", "reading value>1", retain=True)
    _until("the ferry took A's advertisement", lambda: b.proto().get("carried", 0) >= 1)

    hear(("b", "c"))  # the ferry drives to C
    _until("C learned the advertisement",
           lambda: c.proto().get("stats", {}).get("advs_learned", 0) >= 1)
    _until("C recruited the ferry for its subscription",
           lambda: c.proto()["stats"]["recruited"] >= 1)
    _until("A and the ferry out of touch", lambda: b.node_id not in a.neighbours())

    hear(("a", "b"))  # back to A with the subscription
    _until("the subscription delivered to A",
           lambda: b.proto()["stats"]["bundles_delivered"] >= 1)
    a.mqtt_pub("meshsub/pub/reading", json.dumps({"value": 7, "n": 1}))
    _until("A recruited the ferry for the event", lambda: a.proto()["stats"]["recruited"] >= 1)
    _until("C and the ferry out of touch", lambda: b.node_id not in c.neighbours())

    hear(("b", "c"))  # and to C with the event
    _until("the event at C's application", lambda: sub.events(n=1))
    assert c.node_id not in a.neighbours() and a.node_id not in c.neighbours()
    assert len(sub.events(n=1)) == 1
