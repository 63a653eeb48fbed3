"""The delivery account of a virtual-mesh run (no root): owed, delivered, lost, by window."""

from __future__ import annotations

from typing import Any

import pytest

from meshsim.vmesh.delivery import account, frames_before_restore, trace

S = 1_000_000_000


def sub(node: int, sid: str, expr: str, t: float) -> dict[str, Any]:
    return {"event": "subscribe", "node": node, "sub_id": sid, "content": expr,
            "ts_ns": round(t * S)}


def pub(node: int, eid: str, content: str, t: float) -> dict[str, Any]:
    return {"event": "publish", "node": node, "event_id": eid, "content": content,
            "ts_ns": round(t * S)}


def agent(pubs: int, *got: tuple[str, str]) -> dict[str, Any]:
    actions = [{"op": "pub", "done": 1.0} for _ in range(pubs)]
    actions.append({"op": "pub", "done": None, "error": "broker down"})  # never acknowledged
    return {"actions": actions,
            "deliveries": [{"ts": 0, "topic": "t", "body": {"sub_id": s, "event_id": e}}
                           for s, e in got]}


RECORDS = [
    sub(2, "hot", "sensors/# value>=20", 1), sub(3, "all", "sensors/#", 1),
    sub(3, "all", "sensors/#", 50),  # the same subscription re-read after a restart
    sub(1, "own", "sensors/#", 1),
    pub(1, "e1", "sensors/temp value=25", 10),  # owed to 2/hot, 3/all and 1/own (local)
    pub(1, "e2", "sensors/temp value=5", 30),  # owed to 3/all and 1/own
    pub(1, "e2", "sensors/temp value=5", 31),  # replayed from the outbox: one event
    pub(2, "e3", "sensors/temp value=30", 60),  # owed to 3/all, 1/own and 2/hot (local)
    pub(3, "e4", "alerts/x", 70),  # matches nobody
]


def test_owed_delivered_lost_and_duplicates() -> None:
    agents = {1: agent(2), 2: agent(1, ("hot", "e1")),
              3: agent(1, ("all", "e1"), ("all", "e1"), ("all", "e3"), ("all", "zz"))}
    acct = account(RECORDS, agents)
    assert acct.owed == {(2, "hot", "e1"), (3, "all", "e1"), (1, "own", "e1"),
                         (3, "all", "e2"), (1, "own", "e2"), (3, "all", "e3"), (1, "own", "e3"),
                         (2, "hot", "e3")}
    assert acct.delivered == {(2, "hot", "e1"), (3, "all", "e1"), (3, "all", "e3")}
    assert acct.lost == {(1, "own", "e1"), (3, "all", "e2"), (1, "own", "e2"),
                         (1, "own", "e3"), (2, "hot", "e3")}
    assert acct.duplicates == 1 and acct.unowed == {(3, "all", "zz")}
    assert acct.acknowledged == {1: 2, 2: 1, 3: 1} and acct.accepted == {1: 2, 2: 1, 3: 1}
    assert acct.unaccepted == {}
    s = acct.summary()
    assert (s["owed"], s["delivered"], s["lost"]) == (8, 3, 5)
    assert s["delivery_ratio"] == pytest.approx(3 / 8, abs=1e-3)


def test_an_acknowledged_event_the_daemon_never_took_is_counted() -> None:
    acct = account(RECORDS, {1: agent(3), 2: None})
    assert acct.unaccepted == {1: 1}
    assert acct.summary()["unaccepted"] == 1


def test_a_late_subscription_is_owed_only_later_events() -> None:
    acct = account([sub(2, "s", "a/#", 20), pub(1, "early", "a/x", 10),
                    pub(1, "late", "a/x", 30)], {})
    assert acct.owed == {(2, "s", "late")}


def test_windows_split_by_publication_time() -> None:
    agents = {2: agent(0, ("hot", "e1")), 3: agent(0, ("all", "e1"))}
    acct = account(RECORDS, agents, windows={"before": (0, 20), "during": (20, 55),
                                              "after": (55, 100)})
    w = acct.summary()["windows"]
    assert w["before"] == {"events": 1, "owed": 3, "delivered": 2, "lost": 1}
    assert w["during"] == {"events": 1, "owed": 2, "delivered": 0, "lost": 2}
    assert w["after"] == {"events": 2, "owed": 3, "delivered": 0, "lost": 3}


def test_the_daemons_names_of_the_agents_subscriptions_are_the_scenarios() -> None:
    """The daemon names an application's subscription ``<broker user>/<id>`` in its
    records and deliveries (docs/mqtt.md); the account names it as the scenario does."""
    records = [sub(2, "workload/hot", "sensors/#", 1), pub(1, "e1", "sensors/t value=1", 10)]
    acct = account(records, {1: agent(1), 2: agent(0, ("workload/hot", "e1"))})
    assert acct.owed == acct.delivered == {(2, "hot", "e1")}
    assert acct.lost == set() and acct.unowed == set()


def test_a_lost_delivery_is_traced_through_the_subscribers_records() -> None:
    """The subscriber's records about the event, its (re)subscriptions, its daemon's
    restart and its agent's errors, in publication-relative time; other nodes' records
    and other events are left out."""
    records = [
        sub(3, "workload/all", "sensors/#", 1),
        pub(1, "e1", "sensors/temp value=25", 10),
        {"event": "rx", "node": 3, "event_id": "e1", "peer": 2, "hop": 1, "epoch": 4,
         "ts_ns": round(10.5 * S)},
        sub(3, "workload/all", "sensors/#", 10.6),  # re-read after the restart
        {"event": "rx", "node": 2, "event_id": "e1", "peer": 1, "ts_ns": round(10.2 * S)},
        {"event": "deliver", "node": 3, "event_id": "e0", "sub_id": "all",
         "ts_ns": round(10.7 * S)},
    ]
    agent_report = {"errors": [{"ts": 12.0, "error": "broker: gone"}]}
    lines = trace(records, (3, "all", "e1"), {3: (9.0, 10.4)}, agent_report)
    assert lines[0] == "lost: event e1 (published by node 1) to node 3 subscription all"
    assert [line.split("s  ", 1)[1] for line in lines[1:]] == [
        "subscribe sub_id=workload/all", "daemon stopped (systemd)",
        "daemon active again (systemd)", "rx epoch=4 peer=2 hop=1",
        "subscribe sub_id=workload/all", "agent: broker: gone"]
    assert lines[2].startswith("     -1.000 s")
    assert trace([], (3, "all", "e9"))[0].startswith("lost: event e9 (no publish record)")


def test_frames_a_restarted_subscriber_took_before_its_subscriptions_were_back() -> None:
    def rec(event: str, node: int, epoch: int, t: float, **kw: Any) -> dict[str, Any]:
        return {"event": event, "node": node, "epoch": epoch, "ts_ns": round(t * S), **kw}

    records = [
        rec("rx", 3, 1, 0.5, msg_kind="beacon"),  # first epoch: before the agent subscribed
        rec("subscribe", 3, 1, 1.0, sub_id="all"),
        rec("rx", 3, 2, 20.0, msg_kind="data"), rec("rx", 3, 2, 20.001, msg_kind="beacon"),
        rec("subscribe", 3, 2, 20.01, sub_id="all"), rec("rx", 3, 2, 20.02, msg_kind="data"),
        rec("rx", 4, 2, 20.0, msg_kind="data"),  # a restarted publisher: no subscriptions
        rec("subscribe", 5, 1, 1.0, sub_id="all"), rec("subscribe", 5, 2, 30.0, sub_id="all"),
        rec("rx", 5, 2, 30.5, msg_kind="data"),  # after the restore
    ]
    assert frames_before_restore(records) == {(3, 2): {"data": 1, "beacon": 1}}
