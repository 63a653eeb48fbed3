"""B-SUB on the two virtual-mesh scenarios, in the simulator (Zhao and Wu 2010, §V-B to §V-D).

``vmesh-bsub-groups``: events published in group A reach the subscribers of
group B only through a courier that the users elected broker. ``vmesh-bsub-cut``:
a contact cut in the middle of a session that moves 48 broker copies, then met
again: every event reaches every matching subscription exactly once.

The checks read telemetry records only, and tests/vmesh/test_bsub_root.py
applies the same ones to the virtual mesh's records, so they hold for real
timing too: contacts are delimited by the nodes' own ``neighbor_up`` records,
never by wall-clock time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from meshsub.core.syntax import parse_event, parse_subscription
from meshsub.protocols.bsub.wire import DATA

GROUP_A = {1, 2, 3}
GROUP_B = {4, 5, 6}
COURIER = 7
PRODUCER, CARRIER, CONSUMERS = 1, 2, {3, 5}

Rec = dict[str, Any]


def expected_deliveries(recs: list[Rec]) -> set[tuple[int, str, str]]:
    """(node, sub_id, event_id) for every subscription an event matches (by content)."""
    pubs = [(r["node"], r["event_id"], parse_event(r["content"]))
            for r in recs if r["event"] == "publish"]
    subs = [(r["node"], r["sub_id"], parse_subscription(r["content"]))
            for r in recs if r["event"] == "subscribe"]
    return {(node, sub_id, eid) for node, sub_id, sub in subs
            for origin, eid, event in pubs if origin != node and sub.matches(event)}


def delivered_once(recs: list[Rec]) -> set[tuple[int, str, str]]:
    """The deliveries, asserting that none happened twice."""
    got = [(r["node"], r["sub_id"], r["event_id"]) for r in recs if r["event"] == "deliver"]
    assert len(got) == len(set(got)), sorted(got)
    return set(got)


def data_rx(recs: list[Rec], node: int) -> list[Rec]:
    """B-SUB DATA frames ``node`` accepted, in time order."""
    return sorted((r for r in recs if r["event"] == "rx" and r["node"] == node
                   and r.get("msg_type") == DATA), key=lambda r: r["ts_ns"])


def broker_since(recs: list[Rec], node: int, ts_ns: int) -> bool:
    """Whether ``node``'s latest role record before ``ts_ns`` says broker."""
    roles = sorted((r["ts_ns"], r["role"]) for r in recs
                   if r["event"] == "broker" and r["node"] == node and r["ts_ns"] <= ts_ns)
    return bool(roles) and roles[-1][1] == "broker"


def check_groups(recs: list[Rec]) -> dict[str, Any]:
    """vmesh-bsub-groups: A's events reach B's subscribers once each, through broker 7."""
    expected = expected_deliveries(recs)
    pubs = {r["event_id"]: r for r in recs if r["event"] == "publish"}
    assert {r["node"] for r in pubs.values()} <= GROUP_A
    assert {node for node, _, _ in expected} == GROUP_B and len(expected) == 12
    assert delivered_once(recs) == expected
    # the groups never met: no link between A and B all run long
    assert not [r for r in recs if r["event"] == "neighbor_up"
                and {r["node"], r["peer"]} & GROUP_A and {r["node"], r["peer"]} & GROUP_B]
    carried_at = {}
    for node, _, eid in expected:
        first = next(r for r in data_rx(recs, node) if r["event_id"] == eid)
        carrier = first["peer"]
        assert carrier not in (node, pubs[eid]["node"])
        assert carrier == COURIER, (node, eid, carrier)
        # the carrier got the event from its producer, as a broker
        got = next(r for r in data_rx(recs, carrier) if r["event_id"] == eid)
        assert got["peer"] == pubs[eid]["node"]
        assert broker_since(recs, carrier, got["ts_ns"]), (carrier, eid)
        carried_at[eid] = got["ts_ns"]
    # the events of t = 5 and 25 s were published before the courier first met group B
    met_b = min(r["ts_ns"] for r in recs if r["event"] == "neighbor_up"
                and r["node"] == COURIER and r["peer"] in GROUP_B)
    early = [e for e in carried_at if pubs[e]["ts_ns"] < met_b]
    assert len(early) >= 2, early
    # elected by A's users, it was a broker when it met B (and took B's interests)
    assert broker_since(recs, COURIER, met_b)
    return {"deliveries": len(expected), "events": len(pubs), "published_before_met_b": len(early),
            "courier_broker_ns": min(r["ts_ns"] for r in recs if r["event"] == "broker"
                                     and r["node"] == COURIER and r["role"] == "broker")}


def check_cut(recs: list[Rec]) -> dict[str, Any]:
    """vmesh-bsub-cut: the 1-2 contact ends mid-session; nothing lost, nothing twice."""
    expected = expected_deliveries(recs)
    pubs = {r["event_id"]: r["topic"] for r in recs if r["event"] == "publish"}
    assert len(pubs) == 48
    assert {(n, s) for n, s, _ in expected} == {(3, "all"), (5, "alarm")}
    assert {e for n, _, e in expected if n == 3} == {e for e, t in pubs.items() if t == "bulk/log"}
    assert delivered_once(recs) == expected
    for node in CONSUMERS:  # only through the broker (1 never meets 3 or 5)
        assert {r["peer"] for r in data_rx(recs, node)} == {CARRIER}
    # the carrier took the copies from the producer as a broker, in two contacts
    copies = [r for r in data_rx(recs, CARRIER) if r["peer"] == PRODUCER]
    assert broker_since(recs, CARRIER, copies[0]["ts_ns"])
    ups = sorted(r["ts_ns"] for r in recs if r["event"] == "neighbor_up"
                 and r["node"] == CARRIER and r["peer"] == PRODUCER)
    assert len(ups) == 2, ups
    before = {r["event_id"] for r in copies if r["ts_ns"] < ups[1]}
    after = {r["event_id"] for r in copies if r["ts_ns"] >= ups[1]}
    # the cut fell in the middle of the session: some copies before it, the rest after
    assert before and after and not before & after, (len(before), len(after))
    assert before | after == set(pubs)
    downs = [r["ts_ns"] for r in recs if r["event"] == "neighbor_down"
             and r["node"] == CARRIER and r["peer"] == PRODUCER and ups[0] < r["ts_ns"] < ups[1]]
    assert downs
    drops = sorted({r["reason"] for r in recs if r["event"] == "drop"})
    return {"deliveries": len(expected), "copies_before_cut": len(before),
            "copies_after_cut": len(after), "cut_seen_ns": downs[0],
            "last_copy_before_ns": max(r["ts_ns"] for r in copies if r["ts_ns"] < ups[1]),
            "reconnect_ns": ups[1], "drop_reasons": drops}


def _simulate(name: str, out: Path) -> list[Rec]:
    from simhelpers import SCENARIOS, read_run

    from meshsim.des.run import run_scenario
    from meshsim.scenario import load_scenario

    run_scenario(load_scenario(SCENARIOS / f"{name}.toml"), out)
    return read_run(out)[1]


@pytest.mark.parametrize("name", ["vmesh-bsub-groups", "vmesh-bsub-cut"])
def test_every_parameter_can_be_deployed(name: str) -> None:
    """The virtual mesh writes the parameters into the daemon's TOML, which has no null."""
    from simhelpers import SCENARIOS

    from meshsim.scenario import load_scenario
    from meshsim.vmesh.scenario_run import params_to_dict

    params = params_to_dict(load_scenario(SCENARIOS / f"{name}.toml").protocol.params)
    assert not [k for k, v in params.items() if v is None]


def test_groups_meet_through_an_elected_broker(tmp_path: Path) -> None:
    recs = _simulate("vmesh-bsub-groups", tmp_path / "run")
    figures = check_groups(recs)
    # in virtual time: 7 is a broker once it has left A (t ~ 18-22 s), before B (t ~ 39 s)
    assert 15e9 < figures["courier_broker_ns"] < 39e9
    print(figures)


def test_a_contact_cut_mid_session_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    recs = _simulate("vmesh-bsub-cut", tmp_path / "run")
    figures = check_cut(recs)
    # in virtual time the cut is at t = 50 s and the contact resumes at t = 62 s
    assert figures["last_copy_before_ns"] < 50e9 <= figures["cut_seen_ns"] < 62e9
    assert figures["reconnect_ns"] == 62e9
    assert figures["drop_reasons"] == ["false_positive_forward", "neighbor_down"]
    print(figures)
