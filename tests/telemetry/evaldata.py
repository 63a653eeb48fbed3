"""A small hand-built run whose every metric is worked out by hand in the tests.

Timeline (seconds; t0 = 0, warm-up 5 s, radio range 70 m -> free-space model):

- t=1  subscriptions: n1 ``news/#``, n2 ``temp t>10``, n3 ``temp`` and ``temp t>0`` (two
  subscriptions: every event for n3 is delivered twice, once per subscription, which is
  no duplicate), n4 ``temp t<5``;
  t=2  n5 ``temp``, unsubscribed at t=8; t=12 n6 ``temp`` (joins late).
- t=3  E0 (n1, ``temp t=20``) is published inside the warm-up: excluded.
- t=10 E1 (n1, ``temp t=20``): interested {n2, n3}. n2 at 10.5 and again at 11.0
  (duplicate), n3 at 12.0; n4 at 10.8 (false positive: ``t<5``), n6 at 13.0 (false
  positive: subscribed after the publish).
- t=20 E2 (n2, ``temp t=1``): interested {n3, n4, n6}; n3 at 20.2, n4 at 24.0, n6 never;
  n2 delivers its own event locally (not counted).
- t=25 E3 (n3, ``news x=1``): interested {n1} through the wildcard; n1 at 25.5.

n2 moves from (30, 0) to (60, 50) at t=11, between its reception from n1 and its
transmission to n3 (the energy model uses positions as of each transmission).
``mobility.log`` has the same tracks (n2 jumps at t=11), so the optimum sees, with the
70 m unit disk: at t=10 n1 next to n2, n3 and n4; at t=20 n2 next to n3, n4 and n5, n6
alone.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RUN = "r1"
S = 1_000_000_000
E0, E1, E2, E3 = "1-0-1", "1-0-2", "2-0-1", "3-0-1"


def rec(node: int, t: float, event: str, **attrs: Any) -> dict[str, Any]:
    return {"run": RUN, "node": node, "protocol": "flooding", "ts_ns": round(t * S),
            "event": event, **attrs}


def records() -> dict[int, list[dict[str, Any]]]:
    """Records per node, each list in time order."""
    positions = {1: (0, 0), 2: (30, 0), 3: (60, 0), 4: (0, 40), 5: (100, 100), 6: (200, 200)}
    by_node: dict[int, list[dict[str, Any]]] = {
        n: [rec(n, 0, "position", x=float(x), y=float(y))] for n, (x, y) in positions.items()
    }

    def add(node: int, t: float, event: str, **attrs: Any) -> None:
        by_node[node].append(rec(node, t, event, **attrs))

    add(1, 1, "subscribe", sub_id="s1", topic="news/#", content="news/#")
    add(2, 1, "subscribe", sub_id="s2", topic="temp", content="temp t>10")
    add(2, 1, "tx", msg_kind="subscription", bytes=50)  # warm-up: excluded
    add(3, 1, "subscribe", sub_id="s3", topic="temp", content="temp")
    add(3, 1, "subscribe", sub_id="s3b", topic="temp", content="temp t>0")
    add(4, 1, "subscribe", sub_id="s4", topic="temp", content="temp t<5")
    add(5, 2, "subscribe", sub_id="s5", topic="temp", content="temp")
    add(1, 3, "publish", event_id=E0, topic="temp", content="temp t=20")
    add(1, 3.1, "tx", msg_kind="data", bytes=100, event_id=E0)  # excluded with E0
    add(2, 3.2, "deliver", event_id=E0, sub_id="s2", hop=1, topic="temp")
    add(4, 3.3, "drop", reason="false_positive_forward", event_id=E0)  # excluded
    add(1, 6, "tx", msg_kind="beacon", bytes=20)
    add(5, 8, "unsubscribe", sub_id="s5", topic="temp")
    # E1
    add(1, 10, "publish", event_id=E1, topic="temp", content="temp t=20")
    add(1, 10.1, "tx", msg_kind="data", bytes=100, event_id=E1, peer=2)
    add(2, 10.1, "rx", msg_kind="data", bytes=100, event_id=E1, peer=1)
    add(1, 10.2, "tx", msg_kind="data", bytes=100, event_id=E1)
    add(2, 10.2, "rx", msg_kind="data", bytes=100, event_id=E1, peer=1)
    add(2, 10.5, "deliver", event_id=E1, sub_id="s2", hop=1, topic="temp")
    add(4, 10.8, "deliver", event_id=E1, sub_id="s4", hop=1, topic="temp")
    add(4, 10.9, "drop", reason="false_positive_forward", event_id=E1)
    add(2, 11.0, "deliver", event_id=E1, sub_id="s2", hop=1, topic="temp")
    add(2, 11.0, "position", x=60.0, y=50.0)  # n2 moves: 50 m from n3 from now on
    add(2, 11.5, "tx", msg_kind="data", bytes=100, event_id=E1, peer=3)
    add(3, 11.5, "rx", msg_kind="data", bytes=100, event_id=E1, peer=2)
    add(3, 12.0, "deliver", event_id=E1, sub_id="s3", hop=2, topic="temp")
    add(3, 12.0, "deliver", event_id=E1, sub_id="s3b", hop=2, topic="temp")
    add(6, 12, "subscribe", sub_id="s6", topic="temp", content="temp")
    add(6, 12, "tx", msg_kind="subscription", bytes=40)
    add(6, 13.0, "deliver", event_id=E1, sub_id="s6", hop=3, topic="temp")
    add(3, 15, "tx", msg_kind="control", bytes=30, peer=2)
    # E2
    add(2, 20, "publish", event_id=E2, topic="temp", content="temp t=1")
    add(2, 20.0, "deliver", event_id=E2, sub_id="s2local", hop=0, topic="temp")
    add(2, 20.1, "tx", msg_kind="data", bytes=80, event_id=E2)
    add(3, 20.2, "deliver", event_id=E2, sub_id="s3", hop=1, topic="temp")
    add(3, 20.2, "deliver", event_id=E2, sub_id="s3b", hop=1, topic="temp")
    add(3, 21, "tx", msg_kind="data", bytes=80, event_id=E2, peer=4)
    add(4, 21, "rx", msg_kind="data", bytes=80, event_id=E2, peer=3)
    add(4, 24.0, "deliver", event_id=E2, sub_id="s4", hop=2, topic="temp")
    # E3
    add(3, 25, "publish", event_id=E3, topic="news", content="news x=1")
    add(3, 25.1, "tx", msg_kind="data", bytes=60, event_id=E3, peer=1)
    add(1, 25.1, "rx", msg_kind="data", bytes=60, event_id=E3, peer=3)
    add(1, 25.5, "deliver", event_id=E3, sub_id="s1", hop=1, topic="news")
    add(1, 30, "counter", reason="tx_frames", bytes=3)
    return by_node


MALFORMED = [
    "this is not json",
    '{"run": "r1", "node": 1}',  # missing protocol, ts_ns, event
    '{"run": "r1", "node": "seven", "protocol": "flooding", "ts_ns": 5, "event": "tx"}',
    '{"run": "r1", "node": 1, "protocol": "flooding", "ts_ns": 5, "event": "bogus"}',
    '{"run": "r1", "node": 1, "protocol": "flooding", "ts_ns": 5, "event": "deliver"}',
    '{"run": "r1", "node": 1, "protocol": "flooding", "ts_ns": 1.5, "event": "tx"',
]
"""Six bad lines: not JSON, missing fields, wrong type, unknown event, a deliver
without event_id, a truncated line."""

MANIFEST = {
    "run": RUN,
    "tier": "simulation",
    "seed": 1,
    "protocol": {"name": "flooding", "params": {}},
    "scenario": {"meta": {"name": "handbuilt", "seed": 1, "warmup_s": 5.0},
                 "radio": {"range_m": 70.0}},
    "overrides": ["radio.range_m=70", "scenario.seed=1"],
}


def write_run(rundir: Path) -> Path:
    """Write the run as the virtual mesh would: one subfolder per node, plus a bad file."""
    rundir.mkdir(parents=True, exist_ok=True)
    for node, recs in records().items():
        folder = rundir / f"n{node}"
        folder.mkdir(exist_ok=True)
        lines = [json.dumps(r) for r in recs]
        (folder / f"{node}-0-1.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (rundir / "n1" / "1-0-2.jsonl").write_text("\n".join(MALFORMED) + "\n", encoding="utf-8")
    (rundir / "n1" / ".1-0-3.jsonl.tmp").write_text("half a line", encoding="utf-8")
    (rundir / "manifest.json").write_text(json.dumps(MANIFEST), encoding="utf-8")
    track = ["0.0 1 0.0 0.0", "0.0 2 30.0 0.0", "0.0 3 60.0 0.0", "0.0 4 0.0 40.0",
             "0.0 5 100.0 100.0", "0.0 6 200.0 200.0", "10.9 2 30.0 0.0", "11.0 2 60.0 50.0"]
    (rundir / "mobility.log").write_text("# t node x y\n" + "\n".join(track) + "\n")
    return rundir
