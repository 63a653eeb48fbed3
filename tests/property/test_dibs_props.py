"""DIBS's trees under random joins and failures (Pham and Tran 2012, Properties 3.2-3.3).

Real DIBS nodes on the unit-test harness: a random connected graph, random
references, then a random sequence of node joins (links come up) and
failures (all links of a node go down). After quiescence, in every cluster
the key zones partition the key space, VAs are prefix-unique (each node's
VA is its predecessor's plus its own slot, and no two nodes of a cluster
share one), and each node's prefix zone is its key zone plus its
successors' prefix zones.
"""

from __future__ import annotations

import random

from dibs_world import bfs, check_trees, dibs, dibs_net, start
from hypothesis import example, given, settings
from hypothesis import strategies as st

from meshsub.protocols.dibs import DIBSParams
from meshsub.protocols.dibs import va as v

PARAMS = DIBSParams(k=12, hb_period=1.0)


@settings(max_examples=12, deadline=None)
@example(seed=2214354, ops=["fail", "join", "join"])  # an orphan whose lost predecessor was
# the (alive) reference excluded the whole cluster as "the failed node's subtree"
@example(seed=125, ops=["join", "fail", "join"])  # the failed node's VA reused by a newcomer
# after the slot hold-down: its new subtree was excluded for good
@given(st.integers(0, 2**32), st.lists(st.sampled_from(["join", "fail"]), min_size=1,
                                       max_size=4))
def test_zones_partition_and_vas_stay_unique_after_joins_and_failures(
        seed: int, ops: list[str]) -> None:
    rng = random.Random(seed)
    n = 18
    ids = list(range(1, n + 1))
    refs = set(rng.sample(ids, rng.choice([1, 2])))
    net = dibs_net(ids, refs, PARAMS)
    present = set(ids[:12]) | refs
    pos = {i: (rng.uniform(0, 60), rng.uniform(0, 60)) for i in ids}

    def near(a: int, b: int) -> bool:
        return (pos[a][0] - pos[b][0]) ** 2 + (pos[a][1] - pos[b][1]) ** 2 <= 30.0 ** 2

    for a in sorted(present):
        for b in sorted(present):
            if a < b and near(a, b):
                net.link(a, b)
    start(net, 20.0)
    for op in ops:
        if op == "join":
            new = [i for i in ids if i not in present]
            if not new:
                continue
            x = rng.choice(new)
            present.add(x)
            for b in sorted(present - {x}):
                if near(x, b):
                    net.link(x, b)
        else:
            victims = sorted(present - refs)
            if not victims:
                continue
            x = rng.choice(victims)
            present.discard(x)
            for b in net.neighbors(x):
                net.unlink(x, b)
        net.run(until=net.now + 15.0)
    reach: set[int] = set()
    for r in refs:
        reach |= set(bfs(net, r, present))
    check_trees(net, reach)
    k = PARAMS.k
    for node in reach:
        d = dibs(net, node)
        assert d.va is not None
        pz = v.pzone(d.va, k)
        parts = d.kzone() + [z for s in d.succ.values()
                             if (z := v.pzone(v.child_va(d.va, s), k)) is not None]
        if pz is not None:
            assert v.zone_size(parts) == pz[1] - pz[0] + 1
