"""Bloom filter: worked test vectors, formulas vs measurement, set operations, wire form."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsub.core.bloom import (
    MAX_BITS,
    BloomError,
    BloomFilter,
    HashScheme,
    approx_fpr,
    expected_fpr,
    optimal_parameters,
    positions,
)

SCHEMES = list(HashScheme)
keys = st.one_of(st.binary(max_size=40), st.text(max_size=20))


def test_bsub_mmh3_seed_vectors() -> None:
    """001_bsub.md §3.1: mmh3 x86_32, seeds 0..k-1, unsigned, % m."""
    s = HashScheme.MMH3_SEEDS
    assert positions(b"NewMoon", 256, 4, s) == [28, 235, 31, 209]
    assert positions(b"funnybutnotcool", 256, 4, s) == [65, 235, 29, 122]
    assert positions(b"k0", 256, 4, s) == [214, 17, 17, 204]
    assert positions(b"", 256, 4, s) == [0, 183, 6, 39]
    assert set(positions("newmoon", 256, 4, s)) == {15, 59, 164, 205}


def test_semantic_cluster_sha256_vectors() -> None:
    """002_liu_semantic_cluster.md §3.2: SHA-256 double hashing, m = 2048, k = 7."""
    s = HashScheme.SHA256_DOUBLE
    assert positions("traffic", 2048, 7, s) == [828, 1585, 294, 1051, 1808, 517, 1274]
    assert positions("weather", 2048, 7, s) == [294, 1121, 1948, 727, 1554, 333, 1160]
    assert positions("fire", 2048, 7, s) == [398, 455, 512, 569, 626, 683, 740]
    assert positions("a\x1fb\x1fc", 2048, 7, s) == [1330, 1111, 892, 673, 454, 235, 16]
    assert positions("traffic", 1024, 7, s) == [828, 561, 294, 27, 784, 517, 250]


def test_default_scheme_is_one_mmh3_128_double_hash() -> None:
    import mmh3

    h1, h2 = mmh3.hash64(b"abc", seed=0, x64arch=True, signed=False)
    expected = [((h1 + i * (h2 | 1)) % 2**64) % 1000 for i in range(5)]
    assert positions(b"abc", 1000, 5) == expected
    assert positions("abc", 1000, 5) == expected  # str is hashed as UTF-8


def test_formulas_match_the_spec_tables() -> None:
    # 001 §3.2, m = 256, k = 4, exact Eq. 1
    assert expected_fpr(256, 4, 38) == pytest.approx(0.04042, abs=5e-5)
    assert expected_fpr(256, 4, 10) == pytest.approx(0.00044, abs=5e-6)
    assert approx_fpr(256, 4, 38) == pytest.approx(0.04019, abs=5e-5)
    # 002 §3.8, m = 2048, k = 7, n = 100
    assert expected_fpr(2048, 7, 100) == pytest.approx(1.70e-4, rel=0.01)


@pytest.mark.parametrize(("n", "p"), [(100, 0.01), (1000, 0.001), (38, 0.04)])
def test_optimal_parameters(n: int, p: float) -> None:
    m, k = optimal_parameters(n, p)
    assert m / n == pytest.approx(-math.log(p) / math.log(2) ** 2, rel=0.01)
    assert k == max(1, round(m / n * math.log(2)))
    assert expected_fpr(m, k, n) <= p * 1.05


@pytest.mark.parametrize(("n", "p"), [(0, 0.1), (10, 0.0), (10, 1.0), (10**9, 1e-9)])
def test_optimal_parameters_rejects(n: int, p: float) -> None:
    with pytest.raises(BloomError):
        optimal_parameters(n, p)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_measured_fpr_within_binomial_bound_of_formula(scheme: HashScheme) -> None:
    n, queries = 500, 20_000
    bf = BloomFilter.for_capacity(n, 0.02, scheme)
    bf.update(f"member-{i}" for i in range(n))
    assert all(f"member-{i}" in bf for i in range(n))  # no false negatives
    hits = sum(bf.query(f"probe-{j}") for j in range(queries))
    measured = hits / queries
    # conditional on this filter: Binomial(queries, fill^k); 5 standard deviations
    p_now = bf.current_fpr()
    assert abs(measured - p_now) <= 5 * math.sqrt(p_now * (1 - p_now) / queries)
    # unconditionally, the formula; allow for the spread of the fill ratio too
    p = approx_fpr(bf.m, bf.k, n)
    assert abs(measured - p) <= 5 * math.sqrt(p * (1 - p) / queries) + 0.15 * p
    assert bf.estimated_count() == pytest.approx(n, rel=0.05)
    assert bf.fill_ratio() == pytest.approx(1 - math.exp(-bf.k * n / bf.m), abs=0.02)


def test_union_is_the_filter_of_the_union_and_intersection_is_estimated() -> None:
    a, b, both = (BloomFilter(4096, 5) for _ in range(3))
    a.update(f"k{i}" for i in range(0, 300))
    b.update(f"k{i}" for i in range(200, 500))
    both.update(f"k{i}" for i in range(0, 500))
    assert a.union(b) == both
    assert (a | b) == both
    c = a.copy()
    c |= b
    assert c == both and a != both
    assert a.intersection_estimate(b) == pytest.approx(100, abs=25)
    assert a.and_popcount(b) == a.popcount() + b.popcount() - both.popcount()


def test_incompatible_filters_are_refused() -> None:
    with pytest.raises(BloomError):
        BloomFilter(64, 3).union(BloomFilter(64, 4))
    with pytest.raises(BloomError):
        BloomFilter(64, 3).union(BloomFilter(64, 3, HashScheme.MMH3_SEEDS))
    with pytest.raises(BloomError):
        BloomFilter(64, 3).and_popcount(object())  # type: ignore[arg-type]


def test_saturated_filter_estimates() -> None:
    full = BloomFilter.from_bytes(bytes([1, 1, 1, 0, 0, 0, 8, 0xFF]))
    assert full.estimated_count() == math.inf
    assert full.intersection_estimate(full) == math.inf
    assert full.current_fpr() == 1.0
    assert BloomFilter(8, 1).is_empty() and not full.is_empty()


@pytest.mark.parametrize(("m", "k"), [(0, 1), (8, 0), (MAX_BITS + 1, 1), (8, 65), (8.0, 1)])
def test_bad_parameters(m: object, k: object) -> None:
    with pytest.raises(BloomError):
        BloomFilter(m, k)  # type: ignore[arg-type]


def test_bad_keys_and_membership_of_non_keys() -> None:
    bf = BloomFilter(64, 2)
    with pytest.raises(BloomError):
        bf.add(3)  # type: ignore[arg-type]
    assert 3 not in bf
    with pytest.raises(BloomError):
        bf.test_bit(64)


def test_serialisation_layout() -> None:
    bf = BloomFilter(12, 2, HashScheme.SHA256_DOUBLE)
    bf.add("x")
    data = bf.to_bytes()
    assert data[:7] == bytes([1, 3, 2, 0, 0, 0, 12]) and len(data) == 9
    set_bits = [p for p in range(12) if data[7 + (p >> 3)] & (1 << (p & 7))]
    assert set_bits == sorted(set(bf.positions("x")))


@pytest.mark.parametrize("data", [
    b"", b"\x01\x01\x02", bytes([2, 1, 2, 0, 0, 0, 8, 0]),  # version
    bytes([1, 9, 2, 0, 0, 0, 8, 0]),  # scheme
    bytes([1, 1, 0, 0, 0, 0, 8, 0]),  # k = 0
    bytes([1, 1, 2, 0, 0, 0, 0]),  # m = 0
    bytes([1, 1, 2, 0xFF, 0, 0, 0]),  # m too large
    bytes([1, 1, 2, 0, 0, 0, 16, 0]),  # too short
    bytes([1, 1, 2, 0, 0, 0, 8, 0, 0]),  # too long
    bytes([1, 1, 2, 0, 0, 0, 4, 0x10]),  # padding bit set
])
def test_from_bytes_rejects(data: bytes) -> None:
    with pytest.raises(BloomError):
        BloomFilter.from_bytes(data)


def test_from_bytes_rejects_non_bytes() -> None:
    with pytest.raises(BloomError):
        BloomFilter.from_bytes("abc")  # type: ignore[arg-type]


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(SCHEMES), st.integers(1, 300), st.integers(1, 8),
       st.lists(keys, max_size=30))
def test_round_trip_and_no_false_negatives(scheme: HashScheme, m: int, k: int,
                                          items: list[bytes | str]) -> None:
    bf = BloomFilter(m, k, scheme)
    bf.update(items)
    assert all(bf.query(x) for x in items)
    again = BloomFilter.from_bytes(bf.to_bytes())
    assert again == bf and all(again.query(x) for x in items)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64))
def test_from_bytes_on_garbage_raises_only_bloom_error(data: bytes) -> None:
    try:
        bf = BloomFilter.from_bytes(data)
    except BloomError:
        return
    assert bf.to_bytes() == data
