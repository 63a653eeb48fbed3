"""ARV properties (docs/protocols/brvst.md, "testable properties" 1-10) with exact arithmetic.

The ones the issue names: no false negative under the safe (and exact)
comparator, merge covers its inputs, simplify never narrows.
"""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from meshsub.core.arv import (
    ARV,
    Comparator,
    Domain,
    Interval,
    attr_matches,
    build,
    fit,
    merge_all,
)

domains = st.builds(
    lambda lo, width, q, lmax: Domain(Fraction(lo), Fraction(lo + width), q, lmax),
    st.integers(-50, 50),
    st.integers(1, 400),
    st.sampled_from([Fraction(1), Fraction(1, 2), Fraction(1, 3)]),
    st.integers(0, 10),
)
alphas = st.fractions(Fraction(1, 20), Fraction(1)).filter(lambda a: 0 < a <= 1)
vectors = st.integers(0, 7).flatmap(
    lambda level: st.integers(1, (1 << (1 << level)) - 1).map(lambda bits: ARV(level, bits)))


@st.composite
def target(draw: st.DrawFn, domain: Domain, inside: Interval | None = None) -> Interval:
    """A non-empty half-open interval inside ``inside`` (default: the domain), exact."""
    lo_bound, hi_bound = inside if inside is not None else (domain.L, domain.U)
    steps = 997
    a = draw(st.integers(0, steps - 1))
    b = draw(st.integers(a + 1, steps))
    span = hi_bound - lo_bound
    return lo_bound + span * a / steps, lo_bound + span * b / steps


def covered(v: ARV, d: Domain, lo: Fraction, hi: Fraction) -> bool:
    return any(c_lo <= lo and hi <= c_hi for c_lo, c_hi in v.cover(d))


@settings(max_examples=400, deadline=None)
@given(domains, alphas, st.data())
def test_build_length_cover_accuracy_and_minimality(d: Domain, alpha: Fraction,
                                                    data: st.DataObject) -> None:
    lo, hi = data.draw(target(d))
    v = build(d, lo, hi, alpha)
    assert v.size == 1 << v.level and 0 <= v.level <= d.Lmax  # 1. power of two
    assert covered(v, d, lo, hi)  # 2. the cover contains the target
    fits = [fit(d, level, lo, hi) for level in range(d.Lmax + 1)]
    assert fits == sorted(fits)  # fit never decreases with the level
    reached = [level for level, f in enumerate(fits) if f >= alpha]
    if reached:  # 3. accuracy at the smallest level, 4. canonical when not capped
        first = reached[0]
        assert v == ARV.run(first, *d.segments(first, lo, hi)) == v.simplified()
        width = sum((c_hi - c_lo for c_lo, c_hi in v.cover(d)), Fraction(0))
        assert hi - lo >= alpha * width
        if alpha < 1 and v.level > 0:  # the length bound N < 4 alpha W / ((1 - alpha) |T|)
            assert v.size < 4 * alpha * d.width / ((1 - alpha) * (hi - lo))
    else:
        assert v.level <= d.Lmax and v == v.simplified()


@settings(max_examples=300, deadline=None)
@given(vectors, st.integers(0, 5))
def test_rescaling_is_lossless_and_simplify_never_narrows(v: ARV, up: int) -> None:
    d = Domain(Fraction(0), Fraction(1), Fraction(1, 4096), 12)
    level = min(12, v.level + up)
    big = v.scaled(level)
    assert big.cover(d) == v.cover(d)  # 5. scaling keeps the cover
    assert big.simplified() == v.simplified()
    assert v.simplified().cover(d) == v.cover(d)  # simplify never narrows (nor widens)
    assert not v.simplified().reducible()
    assert big.reduced(v.level) == v  # OR-reduction undoes a scaling


@settings(max_examples=300, deadline=None)
@given(vectors, vectors, vectors)
def test_merge_algebra_and_cover_union(a: ARV, b: ARV, c: ARV) -> None:
    d = Domain(Fraction(0), Fraction(1), Fraction(1, 4096), 12)
    ab = a.merge(b)
    assert ab == b.merge(a)  # commutative
    assert ab.merge(c) == a.merge(b.merge(c)) == merge_all([a, b, c])  # associative
    assert a.merge(a) == a.simplified()  # idempotent
    union = _union(a.cover(d) + b.cover(d))
    assert ab.cover(d) == union  # the merge covers exactly both inputs
    for part in (a, b):  # ... so it covers each input
        assert all(covered(ab, d, lo, hi) for lo, hi in part.cover(d))
    assert a.overlaps(b) == any(lo < h2 and l2 < hi for lo, hi in a.cover(d)
                                for l2, h2 in b.cover(d))


def _union(intervals: list[Interval]) -> list[Interval]:
    out: list[Interval] = []
    for lo, hi in sorted(intervals):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(hi, out[-1][1]))
        else:
            out.append((lo, hi))
    return out


@settings(max_examples=200, deadline=None)
@given(vectors, vectors)
def test_match_identity(p: ARV, s: ARV) -> None:
    """7. ((P & S) ^ P) == 0  <=>  (P & ~S) == 0 for vectors of one length."""
    m = max(p.level, s.level)
    pb, sb = p.scaled(m).bits, s.scaled(m).bits
    assert (((pb & sb) ^ pb) == 0) == ((pb & ~sb) == 0)


@settings(max_examples=500, deadline=None)
@given(domains, alphas, alphas, st.data())
def test_no_false_negative_under_safe_and_exact(d: Domain, a_s: Fraction, a_p: Fraction,
                                                data: st.DataObject) -> None:
    """8. For S containing P: safe and exact always match; paper whenever P is as fine as S."""
    s_lo, s_hi = data.draw(target(d))
    p_lo, p_hi = data.draw(target(d, (s_lo, s_hi)))
    s, p = build(d, s_lo, s_hi, a_s), build(d, p_lo, p_hi, a_p)
    exact = (p_lo, p_hi)
    assert attr_matches(p, s, Comparator.SAFE)
    assert attr_matches(p, s, Comparator.EXACT, p_exact=exact, domain=d)
    if p.level >= s.level:
        assert attr_matches(p, s, Comparator.PAPER)
    # Monotone in cover(S): an aggregate (OR with anything) still matches.
    other_lo, other_hi = data.draw(target(d))
    agg = s.merge(build(d, other_lo, other_hi, a_s))
    assert attr_matches(p, agg, Comparator.SAFE)
    assert attr_matches(p, agg, Comparator.EXACT, p_exact=exact, domain=d)


@settings(max_examples=300, deadline=None)
@given(domains, alphas, st.data())
def test_a_match_never_claims_disjoint_ranges(d: Domain, alpha: Fraction,
                                              data: st.DataObject) -> None:
    """A publication whose cover misses S's cover entirely never matches (any comparator)."""
    mid = (d.L + d.U) / 2
    s_lo, s_hi = data.draw(target(d, (d.L, mid)))
    p_lo, p_hi = data.draw(target(d, (mid, d.U)))
    s, p = build(d, s_lo, s_hi, alpha), build(d, p_lo, p_hi, alpha)
    for mode in Comparator:
        if attr_matches(p, s, mode, p_exact=(p_lo, p_hi), domain=d):
            assert p.overlaps(s)


@settings(max_examples=200, deadline=None)
@given(vectors)
def test_bitmap_round_trip(v: ARV) -> None:
    assert ARV.from_bytes(v.level, v.to_bytes()) == v
    assert ARV.parse(str(v)) == v
    assert v.encoded_size == 3 + len(v.to_bytes())
