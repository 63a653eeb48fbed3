"""The ARV library against the worked examples of Li and Wang 2014 (§IV-A) and their errata.

Every vector here is recomputed with exact arithmetic in docs/protocols/brvst.md.
"""

from __future__ import annotations

from fractions import Fraction as F

import pytest

from meshsub.core.arv import (
    ARV,
    ARVError,
    Comparator,
    Domain,
    attr_matches,
    build,
    decimal,
    exact,
    fit,
    merge_all,
)
from meshsub.protocols.brvst.forest import entry_bytes, entry_size, rsv_size

AGE = Domain(F(0), F(100), F(1), 9)
NINETY = F(9, 10)


def age(lo: int, hi: int, alpha: F) -> str:
    """The paper's integer range lo-hi (inclusive) as [lo, hi + 1)."""
    return str(build(AGE, F(lo), F(hi + 1), alpha))


def test_paper_age_vectors_at_alpha_088() -> None:
    """§IV-A: Age 1-48 -> 10, 26-47 -> 0100, 38-60 -> 00011000 (any alpha in (0.48, 0.88])."""
    for alpha in (F(88, 100), F(49, 100), F(7, 10)):
        assert [age(1, 48, alpha), age(26, 47, alpha), age(38, 60, alpha)] == \
            ["10", "0100", "00011000"]


def test_paper_age_vectors_at_alpha_090() -> None:
    """At the paper's own alpha = 0.9 its 4-bit vector for 26-47 breaks its rule (22/25 = 0.88):
    the exact result is 64 bits with segments 16..30 set, cover [25, 48.4375), fit 0.9387."""
    assert age(1, 48, NINETY) == "10"
    assert age(38, 60, NINETY) == "00011000"
    v = build(AGE, F(26), F(48), NINETY)
    assert v.level == 6 and v.segments() == list(range(16, 31))
    assert v.cover(AGE) == [(F(25), F(775, 16))]
    assert fit(AGE, 6, F(26), F(48)) == F(22) / (F(775, 16) - 25)
    assert round(float(fit(AGE, 6, F(26), F(48))), 4) == 0.9387
    assert fit(AGE, 2, F(26), F(48)) == F(22, 25)  # the equality case floats get wrong


def test_alpha_boundary_of_the_age_example() -> None:
    """At alpha <= 0.48, 1-48 stops at level 0 (48/100); just above, at level 1."""
    assert age(1, 48, F(48, 100)) == "1"
    assert age(1, 48, F(481, 1000)) == "10"


def test_the_fit_test_is_inclusive() -> None:
    """22/25 >= 0.88 stops at level 2 (the paper's "more than" would need level 6)."""
    assert age(26, 47, F(22, 25)) == "0100"
    assert age(26, 47, F(22, 25) + F(1, 10**9)) != "0100"


@pytest.mark.parametrize(("vector", "canonical"), [
    ("1100", "10"), ("0110", "0110"), ("0111", "0111"), ("11110000", "10"),
    ("11111000", "11111000"), ("1111", "1"), ("0000", "0"), ("1", "1"),
])
def test_simplification(vector: str, canonical: str) -> None:
    assert str(ARV.parse(vector).simplified()) == canonical


def test_merges_and_scaling_of_the_paper() -> None:
    assert str(ARV.parse("10").merge(ARV.parse("0100"))) == "10"
    assert str(ARV.parse("10").merge(ARV.parse("00011000"))) == "11111000"
    assert str(merge_all([ARV.parse("10"), ARV.parse("0100"), ARV.parse("00011000")])) \
        == "11111000"
    assert str(ARV.parse("10").scaled(2)) == "1100"  # repeated in place, not 1010
    assert str(ARV.parse("10").scaled(3)) == "11110000"
    assert ARV.parse("11111000").cover(AGE) == [(F(0), F(125, 2))]


def test_matching_example_under_the_three_comparators() -> None:
    """Subscription attr1 [0,75) attr2 [25,75); publication attr1 [2,50) attr2 [53,100)."""
    s1, s2 = build(AGE, F(0), F(75), NINETY), build(AGE, F(25), F(75), NINETY)
    p1, p2 = build(AGE, F(2), F(50), NINETY), build(AGE, F(53), F(100), NINETY)
    assert (str(s1), str(s2), str(p1), str(p2)) == ("1110", "0110", "10", "01")
    exact1, exact2 = (F(2), F(50)), (F(53), F(100))

    def both(mode: Comparator) -> bool:
        return attr_matches(p1, s1, mode, p_exact=exact1, domain=AGE) and \
            attr_matches(p2, s2, mode, p_exact=exact2, domain=AGE)

    assert not both(Comparator.PAPER)  # right: [53, 100) is not inside [25, 75)
    assert not both(Comparator.EXACT)
    assert both(Comparator.SAFE)  # S2 OR-reduced to 11: the safe test's extra positive


def test_false_negative_vector_of_the_paper_comparator() -> None:
    """S = [7, 80) builds 0111111111111000, P = [7, 75) builds 1110; P is inside S."""
    s, p = build(AGE, F(7), F(80), NINETY), build(AGE, F(7), F(75), NINETY)
    assert (str(s), str(p)) == ("0111111111111000", "1110")
    kw = {"p_exact": (F(7), F(75)), "domain": AGE}
    assert not attr_matches(p, s, Comparator.PAPER, **kw)  # type: ignore[arg-type]
    assert attr_matches(p, s, Comparator.EXACT, **kw)  # type: ignore[arg-type]
    assert attr_matches(p, s, Comparator.SAFE, **kw)  # type: ignore[arg-type]
    assert attr_matches(p, s, Comparator.SAFE)  # safe needs no exact interval
    assert attr_matches(p, s)  # ... and is the default


def test_encoding_of_the_paper_examples() -> None:
    """FILTER of Age 1-48 (attribute 1): 01 | 00 01 | 01 | 80; Age 38-60: 00 01 | 03 | 18."""
    sub1 = ((1, ARV.parse("10")),)
    assert entry_bytes(sub1).hex() == "0100010180"
    assert entry_size(sub1) == 5
    sub3 = ((1, ARV.parse("00011000")),)
    assert entry_bytes(sub3)[1:].hex() == "00010318"
    for text in ("1", "10", "0100", "00011000", "0" * 15 + "1", "1" + "0" * 63):
        v = ARV.parse(text)
        assert ARV.from_bytes(v.level, v.to_bytes()) == v
        assert v.encoded_size == 3 + (v.size + 7) // 8 == len(entry_bytes(((0, v),))) - 1
    assert rsv_size([sub1, sub1]) == 2 + 5 + 5


def test_bitmap_decoding_rejects_bad_input() -> None:
    with pytest.raises(ARVError):
        ARV.from_bytes(3, b"\x01\x02")  # wrong length
    with pytest.raises(ARVError):
        ARV.from_bytes(1, b"\x01")  # pad bits set
    with pytest.raises(ARVError):
        ARV.from_bytes(13, b"")
    with pytest.raises(ARVError):
        ARV(2, 16)
    with pytest.raises(ARVError):
        ARV.parse("101")


def test_numbers_are_exact() -> None:
    assert decimal(0.9) == F(9, 10) != exact(0.9)  # the float 0.9 is below 9/10
    assert decimal(0.88) == F(22, 25)
    assert exact(0.5) == F(1, 2) and exact("0.1") == F(1, 10)
    with pytest.raises(ARVError):
        exact(float("nan"))
    with pytest.raises(ARVError):
        exact(True)  # type: ignore[arg-type]


def test_domain_points_clipping_and_edges() -> None:
    assert AGE.point(F(5)) == (F(5), F(6))
    assert AGE.point(F(99.5)) == (F(99), F(100))  # v + q > U: the last q
    assert AGE.clip(F(-5), F(50)) == (F(0), F(50))
    assert AGE.clip(F(120), F(130)) == (F(100), F(100))  # beyond U: the zero-width edge
    assert AGE.clip(F(-30), F(-20)) == (F(0), F(0))
    # A zero-width target is the segment containing it (the last one at U), at Lmax.
    top = build(AGE, F(100), F(100), NINETY)
    assert top.level == 9 and top.segments() == [511]
    assert build(AGE, F(0), F(0), NINETY).segments() == [0]
    with pytest.raises(ARVError):
        AGE.clip(F(5), F(4))
    with pytest.raises(ARVError):
        build(AGE, F(-1), F(5), NINETY)
    with pytest.raises(ARVError):
        Domain(F(0), F(0), F(1), 4)
    with pytest.raises(ARVError):
        Domain(F(0), F(10), F(1), 13)


def test_points_on_an_unaligned_domain_are_capped() -> None:
    """[0, 100) with q = 1: a point straddles segment borders; level 10 or 11 would be
    needed for fit 0.9, so with Lmax 9 every point is capped at 9."""
    uncapped = Domain(F(0), F(100), F(1), 12)
    levels = [build(uncapped, F(v), F(v + 1), NINETY).level for v in range(100)]
    assert (levels.count(10), levels.count(11)) == (80, 20)
    assert all(fit(AGE, 9, F(v), F(v + 1)) < NINETY for v in range(100))  # all capped at 9 ...
    capped = {build(AGE, F(v), F(v + 1), NINETY).level for v in range(100)}
    assert capped == {8, 9}  # ... and a capped vector may still simplify
    aligned = Domain(F(0), F(128), F(1), 9)  # (U - L) / q a power of two: exact at level 7
    assert build(aligned, F(37), F(38), NINETY) == ARV.run(7, 37, 37)
