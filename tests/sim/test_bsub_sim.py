"""B-SUB, PUSH and PULL in the simulator on a shortened Haggle-like trace (Zhao and Wu 2010, §VII).

The calibrated trace is cut to a few hours and 40 nodes (with the contact rate
per pair kept) so that the three runs and the DF sweep stay cheap; the full
sweeps are experiments/bsub.sweep.toml (docs/experiments.md). Metrics come from the
telemetry records (an in-memory sink, ``bsub_metrics``), as mesheval computes them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from bsub_metrics import MemorySink, metrics

from meshsim.des.engine import Simulation
from meshsim.scenario import load_scenario
from meshsim.scenario.load import from_dict

pytestmark = pytest.mark.slow  # about a minute of simulation in all

SCENARIO = (Path(__file__).resolve().parents[2] / "firmware-sim" / "meshsim" / "scenarios"
            / "bsub-haggle.toml")
DAYS = 0.25
NODES = 40
TTL = 7200.0
# the Haggle preset's contacts per pair per day, for 40 nodes over DAYS
CONTACTS = round(67_360 / 3 * DAYS * (NODES * (NODES - 1)) / (79 * 78))


def run(protocol: str, *extra: str) -> tuple[dict[str, float], list[Any], Simulation]:
    sets = [f"nodes.count={NODES}", f"scenario.duration_s={DAYS * 86400}",
            f"contacts.generate.days={DAYS}", f"contacts.generate.contacts={CONTACTS}",
            "workload.generator.rate_per_s=0.006", f"protocol.name={protocol}"]
    if protocol == "epidemic":
        sets.append(f"protocol.epidemic={{ ttl_s = {TTL}, buffer_size = 100000 }}")
    elif protocol == "pull":
        sets.append(f"protocol.pull.TTL={TTL}")
    else:
        sets.append(f"protocol.bsub.TTL={TTL}")
    scenario = load_scenario(SCENARIO, [*sets, *extra])
    sink = MemorySink()
    sim = Simulation(scenario, sink)
    sim.run()
    return metrics(sink.records, NODES, TTL, scenario.end_s), sink.records, sim


@pytest.fixture(scope="module")
def runs() -> dict[str, tuple[dict[str, float], list[Any], Simulation]]:
    return {p: run(p) for p in ("epidemic", "bsub", "pull")}


def test_delivery_ordering_and_bsub_close_to_push(runs: dict[str, Any]) -> None:
    push, bsub, pull = (runs[p][0]["delivery_ratio"] for p in ("epidemic", "bsub", "pull"))
    assert runs["bsub"][0]["pairs"] > 100  # enough (message, consumer) pairs to judge
    assert push >= bsub >= pull
    # Measured at this short TTL (2 h): B-SUB 0.73, PUSH 1.0, PULL 0.27 per (message,
    # consumer) pair. The paper's "only slightly lower" does not hold per pair at short
    # TTLs: a message has at most C + 1 = 4 carriers (producer, C broker copies; handoffs
    # move custody), PUSH has every node it met, so B-SUB's delay is several times
    # PUSH's and fewer pairs make a short TTL (docs/results/bsub.md: at TTL 10-20 h the
    # gap closes, and with the copy limit lifted it shrinks). B-SUB must still recover
    # most of what PUSH delivers and clearly beat PULL.
    assert bsub >= 0.6 * push
    assert bsub >= pull + 0.2
    # Per message (delivered to at least one interested consumer) B-SUB is close to PUSH.
    push_any, bsub_any = (runs[p][0]["delivered_any"] for p in ("epidemic", "bsub"))
    assert bsub_any >= 0.85 * push_any


def test_forwardings_per_delivery_ordering(runs: dict[str, Any]) -> None:
    push, bsub, pull = (runs[p][0]["forwardings_per_delivery"]
                        for p in ("epidemic", "bsub", "pull"))
    assert push > bsub > pull
    assert pull == pytest.approx(1.0, abs=0.05)  # one hop, never a wasted send


def test_no_false_positive_ever_reaches_an_application(runs: dict[str, Any]) -> None:
    for _, records, _ in runs.values():
        subs = {(node, attrs["sub_id"]): attrs["topic"]
                for node, _, event, attrs in records if event == "subscribe"}
        topics = {attrs["event_id"]: attrs["topic"]
                  for _, _, event, attrs in records if event == "publish"}
        delivered = [(node, attrs) for node, _, event, attrs in records if event == "deliver"]
        assert delivered
        for node, attrs in delivered:
            assert subs[(node, attrs["sub_id"])] == topics[attrs["event_id"]]
        keys = [(node, a["event_id"], a["sub_id"]) for node, a in delivered]
        assert len(keys) == len(set(keys))  # and never twice


def test_broker_share_near_thirty_percent(runs: dict[str, Any]) -> None:
    assert 0.15 <= runs["bsub"][0]["broker_share"] <= 0.45


def test_df_sweep_delivery_and_forwardings_fall_towards_one(runs: dict[str, Any]) -> None:
    """As DF rises, delivery and forwardings fall and forwardings approach 1 (paper §VII).

    Not asserted, because they do not hold here (docs/results/bsub.md says why):
    the paper's "delay falls with DF" (at large DF B-SUB degenerates to PULL, whose
    delay is the largest, so the mean delay of delivered messages rises: measured
    0.63 h at Eq. 5's DF, 0.83 h at 20/min), and "DF = 0 behaves like flooding"
    (without decay the 1-byte counters saturate at 255, M-merges equalise them,
    PREF is 0 and handoffs stop: fewer forwardings than at Eq. 5's DF, not more).
    """
    eq5 = runs["bsub"][0]  # DF from Eq. 5: I/T = 0.42/min at T = TTL = 2 h
    high = run("bsub", f"protocol.bsub.DF={20.0 / 60}")[0]
    assert high["delivery_ratio"] < eq5["delivery_ratio"]
    assert high["forwardings_per_delivery"] < eq5["forwardings_per_delivery"]
    assert high["forwardings_per_delivery"] < 2.0  # at large DF, B-SUB works like PULL
    assert high["delivery_ratio"] >= runs["pull"][0]["delivery_ratio"]


def cut_doc(cut_at: float) -> dict[str, Any]:
    """Brokers 2 and 3 (all pinned), consumers 0 and 4, producer 1; the 2-3 contact that
    carries the handoff is cut at ``cut_at`` and comes back at t = 200."""
    events = ["0 CONN 0 3 up", "10 CONN 0 3 down", "20 CONN 0 3 up", "30 CONN 0 3 down",
              "40 CONN 4 2 up", "50 CONN 4 2 down", "70 CONN 1 2 up", "80 CONN 1 2 down",
              "100 CONN 2 3 up", f"{cut_at} CONN 2 3 down", "200 CONN 2 3 up",
              "260 CONN 2 3 down", "300 CONN 3 0 up", "360 CONN 3 0 down"]
    return {
        "scenario": {"name": "cut", "duration_s": 400.0},
        "area": {"width_m": 100.0, "height_m": 100.0},
        "radio": {"bitrate_bps": 2000.0},
        "nodes": {"placement": "grid", "count": 5, "first_id": 0},
        "contacts": {"events": events},
        "protocol": {"name": "bsub", "bsub": {"role_mode": "pinned_broker", "DF": 0.0}},
        "workload": {
            "subscriptions": [{"node": 0, "expr": "NewMoon"}, {"node": 4, "expr": "NewMoon"}],
            "publications": [{"t": 60.0, "node": 1, "event": "NewMoon body=hello"}],
        },
    }


def test_contact_cut_mid_handoff_loses_and_duplicates_nothing() -> None:
    sink = MemorySink()
    sim = Simulation(from_dict(cut_doc(101.0)), sink)
    stats = sim.run()
    handoffs = [(t, node, a) for node, t, event, a in sink.records
                if event == "tx" and node == 2 and a.get("peer") == 3]
    assert handoffs and handoffs[0][0] < 101.0 < 200.0  # the first one left before the cut
    assert stats.lost >= 1  # ...and died in flight with the contact
    (mid,) = {a["event_id"] for _, _, e, a in sink.records if e == "publish"}
    protos = {n: st.proto for n, st in sim.nodes.items()}
    assert mid in {str(m) for m in protos[3].buffer.summary_vector()}  # type: ignore[attr-defined]
    assert mid not in {str(m) for m in protos[2].buffer.summary_vector()}  # type: ignore[attr-defined]
    delivered = sorted((node, a["sub_id"]) for node, _, e, a in sink.records if e == "deliver")
    assert delivered == [(0, "s0")]  # once (4 meets nobody after the publication)


def test_broker_held_copies_never_exceed_c(runs: dict[str, Any]) -> None:
    """Spec 001 §8 item 16 at the end of the run (no loss on this trace: no duplicates)."""
    from collections import Counter

    from meshsub.protocols.bsub import BSub
    from meshsub.protocols.bsub.carried import Carried, Kind

    sim = runs["bsub"][2]
    relay_copies: Counter[Any] = Counter()
    for st in sim.nodes.values():
        proto = st.proto
        assert isinstance(proto, BSub)
        for message in proto.buffer:
            if Carried.from_message(message).kind is Kind.RELAY:
                relay_copies[message.id] += 1
    assert relay_copies and max(relay_copies.values()) <= proto.params.C
