"""What the applications of a virtual-mesh run were owed, and what they got.

The account of a run from its own records: the daemons' telemetry says which events
they accepted (``publish``) and which subscriptions they held (``subscribe``); the
workload agents' reports say which publications the broker acknowledged to the
applications and which deliveries reached them over MQTT. An event is *owed* to
every subscription that matches it and was made before it was published, on any
node: the publisher's own applications included, since the daemon delivers a local
publication to its local subscribers too (``Protocol.deliver_local``); it is *lost*
for a subscription that never received it. A rolling
upgrade is judged by these figures (docs/vmesh.md, "Rolling upgrades"): for a
store-carry-forward protocol nothing acknowledged may be lost, for flooding the loss
is reported, split by whether the event was published before, during or after the
rollout.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from meshsim.vmesh.devices import scenario_sub_id
from meshsub.core.disjunction import delivery_group
from meshsub.core.syntax import parse_event, parse_subscription

Owed = tuple[int, str, str]
"""(subscribing node, subscription id, event id)."""


@dataclass
class WindowFigures:
    events: int = 0
    owed: int = 0
    delivered: int = 0

    @property
    def lost(self) -> int:
        return self.owed - self.delivered

    @property
    def ratio(self) -> float | None:
        return None if self.owed == 0 else self.delivered / self.owed


@dataclass
class Account:
    acknowledged: dict[int, int]
    """Publications the broker acknowledged to each node's applications."""
    accepted: dict[int, int]
    """Events each node's daemon accepted (its ``publish`` records)."""
    owed: set[Owed]
    delivered: set[Owed]
    """Owed deliveries the applications received (first copies)."""
    duplicates: int
    """Deliveries the applications received more than once."""
    unowed: set[Owed]
    """Deliveries nobody was owed (a wrong match, or an unknown event)."""
    windows: dict[str, WindowFigures] = field(default_factory=dict)

    @property
    def lost(self) -> set[Owed]:
        return self.owed - self.delivered

    @property
    def unaccepted(self) -> dict[int, int]:
        """Per node, acknowledged publications its daemon has no record of (lost before
        they entered the mesh)."""
        return {n: k - self.accepted.get(n, 0) for n, k in self.acknowledged.items()
                if k > self.accepted.get(n, 0)}

    def summary(self) -> dict[str, Any]:
        owed, got = len(self.owed), len(self.delivered & self.owed)
        return {
            "acknowledged": sum(self.acknowledged.values()),
            "accepted": sum(self.accepted.values()),
            "unaccepted": sum(self.unaccepted.values()),
            "owed": owed, "delivered": got, "lost": owed - got,
            "delivery_ratio": None if owed == 0 else round(got / owed, 4),
            "duplicates": self.duplicates, "unowed": len(self.unowed),
            "windows": {name: {"events": w.events, "owed": w.owed, "delivered": w.delivered,
                               "lost": w.lost} for name, w in self.windows.items()},
        }


def account(records: Iterable[Mapping[str, Any]],
            agents: Mapping[int, Mapping[str, Any] | None],
            windows: Mapping[str, tuple[float, float]] | None = None) -> Account:
    """The account of one run; ``windows`` (name -> [start, end) in unix seconds) split
    the owed deliveries by their event's publication time."""
    subs: dict[tuple[int, str], tuple[int, Any]] = {}
    pubs: dict[str, tuple[int, int, Any]] = {}
    accepted: Counter[int] = Counter()
    for r in records:
        if r.get("event") == "subscribe":
            key = (int(r["node"]), scenario_sub_id(str(r["sub_id"])))
            if key not in subs or r["ts_ns"] < subs[key][0]:  # a restart re-reads it
                subs[key] = (int(r["ts_ns"]), parse_subscription(str(r["content"])))
        elif r.get("event") == "publish" and r["event_id"] not in pubs:
            pubs[str(r["event_id"])] = (int(r["node"]), int(r["ts_ns"]),
                                        parse_event(str(r["content"])))
            accepted[int(r["node"])] += 1
    owed_at: dict[Owed, int] = {}
    for eid, (_origin, ts, event) in pubs.items():
        for (node, sid), (since, sub) in subs.items():
            if since <= ts and sub.matches(event):  # a disjunction's members: one owed
                owed_at[(node, delivery_group(sid), eid)] = ts
    received: Counter[Owed] = Counter()
    acknowledged: Counter[int] = Counter()
    for node, report in agents.items():
        if not report:
            continue
        acknowledged[node] += sum(1 for a in report.get("actions", [])
                                  if a.get("op") == "pub" and a.get("done"))
        for d in report.get("deliveries", []):
            body = d.get("body", {})
            if isinstance(body, dict) and "sub_id" in body and "event_id" in body:
                received[(node, scenario_sub_id(str(body["sub_id"])),
                          str(body["event_id"]))] += 1
    owed = set(owed_at)
    result = Account(
        acknowledged=dict(acknowledged), accepted=dict(accepted), owed=owed,
        delivered=set(received) & owed,
        duplicates=sum(n - 1 for n in received.values() if n > 1),
        unowed=set(received) - owed)
    for name, (start, end) in (windows or {}).items():
        lo, hi = round(start * 1e9), round(end * 1e9)
        inside = {o for o, ts in owed_at.items() if lo <= ts < hi}
        result.windows[name] = WindowFigures(
            events=sum(1 for _o, ts, _e in pubs.values() if lo <= ts < hi),
            owed=len(inside), delivered=len(inside & result.delivered))
    return result


def frames_before_restore(
        records: Iterable[Mapping[str, Any]]) -> dict[tuple[int, int], Counter[str]]:
    """Per (node, boot epoch) of a restarted subscriber, the frames (``rx`` records, by
    ``msg_kind``) its daemon took before its persisted subscriptions were restored (the
    epoch's first ``subscribe`` record). A node's first epoch is left out: its
    subscriptions are made by the applications, later. A frame taken then meets a
    protocol without the node's subscriptions: an event in it is carried and marked
    seen but never delivered to them (docs/vmesh.md, "Rolling upgrades")."""
    first_sub: dict[tuple[int, int], int] = {}
    rx: list[tuple[int, int, int, str]] = []
    epochs: dict[int, set[int]] = {}
    for r in records:
        if "epoch" not in r:
            continue
        node, epoch, ts = int(r["node"]), int(r["epoch"]), int(r["ts_ns"])
        epochs.setdefault(node, set()).add(epoch)
        if r.get("event") == "subscribe":
            key = (node, epoch)
            first_sub[key] = min(ts, first_sub.get(key, ts))
        elif r.get("event") == "rx":
            rx.append((node, epoch, ts, str(r.get("msg_kind", "?"))))
    out: dict[tuple[int, int], Counter[str]] = {}
    for node, epoch, ts, kind in rx:
        since = first_sub.get((node, epoch))
        if since is not None and epoch != min(epochs[node]) and ts < since:
            out.setdefault((node, epoch), Counter())[kind] += 1
    return out


TRACED = ("rx", "deliver", "drop", "subscribe")
"""The subscriber's records a lost delivery is traced through (``trace``)."""


def trace(records: Iterable[Mapping[str, Any]], lost: Owed,
          restarts: Mapping[int, tuple[float, float]] | None = None,
          agent: Mapping[str, Any] | None = None) -> list[str]:
    """Where one lost delivery went missing, in the subscriber's own records: one line for
    the event's publication, one per record of the subscribing node about that event
    (``rx``, ``deliver``, ``drop``) and per (re)subscription of the subscription, the
    node's daemon restart (``restarts``: node -> (stopped, active again), unix seconds)
    and the errors its workload agent met (``agent``: its report; a broker that went
    away), all in seconds after the publication; so that a run's artefacts name the
    layer that lost it (never received, received before the subscription was back,
    delivered by the protocol but dropped on the way to the broker, ...)."""
    node, sid, eid = lost
    published: float | None = None
    origin: int | None = None
    lines: list[tuple[float, str]] = []
    for r in records:
        if r.get("event") == "publish" and r.get("event_id") == eid and published is None:
            published, origin = int(r["ts_ns"]) / 1e9, int(r["node"])
    base = published if published is not None else 0.0
    for r in records:
        if int(r.get("node", -1)) != node or r.get("event") not in TRACED:
            continue
        if r["event"] == "subscribe":
            if scenario_sub_id(str(r.get("sub_id"))) != sid:
                continue
        elif r.get("event_id") != eid:
            continue
        extra = " ".join(f"{k}={r[k]}" for k in ("epoch", "peer", "hop", "sub_id", "reason")
                         if k in r)
        lines.append((int(r["ts_ns"]) / 1e9 - base, f"{r['event']} {extra}".rstrip()))
    if restarts and node in restarts:
        stopped, active = restarts[node]
        lines.append((stopped - base, "daemon stopped (systemd)"))
        lines.append((active - base, "daemon active again (systemd)"))
    for err in (agent or {}).get("errors", []):
        if isinstance(err, dict) and isinstance(err.get("ts"), int | float):
            lines.append((float(err["ts"]) - base, f"agent: {err.get('error', err)}"))
    head = (f"lost: event {eid} (published by node {origin}) to node {node} "
            f"subscription {sid}" if published is not None
            else f"lost: event {eid} (no publish record) to node {node} subscription {sid}")
    return [head] + [f"  {t:+9.3f} s  {what}" for t, what in sorted(lines)]
