"""PUMA, paging and GIANT against arbitrary input: every body decoder, every role, no exception.

Malformed input must be a counted drop (``malformed`` or ``unknown_type``),
never an exception; well-formed bodies round-trip. Plus the properties of
RecruitFerry (Algorithm 6.1) and of the versioned lease table.
"""

from __future__ import annotations

import contextlib
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from meshsub.core.api import FrameReceived, Message, MessageId, NeighborInfo, NeighborUp
from meshsub.core.bodies import BodyError
from meshsub.core.grid import Cell
from meshsub.core.lattice import hit_probability
from meshsub.core.leases import Upsert, VersionedLeases
from meshsub.core.params import parse_params
from meshsub.core.protocol import Protocol
from meshsub.core.syntax import parse_event, parse_subscription
from meshsub.protocols.giant import Giant, GiantParams
from meshsub.protocols.giant import messages as gm
from meshsub.protocols.giant.recruit import achieved, recruit_ferry
from meshsub.protocols.puma import Paging, PagingParams, Puma, PumaParams
from meshsub.protocols.puma import messages as pm

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**64), 2**64),
                    st.floats(allow_nan=True), st.text(max_size=12), st.binary(max_size=12))
bodies = st.recursive(scalars, lambda c: st.one_of(st.lists(c, max_size=9),
                                                   st.dictionaries(st.text(max_size=4), c,
                                                                   max_size=3)),
                      max_leaves=40)
small = st.integers(0, 30)
cell_wire = st.lists(small, min_size=2, max_size=2)
mid_wire = st.lists(st.integers(0, 2**32 - 1), min_size=3, max_size=3)
event_wire = st.just(parse_event("temp value=5").to_wire())
sub_wire = st.just(parse_subscription("temp value>1").to_wire())
tree_wire = st.lists(st.lists(st.integers(-2, 40), min_size=3, max_size=3), max_size=6)
# Bodies close to valid ones, to reach deep into the decoders.
near_valid = st.one_of(
    st.lists(st.one_of(small, cell_wire, mid_wire, event_wire, sub_wire, tree_wire,
                       st.booleans(), st.floats(0, 100), st.text(max_size=6), st.none()),
             min_size=1, max_size=10),
    bodies,
)

PUMA_DECODERS = [pm.Beacon.decode, pm.Subscribe.decode, pm.Publish.decode,
                 pm.SubPropagate.decode, pm.UnsubPropagate.decode, pm.EventMsg.decode,
                 pm.Deliver.decode, pm.Local.decode, pm.Page.decode, pm.Routed.decode,
                 pm.DeliveryTree.decode]
GIANT_DECODERS = [gm.Hello.decode, gm.Adv.decode, gm.Bundle.decode, gm.EventItem.decode,
                  gm.SubItem.decode, gm.SenderRecord.decode]


@SETTINGS
@given(near_valid)
def test_decoders_raise_only_body_errors(body: Any) -> None:
    for decode in (*PUMA_DECODERS, *GIANT_DECODERS):
        with contextlib.suppress(BodyError):
            decode(body)


def _nodes() -> list[tuple[Protocol, list[int]]]:
    def puma(cls: type[Any], params: type[Any], role: str) -> Protocol:
        p = parse_params(params, {"role": role, "cols": 5, "rows": 5, "cell_x": 2, "cell_y": 2}
                         if role == "base" else {"role": role, "cols": 5, "rows": 5})
        return cls(1, params=p)  # type: ignore[no-any-return]
    out: list[tuple[Protocol, list[int]]] = []
    for cls, params in ((Puma, PumaParams), (Paging, PagingParams)):
        for role in ("base", "client"):
            out.append((puma(cls, params, role), list(range(16, 31))))
    for role in ("broker", "ferry"):
        g = Giant(1, params=parse_params(GiantParams, {"role": role, "cell_x": 1, "cell_y": 1}
                                         if role == "broker" else {"role": role}))
        out.append((g, [gm.HELLO, gm.BUNDLE, gm.ADV, 40]))
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(near_valid)
def test_any_frame_is_handled_or_a_counted_drop(body: Any) -> None:
    for proto, types in _nodes():
        proto.handle(NeighborUp(0.0, NeighborInfo(2)))
        for mtype in types:
            before = sum(proto.drops.values())
            proto.handle(FrameReceived(1.0, 2, Message(mtype, MessageId(2, 0, mtype), body)))
            if not isinstance(body, list):  # never a valid body: must be counted
                assert sum(proto.drops.values()) > before


def test_round_trips() -> None:
    ev = parse_event("temp value=5")
    flt = parse_subscription("temp value>1")
    tree = pm.DeliveryTree.decode([[2, 2, -1], [2, 3, 0], [1, 2, 0], [1, 1, 2]])
    deliver = pm.Deliver(1000, 13, Cell(2, 2), pm.Phase.COLD, 1.5, ev, tree)
    assert pm.Deliver.decode(deliver.encode_with([[2, 2, -1], [2, 3, 0], [1, 2, 0],
                                                  [1, 1, 2]])) == deliver
    assert tree.child_subtrees() == {Cell(2, 3): [[2, 3, -1]],
                                     Cell(1, 2): [[1, 2, -1], [1, 1, 0]]}
    for obj in (pm.Beacon(Cell(1, 2)), pm.Subscribe("s", 3, flt), pm.Publish(ev, 2.0),
                pm.SubPropagate("a/b/c", 9, flt, Cell(0, 1), 300.0), pm.UnsubPropagate("x", 1),
                pm.Local(5, Cell(0, 0), 4, 1.0, ev, True),
                pm.Page(Cell(1, 1), 9, 5, Cell(2, 2), 1, 0.0, ev),
                pm.Routed(Cell(0, 0), 9, Cell(1, 1), 5, (1, 2))):
        assert type(obj).decode(obj.encode()) == obj
    item = gm.SubItem("n/s", 7, Cell(0, 0), "temp", flt, 0.9, 2, 100.0, (Cell(3, 3),))
    for g in (gm.Hello(True, None, (MessageId(1, 2, 3),)), gm.Hello(False, Cell(1, 1), ()),
              gm.Adv("temp", Cell(0, 0), (gm.SenderRecord(Cell(1, 1), 2, 1, 2, True),), 5.0),
              gm.Bundle(gm.Kind.SUB, Cell(0, 0), Cell(3, 3), 0.9, 50.0, item),
              gm.Bundle(gm.Kind.EVENT, Cell(3, 3), Cell(0, 0), 0.5, 5.0,
                        gm.EventItem(MessageId(1, 0, 4), Cell(0, 0), "temp", ev, 1.0))):
        assert type(g).decode(g.encode()) == g


def test_trees_that_are_not_trees_are_refused() -> None:
    for bad in ([], [[1, 1, 0]], [[1, 1, -1], [3, 3, 0]], [[1, 1, -1], [1, 2, 0], [1, 2, 0]],
                [[1, 1, -1], [1, 2, 1]], [[1, 1, -1], [1, 2, -1]]):
        try:
            pm.DeliveryTree.decode(bad)
        except BodyError:
            continue
        raise AssertionError(f"accepted {bad}")


elapsed = st.lists(st.integers(0, 300), max_size=12)


@SETTINGS
@given(st.integers(0, 8), st.integers(0, 8), elapsed, st.floats(0.05, 0.99),
       st.integers(1, 50))
def test_recruit_ferry_properties(i: int, j: int, times: list[int], prob: float,
                                  later: int) -> None:
    if i == j == 0:
        return
    assert recruit_ferry(i, j, [], prob, hit_probability)  # no copy yet: recruit
    decision = recruit_ferry(i, j, times, prob, hit_probability)
    assert decision == (achieved(i, j, times, hit_probability) <= prob)
    if not decision:  # once enough, enough for ever (monotone in time)
        assert not recruit_ferry(i, j, [t + later for t in times], prob, hit_probability)
        assert not recruit_ferry(i, j, [*times, 0], prob, hit_probability)


@SETTINGS
@given(st.lists(st.tuples(st.sampled_from(["up", "rm"]), st.integers(0, 3),
                          st.integers(0, 6)), max_size=40))
def test_leases_never_go_back_in_version(ops: list[tuple[str, int, int]]) -> None:
    table: VersionedLeases[int, str] = VersionedLeases(capacity=3, tombstones=8)
    newest: dict[int, int] = {}
    for op, key, version in ops:
        if op == "up":
            outcome = table.upsert(key, f"v{version}", version, 100.0)
            if outcome in (Upsert.NEW, Upsert.UPDATED):
                assert version > newest.get(key, -1)
        else:
            before = table.entry(key)
            held_version = None if before is None else before.version
            table.remove(key, version, 100.0)
            if held_version is None or held_version <= version:
                seen_after = table.version(key)
                assert key not in table and seen_after is not None and seen_after >= version
            else:  # a newer entry than the removal stays
                after = table.entry(key)
                assert after is not None and after.version == held_version
        seen = table.version(key)
        if seen is not None:
            newest[key] = max(newest.get(key, -1), seen)
        held = table.entry(key)
        if held is not None:
            assert held.version == newest[key]
    assert len(table) <= 3
