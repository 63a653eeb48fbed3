"""Virtual addresses and key zones of CRES (Pham and Tran 2012, §3.1-3.2), as pure functions.

A virtual address (VA) is a bit string, kept here as a ``str`` of ``'0'`` and
``'1'``; a reference's is the empty string. A node that takes slot ``i``
below its predecessor gets ``va(pred) + '0' * i + '1'`` (§3.1, the VA prefix
rule), so every tree edge appends exactly one ``'1'`` and, within a cluster,
``va(A)`` is a proper prefix of ``va(X)`` exactly when ``A`` is an ancestor of
``X``.

Zones (Definition 3.1) restricted to ``k``-bit keys are integer intervals:

- the *prefix zone* ``pzone(va)``: every key with ``va`` as a prefix;
- the *key zone* of a node whose live successors hold ``slots``: its prefix
  zone minus its successors' prefix zones (Property 3.2), i.e. the keys for
  which its VA is the longest VA prefix in the cluster. In every cluster the
  key zones partition the key space (Property 3.3).

Routing to a key or a VA inside a cluster uses the tree-distance metric
``tree_metric`` (docs/protocols/dibs.md, deviation "prefix routing"): the
paper's "neighbour sharing a longer prefix" can loop (§3.2 taken literally),
the tree distance cannot.
"""

from __future__ import annotations

from collections.abc import Iterable

Interval = tuple[int, int]
"""A closed interval ``(lo, hi)`` of keys, ``lo <= hi``."""


class VAError(ValueError):
    """A bit string that is no valid VA (characters other than 0/1, too long)."""


def check_va(va: str, max_bits: int) -> str:
    if len(va) > max_bits or va.strip("01"):
        raise VAError(f"a VA is a string of at most {max_bits} bits")
    return va


def child_va(parent: str, slot: int) -> str:
    """The VA of the successor in ``slot`` (§3.1: ``va(X) + 0^i 1``)."""
    if slot < 0:
        raise VAError("a slot is >= 0")
    return parent + "0" * slot + "1"


def depth(va: str) -> int:
    """Tree depth of a node with this VA: one ``'1'`` per tree edge."""
    return va.count("1")


def key_bits(key: int, k: int) -> str:
    """``key`` as its ``k``-bit string, most significant bit first."""
    return format(key, f"0{k}b") if k else ""


def pzone(va: str, k: int) -> Interval | None:
    """The prefix zone among ``k``-bit keys; ``None`` when ``|va| > k``."""
    n = len(va)
    if n > k:
        return None
    base = (int(va, 2) if va else 0) << (k - n)
    return base, base + (1 << (k - n)) - 1


def kzone(va: str, slots: Iterable[int], k: int) -> list[Interval]:
    """The key zone among ``k``-bit keys, as sorted disjoint intervals.

    ``slots`` are the slots held by live successors; a slot freed below the
    highest one leaves a gap that belongs to this node again.
    """
    pz = pzone(va, k)
    if pz is None:
        return []
    lo, hi = pz
    out: list[Interval] = []
    cursor = lo
    for slot in sorted(set(slots), reverse=True):  # deepest zeros first: ascending keys
        child = pzone(child_va(va, slot), k)
        if child is None:
            continue
        if child[0] > cursor:
            out.append((cursor, child[0] - 1))
        cursor = max(cursor, child[1] + 1)
    if cursor <= hi:
        out.append((cursor, hi))
    return out


def meets(zone: Iterable[Interval], lo: int, hi: int) -> bool:
    """Does ``[lo, hi]`` intersect any interval of ``zone``?"""
    return any(a <= hi and lo <= b for a, b in zone)


def within(zone: Interval | None, lo: int, hi: int) -> bool:
    """Is ``[lo, hi]`` inside the single interval ``zone``?"""
    return zone is not None and zone[0] <= lo and hi <= zone[1]


def zone_size(zone: Iterable[Interval]) -> int:
    return sum(b - a + 1 for a, b in zone)


def lca_prefix(a: str, dst: str) -> str:
    """The longest common prefix of ``a`` and ``dst``, cut back to its last ``'1'``.

    Within one cluster this is the VA of the lowest common ancestor of the node
    with VA ``a`` and the node the destination ``dst`` names.
    """
    n = 0
    for x, y in zip(a, dst, strict=False):
        if x != y:
            break
        n += 1
    common = a[:n]
    cut = common.rfind("1")
    return common[:cut + 1] if cut >= 0 else ""


def tree_metric(va: str, dst: str) -> int:
    """``depth(va) - 2 * depth(lca)``: the tree distance to the target minus its depth.

    Every candidate towards the same target shares the target's depth, so the
    neighbour with the smallest value is the one nearest in the tree.
    """
    return depth(va) - 2 * depth(lca_prefix(va, dst))


def owns(va: str, slots: Iterable[int], key: int, k: int) -> bool:
    """Is ``key`` in the key zone of the node with ``va`` and successor ``slots``?"""
    bits = key_bits(key, k)
    if not bits.startswith(va):
        return False
    return not any(bits.startswith(child_va(va, s)) for s in slots)


def designated(vas: Iterable[str], key: int, k: int) -> str:
    """The VA among ``vas`` (one cluster's, the reference's ``''`` included) owning ``key``.

    The longest VA that is a prefix of the key (Definition 3.1 by brute force);
    tests compare the routed endpoints with it.
    """
    bits = key_bits(key, k)
    return max((v for v in vas if bits.startswith(v)), key=len)
