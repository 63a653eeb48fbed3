"""TCBF merge laws, decay laws and wire round trips, for arbitrary filters (Zhao and Wu, §IV).

No per-example deadline: hypothesis's default (200 ms) fails these under a loaded machine's
scheduling, which says nothing about the filter (tests never judge wall-clock time)."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from meshsub.core.tcbf import (
    C_MAX,
    TCBF,
    FilterKind,
    TCBFDecodeError,
    decode_filter,
    encode_filter,
    positions,
)

M = 32


@st.composite
def filters(draw: st.DrawFn, m: int = M, df: float = 1.0) -> TCBF:
    f = TCBF(m, 3, df=df, now=0.0)
    values = draw(st.lists(st.integers(0, C_MAX), min_size=m, max_size=m))
    f.counters[:] = bytes(values)
    return f


def merged(kind: str, *fs: TCBF) -> TCBF:
    out = fs[0].copy()
    for f in fs[1:]:
        getattr(out, kind)(f)
    return out


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(filters(), filters(), filters())
def test_m_merge_is_a_semilattice(f: TCBF, g: TCBF, h: TCBF) -> None:
    assert merged("m_merge", f, g) == merged("m_merge", g, f)
    assert merged("m_merge", merged("m_merge", f, g), h) == merged(
        "m_merge", f, merged("m_merge", g, h)
    )
    assert merged("m_merge", f, f) == f
    fg = merged("m_merge", f, g)
    triples = zip(f.counters, g.counters, fg.counters, strict=True)
    assert all(c >= a and c >= b for a, b, c in triples)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(filters(), filters(), filters())
def test_a_merge_laws(f: TCBF, g: TCBF, h: TCBF) -> None:
    assert merged("a_merge", f, g) == merged("a_merge", g, f)
    assert merged("a_merge", merged("a_merge", f, g), h) == merged(
        "a_merge", f, merged("a_merge", g, h)
    )
    assert merged("a_merge", f, TCBF(M, 3)) == f
    if any(0 < c < C_MAX for c in f.counters):  # not idempotent (unless saturated)
        assert merged("a_merge", f, f) != f
    fg = merged("a_merge", f, g)
    assert fg.set_positions() == sorted(set(f.set_positions()) | set(g.set_positions()))
    triples = zip(f.counters, g.counters, fg.counters, strict=True)
    assert all(c == min(C_MAX, a + b) for a, b, c in triples)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(filters(), filters(), st.binary(max_size=6))
def test_m_merge_existence_is_or(f: TCBF, g: TCBF, key: bytes) -> None:
    fg = merged("m_merge", f, g)
    assert fg.exists(key) == (f.exists(key) or g.exists(key))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(filters(), filters(), st.floats(0, 400, allow_nan=False))
def test_decay_commutes_with_m_merge(f: TCBF, g: TCBF, t: float) -> None:
    left = merged("m_merge", f, g)
    left.apply_decay(t)
    df, dg = f.copy(), g.copy()
    df.apply_decay(t)
    dg.apply_decay(t)
    assert left == merged("m_merge", df, dg)
    steps = int(Fraction(t))  # DF = 1
    assert all(c == max(0, a - steps) for a, c in zip(f.counters, df.counters, strict=True))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(filters(df=0.37), st.lists(st.floats(0, 1000, allow_nan=False), max_size=8))
def test_decay_in_steps_equals_decay_at_once(f: TCBF, times: list[float]) -> None:
    stepped, once = f.copy(), f.copy()
    last = 0.0
    for t in sorted(times):
        stepped.apply_decay(t)
        assert stepped.popcount() == sum(1 for c in stepped.counters if c > 0)
        last = t
    once.apply_decay(last)
    assert stepped == once


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from([8, 13, 256, 257, 1000]),
    st.sampled_from(list(FilterKind)),
    st.data(),
)
def test_encoding_round_trip(m: int, kind: FilterKind, data: st.DataObject) -> None:
    f = TCBF(m, 4)
    chosen = data.draw(st.sets(st.integers(0, m - 1), max_size=m))
    uniform = data.draw(st.booleans())
    value = data.draw(st.integers(1, C_MAX))
    for p in chosen:
        f.counters[p] = value if uniform else data.draw(st.integers(1, C_MAX))
    wire = encode_filter(f, kind)
    got_kind, back = decode_filter(wire, m=m)
    assert got_kind is kind
    assert back.set_positions() == f.set_positions()
    if kind.has_counters:
        assert back == f
    cut = data.draw(st.integers(0, len(wire) - 1))
    with pytest.raises(TCBFDecodeError):
        decode_filter(wire[:cut], m=m)  # every strict prefix is malformed


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=80))
def test_decoding_garbage_only_raises_decode_errors(blob: bytes) -> None:
    try:
        kind, f = decode_filter(blob, m=8, k=4)
    except TCBFDecodeError:
        return
    again_kind, again = decode_filter(encode_filter(f, kind), m=8, k=4)
    assert again_kind is kind and again.set_positions() == f.set_positions()
    if kind.has_counters:
        assert again == f


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(max_size=12), max_size=20))
def test_genuine_filter_holds_exactly_its_positions(keys: list[str]) -> None:
    g = TCBF()
    for key in keys:
        g.insert(key)
    expected = set().union(*(positions(k) for k in keys)) if keys else set()
    assert set(g.set_positions()) == expected
    assert all(g.exists(k) for k in keys)
    assert g.is_empty() or g.uniform_counter() == g.initial
