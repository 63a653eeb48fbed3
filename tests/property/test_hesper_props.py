"""Spec 004 §4.8 items 1-6 as properties: election, spreading, path shapes, trees, II, covering."""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter
from collections.abc import Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from meshsim.des.engine import Simulation
from meshsim.scenario import from_dict
from meshsub.core.api import TelemetryValue
from meshsub.core.grid import chebyshev
from meshsub.core.hashpoint import topic_offset
from meshsub.protocols.hesper.election import Member, elect
from meshsub.protocols.hesper.sectors import classify, hesper_i_path, is_open_part, next_offsets

offsets = st.tuples(st.integers(-30, 30), st.integers(-30, 30))
members = st.dictionaries(
    st.integers(0, 2**32 - 1),
    st.builds(Member, st.tuples(st.floats(0, 50), st.floats(0, 50)),
              st.floats(0, 1), st.booleans()),
    min_size=1, max_size=15,
)


# ------------------------------------------------------------- 1. deterministic election


@settings(max_examples=200, deadline=None)
@given(members, st.text(min_size=1, max_size=20), st.randoms(use_true_random=False))
def test_election_is_a_function_of_the_view(view: dict[int, Member], topic: str,
                                            rnd: random.Random) -> None:
    ux, uy = topic_offset(topic)
    point = (ux * 50, uy * 50)
    first = elect(view, point, 0.3)
    items = list(view.items())
    rnd.shuffle(items)
    assert elect(dict(items), point, 0.3) == first
    assert first in view
    eligible = [n for n, m in view.items() if m.eligible(0.3)]
    if eligible:
        d = {n: math.dist(view[n].pos, point) for n in eligible}
        assert d[first] == min(d.values())


# ------------------------------------------------------------------ 2. topic spreading


def test_topic_hash_points_are_uniform_and_spread_over_nodes() -> None:
    points = [topic_offset(f"topic/{i}") for i in range(1000)]
    bins = Counter((int(x * 4), int(y * 4)) for x, y in points)
    chi2 = sum((bins.get((i, j), 0) - 62.5) ** 2 / 62.5 for i in range(4) for j in range(4))
    assert chi2 < 37.70  # chi-squared, 15 degrees of freedom, alpha = 0.001
    rng = random.Random(5)
    view = {n: Member((rng.uniform(0, 1), rng.uniform(0, 1))) for n in range(9)}
    load = Counter(elect(view, p, 0.3) for p in points)
    # Expected load of a node = 1000 x its Voronoi share (estimated by sampling).
    samples = [(rng.random(), rng.random()) for _ in range(20000)]
    share = Counter(elect(view, p, 0.3) for p in samples)
    for node in view:
        expected = 1000 * share[node] / len(samples)
        assert abs(load[node] - expected) <= 4 * math.sqrt(expected) + 5


# --------------------------------------------------------------- 3. HESPER-I path shape


@settings(max_examples=300, deadline=None)
@given(offsets)
def test_hesper_i_path_shape(start: tuple[int, int]) -> None:
    dx, dy = start
    path = hesper_i_path(dx, dy)
    assert len(path) - 1 == max(abs(dx), abs(dy))
    steps = [(b[0] - a[0], b[1] - a[1]) for a, b in itertools.pairwise(path)]
    n_axis = abs(abs(dx) - abs(dy))
    assert all(0 in s for s in steps[:n_axis])  # axis steps first ...
    assert all(0 not in s for s in steps[n_axis:])  # ... then only diagonal steps
    for a, b in itertools.pairwise(path):
        assert chebyshev(b, (0, 0)) == chebyshev(a, (0, 0)) - 1


# ---------------------------------------------------------------- 4. the union is a tree


@settings(max_examples=200, deadline=None)
@given(st.lists(offsets, min_size=1, max_size=60))
def test_hesper_i_union_is_an_in_tree(subscribers: list[tuple[int, int]]) -> None:
    parent: dict[tuple[int, int], tuple[int, int]] = {}
    total = 0
    for s in subscribers:
        path = hesper_i_path(*s)
        total += len(path) - 1
        for a, b in itertools.pairwise(path):
            assert parent.setdefault(a, b) == b  # one out-edge per cell: a function
    assert (0, 0) not in parent
    for cell in parent:  # every cell reaches the root without a cycle
        seen = set()
        while cell != (0, 0):
            assert cell not in seen
            seen.add(cell)
            cell = parent[cell]
    assert len(parent) <= total


# ----------------------------------------------------------------------- 5. HESPER-II


@settings(max_examples=300, deadline=None)
@given(offsets)
def test_hesper_ii_next_hop_sets(start: tuple[int, int]) -> None:
    dx, dy = start
    nxt = next_offsets(dx, dy, "II")
    if (dx, dy) == (0, 0):
        assert nxt == []
        return
    assert len(nxt) == (2 if is_open_part(classify(dx, dy)) else 1)
    for c in nxt:
        assert chebyshev(c, (0, 0)) == chebyshev((dx, dy), (0, 0)) - 1
    assert next_offsets(dx, dy, "I")[0] == nxt[0]


class _Sink:
    def __init__(self) -> None:
        self.records: list[tuple[int, int, str, dict[str, TelemetryValue]]] = []

    def record(self, node: int, ts_ns: int, event: str,
               attrs: Mapping[str, TelemetryValue]) -> None:
        self.records.append((node, ts_ns, event, dict(attrs)))


def _scenario(seed: int, variant: str, subs: list[dict[str, Any]],
              pubs: list[dict[str, Any]], count: int = 260) -> dict[str, Any]:
    s = 70.0 / math.sqrt(2)
    return {
        "scenario": {"name": "hp", "seed": seed, "duration_s": 20.0, "drain_s": 3.0},
        "area": {"width_m": 5 * s, "height_m": 5 * s},
        "radio": {"model": "unit_disk", "range_m": 70.0},
        "nodes": {"count": count, "placement": "random",
                  "pinned": [{"id": 1, "x": s / 2, "y": s / 2}]},
        "protocol": {"name": "hesper", "hesper": {
            "variant": variant, "TR": 70.0, "area_width_m": 5 * s, "area_height_m": 5 * s,
            "beacon_s": 0.0, "reliable_control": False}},
        "workload": {"subscriptions": subs, "publications": pubs},
    }


@settings(max_examples=8, deadline=None)
@given(st.integers(0, 10_000), st.lists(st.integers(2, 260), min_size=3, max_size=25,
                                          unique=True))
def test_hesper_ii_delivers_each_event_once_over_one_confirmed_path(
        seed: int, subscribers: list[int]) -> None:
    subs = [{"node": n, "expr": "temp gx=0 gy=0 value>5", "t": 1.0} for n in subscribers]
    pubs = [{"t": 8.0 + i, "node": 1, "event": f"temp gx=0 gy=0 value={v}"}
            for i, v in enumerate((3, 9, 20))]
    sim = Simulation(from_dict(_scenario(seed, "II", subs, pubs)))
    sim.run()
    got = Counter((d.event_id, d.node) for d in sim.stats.deliveries)
    assert max(got.values(), default=1) == 1
    published = [p.event_id for p in sim.stats.published]
    # Random placement may leave a cell empty; every subscriber still gets events 2 and 3.
    for ev in published[1:]:
        assert {n for (e, n) in got if e == ev} == set(subscribers)
    assert not any((e, n) in got for n in subscribers for e in published[:1])
    for node in sim.nodes.values():  # after CONFIRM: one upstream per entry, by construction
        for topic_state in node.proto.topics.values():  # type: ignore[attr-defined]
            for entry in topic_state.entries.values():
                assert not entry.active or entry.upstream is not None \
                    or node.proto.cell == entry.region  # type: ignore[attr-defined]


# ------------------------------------------------------------------ 6. stop on covering


@settings(max_examples=6, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from(["I", "II"]))
def test_a_covered_subscription_is_not_forwarded_past_its_shb(seed: int, variant: str) -> None:
    s = 70.0 / math.sqrt(2)
    doc = _scenario(seed, variant, [], [])
    sim0 = Simulation(from_dict(doc))
    cell = (4, 3)
    inside = [n for n, (x, y) in sim0.plan.positions.items()
              if (int(x // s), int(y // s)) == cell]
    if len(inside) < 2:
        return
    a, b = inside[:2]
    doc["workload"]["subscriptions"] = [
        {"node": a, "expr": "temp gx=0 gy=0 value>0", "t": 1.0},
        {"node": b, "expr": "temp gx=0 gy=0 value>10", "t": 10.0},
    ]
    sink = _Sink()
    Simulation(from_dict(doc), sink).run()
    later = [r for r in sink.records if r[2] == "tx" and r[1] >= 10e9
             and r[3].get("msg_kind") == "subscription"]
    assert len(later) <= 1  # client -> SHB only (0 if b is the SHB itself)
