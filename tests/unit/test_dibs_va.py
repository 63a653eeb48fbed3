"""DIBS's VA arithmetic and zones against the worked example of Pham and Tran (2012, Figs. 1-3).

Vectors (k = 7): the clusters of references D and K as the paper's text fixes
them (docs/protocols/dibs.md, "Worked example"), their prefix and key zones,
the designated nodes of keys 45 and 34 in both clusters, the tree metric along
the Fig. 3 path, and the gap and storage-rule examples.
"""

from __future__ import annotations

import itertools

import pytest

from meshsub.protocols.dibs import va as v

K = 7
CL_D = {"D": "", "H": "1", "U": "01", "B": "001", "A": "0001", "G": "011", "J": "0101",
        "W": "01011"}
CL_K = {"K": "", "Kc": "1", "P": "11", "S": "111", "I": "01", "Y": "011", "L": "0101",
        "I2": "01001", "C": "010001"}


def slots_of(cluster: dict[str, str], name: str) -> list[int]:
    """Slots of ``name``'s successors, read off the VAs (va(child) = va + 0^i 1)."""
    me = cluster[name]
    out = []
    for other in cluster.values():
        rest = other[len(me):]
        if other.startswith(me) and rest and rest.endswith("1") and rest.count("1") == 1:
            out.append(len(rest) - 1)
    return out


def test_child_va_is_the_prefix_rule() -> None:
    assert [v.child_va("", i) for i in range(4)] == ["1", "01", "001", "0001"]
    assert v.child_va("01", 1) == "0101"
    assert v.depth("01011") == 3
    with pytest.raises(v.VAError):
        v.child_va("1", -1)


@pytest.mark.parametrize(("name", "pz", "kz"), [
    ("D", (0, 127), [(0, 7)]),
    ("U", (32, 63), [(32, 39)]),
    ("J", (40, 47), [(40, 43)]),
    ("W", (44, 47), [(44, 47)]),
])
def test_zones_of_cluster_d(name: str, pz: tuple[int, int], kz: list[tuple[int, int]]) -> None:
    assert v.pzone(CL_D[name], K) == pz
    assert v.kzone(CL_D[name], slots_of(CL_D, name), K) == kz


def test_zones_of_cluster_k_node_i() -> None:
    assert sorted(slots_of(CL_K, "I")) == [0, 1, 2, 3]
    assert v.kzone("01", [0, 1, 2, 3], K) == [(32, 33)]


def test_key_zones_partition_each_cluster() -> None:
    for cluster in (CL_D, CL_K):
        zones = sorted(z for n in cluster for z in v.kzone(cluster[n], slots_of(cluster, n), K))
        assert zones[0][0] == 0 and zones[-1][1] == 127
        assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(zones))


def test_designated_nodes_of_the_example() -> None:
    assert v.designated(CL_D.values(), 45, K) == CL_D["W"]
    assert v.designated(CL_K.values(), 45, K) == CL_K["L"]
    assert v.designated(CL_D.values(), 34, K) == CL_D["U"]
    assert v.designated(CL_K.values(), 34, K) == CL_K["C"]
    assert v.owns(CL_D["W"], [], 45, K) and not v.owns(CL_D["J"], [0], 45, K)


def test_tree_metric_along_the_fig3_path() -> None:
    dst = v.key_bits(45, K)
    assert dst == "0101101"
    assert v.tree_metric(CL_D["G"], dst) == 0
    assert v.tree_metric(CL_D["J"], dst) == -2
    assert v.tree_metric(CL_D["W"], dst) == -3
    assert v.lca_prefix("011", "0101") == "01"


def test_a_freed_slot_leaves_a_gap() -> None:
    assert v.kzone("", [0, 2], 4) == [(0, 1), (4, 7)]
    assert v.meets(v.kzone("", [0, 2], 4), 5, 6)
    assert v.owns("", [0, 2], 5, 4)


def test_the_paper_storage_rule_is_wider_than_the_exact_one() -> None:
    """k = 4, root successors '1', '01', '001': [4, 9] meets no key of the root's zone."""
    kz = v.kzone("", [0, 1, 2], 4)
    assert kz == [(0, 1)]
    assert not v.meets(kz, 4, 9)
    assert not any(v.within(v.pzone(v.child_va("", s), 4), 4, 9) for s in (0, 1, 2))


def test_a_va_longer_than_k_owns_nothing() -> None:
    assert v.pzone("1" * 8, K) is None
    assert v.kzone("1" * 8, [], K) == []
    assert v.kzone("", [9], K) == [(0, 127)]
