"""TCBF: worked vectors and the properties of the filter (Zhao and Wu 2010, §IV and §VI)."""

from __future__ import annotations

import math
import random
import struct
from fractions import Fraction

import mmh3
import pytest

from meshsub.core import tcbf
from meshsub.core.tcbf import (
    TCBF,
    Encoding,
    FilterKind,
    InsertAfterMergeError,
    TCBFConfigMismatch,
    TCBFDecodeError,
    TCBFError,
    TCBFSet,
    canonical_key,
    decode_filter,
    encode_body,
    encode_filter,
    positions,
    preference,
    preference_at,
)

PER_MIN = 1 / 60  # DF values below are per minute; the filter's clock is seconds


def filt(m: int, counters: dict[int, int], df: float = 0.0, now: float = 0.0) -> TCBF:
    f = TCBF(m, 2, initial=10, df=df, now=now)
    for p, c in counters.items():
        f.counters[p] = c
    return f


def as_dict(f: TCBF) -> dict[int, int]:
    return {j: c for j, c in enumerate(f.counters) if c}


# --------------------------------------------------------------- item 1: hashing


@pytest.mark.parametrize(
    ("raw", "hashes", "expected"),
    [
        (b"NewMoon", [2876764956, 1196101355, 3707139103, 3774875345], {28, 31, 209, 235}),
        (b"funnybutnotcool", [2340885057, 3033278699, 1601001245, 2055375482], {29, 65, 122, 235}),
        (b"k0", [190934230, 947916817, 1934599441, 908558028], {17, 204, 214}),
        (b"", [0, 1364076727, 821347078, 2247144487], {0, 6, 39, 183}),
    ],
)
def test_hash_layer_vectors(raw: bytes, hashes: list[int], expected: set[int]) -> None:
    assert [mmh3.hash(raw, seed=i, signed=False) for i in range(4)] == hashes
    assert positions(raw, 256, 4) == expected


@pytest.mark.parametrize(
    ("text", "canonical", "expected"),
    [
        ("NewMoon", b"newmoon", {15, 59, 164, 205}),
        ("Twitter's New", b"twitter'snew", {19, 53, 92, 100}),
        ("openwebawards", b"openwebawards", {12, 41, 106, 223}),
    ],
)
def test_end_to_end_vectors(text: str, canonical: bytes, expected: set[int]) -> None:
    assert canonical_key(text) == canonical
    assert positions(text, 256, 4) == expected


def test_canonicalisation_rules() -> None:
    # NFC: a decomposed e + combining acute equals the composed form.
    assert canonical_key("Cafe\u0301") == canonical_key("Caf\u00e9") == "café".encode()
    assert canonical_key("STRASSE") == canonical_key("straße")  # casefold
    assert canonical_key(" a\tb\nc\u00a0d ") == b"abcd"  # all Unicode whitespace
    assert positions(b"k0") == frozenset({17, 204, 214})  # duplicates collapse (|P| < k)


def test_bad_key_type_is_an_error() -> None:
    with pytest.raises(TCBFError):
        positions(42)  # type: ignore[arg-type]


# ------------------------------------------------------- item 2: insert uniformity


def test_insert_uniformity_and_popcount() -> None:
    rng = random.Random(2)
    keys = [f"key{rng.random()}" for _ in range(25)]
    f = TCBF(initial=50)
    for key in keys:
        f.insert(key)
    assert set(f.counters) - {0} == {50}
    assert f.popcount() == len(set().union(*(positions(k) for k in keys)))
    assert f.uniform_counter() == 50


def test_insert_keeps_existing_counter_and_refuses_merged_filter() -> None:
    f = filt(8, {})
    f.insert_positions({1, 4})
    f.insert_positions({4, 6})
    assert as_dict(f) == {1: 10, 4: 10, 6: 10}  # position 4 stays 10, not 20
    f.m_merge(filt(8, {2: 3}))
    with pytest.raises(InsertAfterMergeError):
        f.insert_positions({5})
    with pytest.raises(TCBFError):
        filt(8, {}).insert_positions({8})


# ------------------------------------------- items 3-5: decay and exact lifetimes


def test_no_false_negatives_before_decay() -> None:
    df = 0.138 * PER_MIN
    f = TCBF(df=df, now=0.0)
    g = TCBF()
    keys = [f"interest-{i}" for i in range(20)]
    for key in keys:
        g.insert(key)
    f.a_merge(g, now=0.0)
    for t in (0.0, 100.0, 50 / df - 1e-6):
        assert all(f.exists(key, now=t) for key in keys)


def test_exact_lifetime_paper_df() -> None:
    df = 0.138 * PER_MIN  # 0.138 per minute
    life = 50 / df  # ~362 min
    assert 361 * 60 < life < 363 * 60
    exact = Fraction(50) / Fraction(df)
    for start in (0.0, 12.25, 1e6 + 0.1):
        for t in (life * 0.5, life - 1e-3, life - 1e-6, life, life + 1e-6, life * 2):
            f = TCBF(df=df, now=start)
            f.insert("NewMoon", now=start)
            elapsed = Fraction(start + t) - Fraction(start)
            expect = elapsed < exact
            assert f.exists("NewMoon", now=start + t) is expect, (start, t)


@pytest.mark.parametrize("df", [1.0, 0.1, 0.138 / 60, 1 / 3, 7.0])
def test_lifetime_boundary_is_exact_for_float_times(df: float) -> None:
    exact = Fraction(50) / Fraction(df)
    boundary = float(exact)
    for t in (math.nextafter(boundary, 0), boundary, math.nextafter(boundary, math.inf)):
        f = TCBF(df=df, now=0.0)
        f.insert(b"x", now=0.0)
        assert f.exists(b"x", now=t) is (Fraction(t) < exact)


def _death(f: TCBF, key: bytes, start: float, df: float) -> Fraction:
    """When ``key`` leaves ``f`` (searching ticks after ``start``)."""
    t = Fraction(start)
    while f.exists(key, now=float(t)):
        t += Fraction(1, 64) / Fraction(df)
    return t


def test_a_key_set_between_ticks_loses_up_to_one_tick() -> None:
    """The quantisation of the module docstring, on the issue's example: I = 10, DF = 1,
    A-merged at 0.9 into a filter ticking since 0: gone at 10, after 9.1 s, not 10."""
    relay = TCBF(initial=10, df=1.0, now=0.0)
    other = TCBF(initial=10)
    other.insert(b"old")
    relay.a_merge(other, now=0.0)  # the filter's ticks start at 0
    genuine = TCBF(initial=10)
    genuine.insert(b"new")
    relay.a_merge(genuine, now=0.9)
    assert relay.next_tick(0.9) == pytest.approx(1.0)
    assert relay.exists(b"new", now=9.999)
    assert not relay.exists(b"new", now=10.0)
    # into an empty filter the phase restarts: exactly I / DF
    fresh = TCBF(initial=10, df=1.0, now=0.0)
    fresh.a_merge(genuine, now=0.9)
    assert fresh.exists(b"new", now=10.899) and not fresh.exists(b"new", now=10.9)


@pytest.mark.parametrize("seed", range(25))
def test_every_key_lives_within_one_tick_of_its_counter(seed: int) -> None:
    """Counter c set at t: gone after L with c/DF - 1/DF < L <= c/DF, and L = c/DF - (phase)
    as next_tick says; exact when t is on a tick."""
    import random

    rng = random.Random(seed)
    df = rng.choice([1.0, 0.25, 0.138 / 60, 3.0])
    tick = Fraction(1) / Fraction(df)
    relay = TCBF(initial=50, df=df, now=0.0)
    base = TCBF(initial=50)
    base.insert(b"anchor")
    relay.a_merge(base, now=0.0)
    # "on a tick" needs a time that is exactly a tick: only where 1/DF is a binary float
    on_tick = seed % 5 == 0 and df in (1.0, 0.25)
    t = float(rng.randrange(1, 40) * tick) if on_tick else rng.uniform(0.0, 40 * float(tick))
    c = rng.randrange(1, 40)
    genuine = TCBF(initial=c)
    genuine.insert(b"k")
    expected_death = Fraction(relay.next_tick(t)) + (c - 1) * tick
    relay.a_merge(genuine, now=t)
    died = _death(relay, b"k", t, df)
    life = died - Fraction(t)
    assert c * tick - tick < life <= c * tick + tick / 64
    assert abs(died - expected_death) <= tick / 64
    if on_tick:
        assert abs(life - c * tick) <= tick / 64


def test_decay_is_lazy_exact_and_never_negative() -> None:
    f = filt(8, {1: 3, 2: 200}, df=1.0)
    for t in (0.3, 0.9, 1.0, 1.5, 2.99, 3.0, 10.0):
        f.apply_decay(t)
        assert all(c >= 0 for c in f.counters)
        assert f.popcount() == sum(1 for c in f.counters if c > 0)
    assert as_dict(f) == {2: 190}
    f.apply_decay(5.0)  # the clock went backwards: nothing happens
    assert as_dict(f) == {2: 190}
    f.apply_decay(1000.0)
    assert f.is_empty()


def test_decay_fractional_steps_carry_the_remainder() -> None:
    f = filt(8, {0: 10}, df=0.5)
    for t in (0.5, 1.0, 1.5, 1.99):
        f.apply_decay(t)
    assert f.counters[0] == 10  # less than 2 s elapsed: no whole decrement
    f.apply_decay(2.0)
    assert f.counters[0] == 9
    f.apply_decay(5.9)
    assert f.counters[0] == 8


def test_set_df_keeps_progress() -> None:
    f = filt(8, {0: 10}, df=1.0)
    f.apply_decay(0.5)  # half-way to the first decrement
    f.set_df(0.5, now=0.5)  # now one decrement per 2 s: 1 s of progress remains
    f.apply_decay(1.49)
    assert f.counters[0] == 10
    f.apply_decay(1.5)
    assert f.counters[0] == 9


def test_zero_df_never_decays_and_bad_times_are_errors() -> None:
    f = filt(8, {3: 5})
    f.apply_decay(1e9)
    assert as_dict(f) == {3: 5}
    with pytest.raises(TCBFError):
        f.apply_decay(math.nan)
    with pytest.raises(TCBFError):
        TCBF(df=-1.0)
    with pytest.raises(TCBFError):
        TCBF(m=0)
    with pytest.raises(TCBFError):
        TCBF(initial=256)


# ------------------------------------------------------ items 6-8: merge algebra


def test_a_merge_saturates_and_is_not_idempotent() -> None:
    f = filt(8, {1: 200, 2: 10})
    g = filt(8, {1: 100, 3: 7})
    a = f.copy()
    a.a_merge(g)
    assert as_dict(a) == {1: 255, 2: 10, 3: 7}
    empty = f.copy()
    empty.a_merge(filt(8, {}))
    assert empty == f  # A(F, 0) = F
    twice = f.copy()
    twice.a_merge(f)
    assert twice != f  # A(F, F) != F


def test_merges_need_the_same_shape() -> None:
    with pytest.raises(TCBFError):
        TCBF(256, 4).m_merge(TCBF(128, 4))
    with pytest.raises(TCBFError):
        TCBF(256, 4).a_merge(TCBF(256, 3))


def test_decay_commutes_with_m_merge_not_with_a_merge() -> None:
    f0 = filt(8, {1: 7, 4: 17, 6: 3}, df=1.0)
    g0 = filt(8, {1: 2, 4: 5, 5: 9}, df=1.0)
    # decay(M(F, G)) == M(decay(F), decay(G))
    merged_then = f0.copy()
    merged_then.m_merge(g0, now=0.0)
    merged_then.apply_decay(4.0)
    decayed_f, decayed_g = f0.copy(), g0.copy()
    decayed_f.apply_decay(4.0)
    decayed_g.apply_decay(4.0)
    decayed_f.m_merge(decayed_g, now=4.0)
    assert merged_then == decayed_f
    # A-merge: decaying the sum removes d once, the sum of decayed twice.
    summed_then = f0.copy()
    summed_then.a_merge(g0, now=0.0)
    summed_then.apply_decay(4.0)
    df2, dg2 = f0.copy(), g0.copy()
    df2.apply_decay(4.0)
    dg2.apply_decay(4.0)
    df2.a_merge(dg2, now=4.0)
    assert summed_then != df2
    assert summed_then.counters[4] == 17 + 5 - 4 and df2.counters[4] == 13 + 1


# ---------------------------------------------- items 9-11: worked examples


def test_worked_example_section_3_7() -> None:
    a, b, c, d = {1, 4}, {4, 6}, {1, 6}, {2, 7}
    g_a = filt(8, {})
    g_a.insert_positions(a)
    g_b = filt(8, {})
    g_b.insert_positions(b)
    assert as_dict(g_a) == {1: 10, 4: 10} and as_dict(g_b) == {4: 10, 6: 10}
    both = filt(8, {})
    both.insert_positions(a)
    both.insert_positions(b)
    assert as_dict(both) == {1: 10, 4: 10, 6: 10}
    # t = 0: broker X A-merges A's then B's genuine filter.
    r_x = TCBF(8, 2, initial=10, df=1.0, now=0.0)
    r_x.a_merge(g_a, now=0.0)
    assert as_dict(r_x) == {1: 10, 4: 10}
    r_x.a_merge(g_b, now=0.0)
    assert as_dict(r_x) == {1: 10, 4: 20, 6: 10}
    assert r_x.counter_at(a) and r_x.counter_at(b)
    assert r_x.counter_at(c) > 0  # the false positive
    assert r_x.counter_at(d) == 0
    # t = 3: decayed by 3, then reinforced by A.
    r_x.apply_decay(3.0)
    assert as_dict(r_x) == {1: 7, 4: 17, 6: 7}
    r_x.a_merge(g_a, now=3.0)
    assert as_dict(r_x) == {1: 17, 4: 27, 6: 7}
    # t = 3: X meets broker Y; decisions on the pre-merge filters.
    r_y = filt(8, {2: 9, 4: 5, 6: 12}, df=1.0, now=3.0)
    assert (r_y.counter_at(b), r_x.counter_at(b)) == (5, 7)
    assert preference_at(r_y, r_x, b) == pytest.approx(0.4)  # Y's m1 (key b): forward
    assert preference_at(r_y, r_x, a) == 17.0  # Y's m3 (key a): c_Y = 0, forward first
    assert preference_at(r_x, r_y, a) == -1.0  # X's m2 (key a): keep
    ax, ay = r_x.copy(), r_y.copy()
    ax.a_merge(r_y, now=3.0)
    assert as_dict(ax) == {1: 17, 2: 9, 4: 32, 6: 19}
    r_x.m_merge(ay, now=3.0)
    r_y.m_merge(filt(8, {1: 17, 4: 27, 6: 7}), now=3.0)
    assert as_dict(r_x) == as_dict(r_y) == {1: 17, 2: 9, 4: 27, 6: 12}
    # Removal times from t = 3: bit 2 at 12, bit 6 (b and c) at 15, bit 1 (a) at 20, 4 at 30.
    r_x.apply_decay(11.99)
    assert as_dict(r_x) == {1: 9, 2: 1, 4: 19, 6: 4}
    timeline = []
    for t in range(3, 32):
        r_x.apply_decay(float(t))
        timeline.append(
            (
                t,
                r_x.counter_at(a) > 0,
                r_x.counter_at(b) > 0,
                r_x.counter_at(c) > 0,
                r_x.counters[2] > 0,
                r_x.counters[4] > 0,
            )
        )
    first_gone = {
        name: next(t for t, *flags in timeline if not flags[i])
        for i, name in enumerate(["a", "b", "c", "bit2", "bit4"])
    }
    assert first_gone == {"a": 20, "b": 15, "c": 15, "bit2": 12, "bit4": 30}


def test_worked_example_preferences_through_the_api() -> None:
    # Two hashed keys with disjoint positions stand in for the example's a and b.
    key_a = b"ka"
    key_b = next(
        f"kb{i}".encode()
        for i in range(100)
        if not positions(f"kb{i}".encode(), 8, 2) & positions(key_a, 8, 2)
    )
    pa, pb = positions(key_a, 8, 2), positions(key_b, 8, 2)
    x = filt(8, {**{p: 27 for p in pa}, **{p: 7 for p in pb}})
    y = filt(8, {p: 5 for p in pb})
    assert preference(y, x, key_b) == pytest.approx(0.4)  # Y's m1: (7 - 5) / 5
    assert preference(y, x, key_a) == 27.0  # Y's m3: c_Y = 0, so PREF = c_X
    assert preference(x, y, key_a) == -1.0  # X's m2: (0 - 27) / 27
    assert preference(x, x, key_a) == 0.0


def test_preference_sign_rule() -> None:
    rng = random.Random(9)
    key = b"some-key"
    pos = positions(key, 8, 2)
    for _ in range(300):
        ci, cj = rng.choice([0, 0, 1, 5, 50]), rng.choice([0, 0, 1, 5, 50])
        own = filt(8, dict.fromkeys(pos, ci) if ci else {})
        peer = filt(8, dict.fromkeys(pos, cj) if cj else {})
        p = preference(own, peer, key)
        assert (p > 0) == (cj > ci or (ci == 0 and cj > 0))
        if ci == cj:
            assert p == 0


def test_bogus_counter_regression() -> None:
    def run(merge: str) -> list[int]:
        g_a = TCBF(8, 2, initial=10)
        g_a.insert_positions({1, 4})
        b = TCBF(8, 2, initial=10, df=1.0, now=0.0)
        c = TCBF(8, 2, initial=10, df=1.0, now=0.0)
        b.a_merge(g_a, now=0.0)  # B meets A once, at t = 0
        values = []
        for t in range(1, 13):
            snap_b, snap_c = b.copy(), c.copy()
            snap_b.apply_decay(float(t))
            snap_c.apply_decay(float(t))
            getattr(b, merge)(snap_c, now=float(t))
            getattr(c, merge)(snap_b, now=float(t))
            assert b == c
            values.append(b.counter_at({1, 4}))
        return values

    m_values = run("m_merge")
    assert m_values[:3] == [9, 8, 7] and m_values[9:] == [0, 0, 0]  # gone at t = 10
    a_values = run("a_merge")
    assert a_values[:3] == [9, 16, 30]
    assert all(v > 0 for v in a_values) and a_values[-1] > a_values[0]


# --------------------------------------------------- item 12: FPR, FR, n-hat


def _random_key(rng: random.Random) -> bytes:
    return rng.getrandbits(64).to_bytes(8, "big")


@pytest.mark.parametrize(("n", "eq1", "eq3"), [(38, 0.04042, 0.4484), (10, 0.00044, 0.1449)])
def test_fpr_fr_and_estimate_match_formulas(n: int, eq1: float, eq3: float) -> None:
    assert tcbf.false_positive_rate(n) == pytest.approx(eq1, abs=5e-6)  # printed digits
    assert tcbf.expected_fill_ratio(n) == pytest.approx(eq3, abs=1e-4)
    rng = random.Random(n)
    trials, queries = 20, 5000
    hits, expected_hits, variance = 0, 0.0, 0.0
    fill, estimates, per_trial = [], [], []
    for _ in range(trials):
        f = TCBF()
        members = {_random_key(rng) for _ in range(n)}
        for key in members:
            f.insert(key)
        fr = f.fill_ratio()
        fill.append(fr)
        estimates.append(f.estimated_keys())
        trial_hits = 0
        for _ in range(queries):
            key = _random_key(rng)
            if key not in members and f.exists(key):
                trial_hits += 1
        hits += trial_hits
        per_trial.append(trial_hits / queries)
        p = fr**4  # FPR of this very filter for uniform hashes
        expected_hits += queries * p
        variance += queries * p * (1 - p)
    total = trials * queries
    # Hashing behaves uniformly: given each filter's fill, hits are binomial.
    assert abs(hits - expected_hits) <= 3 * math.sqrt(variance) + 1
    # Eq. 1 against the mean over filters (3 standard errors of the per-filter FPRs).
    mean = hits / total
    sd = math.sqrt(sum((v - mean) ** 2 for v in per_trial) / (trials - 1))
    sigma = max(sd / math.sqrt(trials), math.sqrt(eq1 * (1 - eq1) / total))
    assert abs(mean - eq1) <= 3 * sigma
    mean_fr = sum(fill) / trials
    sd_fr = math.sqrt(sum((v - mean_fr) ** 2 for v in fill) / (trials - 1))
    assert abs(mean_fr - eq3) <= 3 * sd_fr / math.sqrt(trials)
    assert abs(sum(estimates) / trials - n) <= 0.1 * n


def _sig(x: float, digits: int) -> float:
    return float(f"{x:.{digits - 1}e}")


def test_formula_reference_table() -> None:
    # Spec 001 §3.2 table, compared at the printed precision. (Its n = 1 row
    # prints 5.9e-8 for the exact Eq. 1; the exact value is 5.82e-8.)
    table = {
        1: ("5.8e-8", 3.98),
        5: ("3e-5", 19.27),
        20: ("0.00522", 68.82),
        30: ("0.01973", 95.95),
        50: ("0.08685", 138.97),
        64: ("0.16039", 162.01),
        100: ("0.39153", 202.50),
    }
    for n, (fpr_text, alpha) in table.items():
        digits = len(fpr_text.split("e")[0].replace("0.", "").lstrip("0").replace(".", ""))
        assert _sig(tcbf.false_positive_rate(n), digits) == float(fpr_text)
        assert tcbf.expected_set_bits(n) == pytest.approx(alpha, abs=0.005)
    assert tcbf.false_positive_rate(38, exact=False) == pytest.approx(0.04019, rel=1e-3)
    assert tcbf.estimate_keys(tcbf.expected_fill_ratio(38, exact=False)) == pytest.approx(38)
    assert tcbf.estimate_keys(1.0) == math.inf
    assert tcbf.wasted_injection_ratio(0.0404) == pytest.approx(0.00163, abs=1e-5)
    assert tcbf.useful_false_injection_ratio(0.0404) == pytest.approx(0.0388, abs=1e-4)
    assert tcbf.distinct_keys_uniform(38, 38) == pytest.approx(24.2, abs=0.05)
    assert tcbf.distinct_keys_uniform(100, 38) == pytest.approx(35.4, abs=0.05)
    assert tcbf.distinct_keys(10, [0.5, 0.5]) == pytest.approx(2 * (1 - 0.5**10))


# ------------------------------------------------------------ item 13: sizes


def _genuine(*keys: str | bytes) -> TCBF:
    f = TCBF()
    for key in keys:
        f.insert(key)
    return f


def test_genuine_single_key_is_five_bytes() -> None:
    enc, body = encode_body(_genuine("NewMoon"), FilterKind.GENUINE)
    assert enc is Encoding.SPARSE_UNIFORM and body == bytes.fromhex("0f3ba4cd32")
    assert encode_body(_genuine(b"NewMoon"), FilterKind.GENUINE)[1] == bytes.fromhex("1c1fd1eb32")
    for text, hexbody in (("Twitter's New", "13355c6432"), ("openwebawards", "0c296adf32")):
        assert encode_body(_genuine(text), FilterKind.GENUINE)[1] == bytes.fromhex(hexbody)
    wire = encode_filter(_genuine("NewMoon"), FilterKind.GENUINE)
    assert wire == struct.pack(">BHBBBH", 0, 256, 4, 1, 2, 4) + bytes.fromhex("0f3ba4cd32")


def test_encoder_picks_sparse_iff_alpha_below_32() -> None:
    rng = random.Random(13)
    for alpha in (0, 1, 5, 31, 32, 33, 100, 256):
        f = TCBF()
        for p in rng.sample(range(256), alpha):
            f.counters[p] = rng.randint(1, 255)
        if alpha >= 2:
            f.counters[f.set_positions()[0]] = 1
            f.counters[f.set_positions()[1]] = 2  # not uniform
        enc, body = encode_body(f, FilterKind.RELAY)
        sparse = (Encoding.SPARSE, Encoding.SPARSE_UNIFORM) if alpha == 1 else (Encoding.SPARSE,)
        assert (enc in sparse) is (alpha < 32)
        assert len(body) == min(2 * alpha, 32 + alpha)
        bf_enc, bf_body = encode_body(f, FilterKind.RELAY_BF)
        assert len(bf_body) == min(alpha, 32)
        assert (bf_enc is Encoding.SPARSE) is (alpha < 32)
    full = TCBF()
    full.counters[:] = bytes([50]) * 256
    dense = (Encoding.DENSE_UNIFORM, bytes([255]) * 32 + b"2")
    assert encode_body(full, FilterKind.GENUINE) == dense


def test_38_key_relay_filter_fits_one_datagram() -> None:
    rng = random.Random(38)
    relay = TCBF(df=0.001)
    for i in range(38):
        g = _genuine(f"trend{i}")
        for _ in range(rng.randint(1, 4)):
            relay.a_merge(g)
    wire = encode_filter(relay, FilterKind.RELAY)
    assert len(wire) - tcbf.HEADER_SIZE <= 288 and len(wire) < 1200
    kind, back = decode_filter(wire)
    assert kind is FilterKind.RELAY and back == relay and back.merged


def test_counters_on_the_wire_are_decayed_first() -> None:
    f = filt(256, {7: 20}, df=1.0)
    _, back = decode_filter(encode_filter(f, FilterKind.RELAY, now=5.0), k=2, now=5.0)
    assert as_dict(back) == {7: 15}


def test_bf_kinds_strip_counters() -> None:
    f = _genuine("NewMoon", "openwebawards")
    kind, back = decode_filter(encode_filter(f, FilterKind.INTEREST_BF))
    assert kind is FilterKind.INTEREST_BF
    assert back.set_positions() == f.set_positions() and back.uniform_counter() == 1
    assert back.exists("NewMoon") and not back.exists("funnybutnotcool")


# ------------------------------------------------------- strict decoding


def _valid() -> bytes:
    return encode_filter(_genuine("NewMoon"), FilterKind.GENUINE)


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"", TCBFDecodeError),
        (_valid()[:7], TCBFDecodeError),
        (_valid() + b"\x00", TCBFDecodeError),
        (_valid()[:-1], TCBFDecodeError),
        (b"\x09" + _valid()[1:], TCBFDecodeError),  # unknown kind
        (_valid()[:1] + struct.pack(">H", 128) + _valid()[3:], TCBFConfigMismatch),  # m
        (_valid()[:3] + b"\x05" + _valid()[4:], TCBFConfigMismatch),  # k
        (_valid()[:4] + b"\x07" + _valid()[5:], TCBFConfigMismatch),  # hash id
        (_valid()[:5] + b"\x09" + _valid()[6:], TCBFDecodeError),  # unknown encoding
        (b"\x02" + _valid()[1:], TCBFDecodeError),  # uniform encoding on a BF kind
        (_valid()[:8] + bytes.fromhex("0f3ba4cd00"), TCBFDecodeError),  # zero counter
        (_valid()[:8] + bytes.fromhex("3b0fa4cd32"), TCBFDecodeError),  # not ascending
        (_valid()[:8] + bytes.fromhex("0f0fa4cd32"), TCBFDecodeError),  # repeated position
        (_valid()[:6] + struct.pack(">H", 300) + _valid()[8:], TCBFDecodeError),  # count > m
    ],
)
def test_decoder_rejects_bad_input(data: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        decode_filter(data)


def test_decoder_rejects_dense_inconsistencies() -> None:
    header = struct.pack(">BHBBBH", 1, 12, 4, 1, Encoding.DENSE, 1)
    with pytest.raises(TCBFDecodeError, match="beyond m"):
        decode_filter(header + b"\x00\x10" + b"\x05", m=12)  # bit 12 set, m = 12
    with pytest.raises(TCBFDecodeError, match="header says"):
        decode_filter(header + b"\x03\x00" + b"\x05", m=12)  # 2 bits set, count 1
    ok = decode_filter(header + b"\x00\x08" + b"\x05", m=12)[1]
    assert as_dict(ok) == {11: 5}
    with pytest.raises(TCBFDecodeError):
        decode_filter(bytearray(b"x"))
    with pytest.raises(TCBFDecodeError):
        decode_filter("not bytes")  # type: ignore[arg-type]


def test_wide_filters_use_two_byte_positions() -> None:
    f = TCBF(1024, 3)
    f.insert("x")
    enc, body = encode_body(f, FilterKind.GENUINE)
    assert enc is Encoding.SPARSE_UNIFORM and len(body) == 2 * f.popcount() + 1
    assert decode_filter(encode_filter(f, FilterKind.GENUINE), m=1024, k=3)[1] == f


# --------------------------------------------------- item 14: Eq. 5 calculator


def test_decay_factor_table() -> None:
    table = {
        10: (0.0005, 0.0834),
        38: (0.0413, 0.0868),
        60: (0.143, 0.0953),
        79: (0.272, 0.1060),
        100: (0.4437, 0.1203),
        150: (0.9208, 0.1601),
        200: (1.4516, 0.2043),
    }
    for n, (emin, df) in table.items():
        assert tcbf.expected_min_increments(n) == pytest.approx(emin, abs=6e-5)
        assert tcbf.decay_factor(n, initial=50, lifetime=600) == pytest.approx(df, abs=6e-5)
    assert tcbf.decay_factor(0, initial=50, lifetime=600) == 50 / 600
    assert tcbf.decay_factor(123, initial=50, lifetime=600) == pytest.approx(0.138, abs=5e-4)
    values = [tcbf.decay_factor(n, lifetime=600) for n in range(0, 400, 7)]
    assert values == sorted(values) and len(set(values)) == len(values)
    assert tcbf.decay_factor(10, lifetime=600, delta=0.01) == pytest.approx(0.0934, abs=6e-5)
    # Large N must not underflow the binomial pmf.
    big = tcbf.expected_min_increments(50_000)
    assert 50_000 * 4 / 256 * 0.9 < big < 50_000 * 4 / 256
    with pytest.raises(TCBFError):
        tcbf.decay_factor(-1, lifetime=600)
    with pytest.raises(TCBFError):
        tcbf.decay_factor(10, lifetime=0)


# ------------------------------------------------- multi-filter allocation


def test_multi_filter_table() -> None:
    rows = {
        1: (0.0402, 229, 0.448),
        2: (0.0087, 263, 0.257),
        3: (0.0031, 276, 0.180),
        4: (0.00145, 283, 0.138),
        8: (0.00021, 293, 0.072),
    }
    for h, (fpr, size, tau) in rows.items():
        split = [38 / h] * h
        assert tcbf.joint_fpr(split) == pytest.approx(fpr, rel=0.03)
        assert round(tcbf.multi_filter_bytes(split)) == size
        assert tcbf.expected_fill_ratio(38 / h, exact=False) == pytest.approx(tau, abs=6e-4)
    h, tau = tcbf.best_filter_count(38, 230)
    assert h == 1 and tau == pytest.approx(0.448, abs=6e-4)
    assert tcbf.best_filter_count(38, 264)[0] == 2
    assert tcbf.best_filter_count(38, 294)[0] == 8
    assert tcbf.best_filter_count(38, 10_000)[0] == 38  # never more filters than keys
    with pytest.raises(TCBFError):
        tcbf.best_filter_count(38, 100)


def test_tcbf_set_opens_filters_and_queries_all() -> None:
    s = TCBFSet(tau=0.05, df=1.0, now=0.0)
    for i in range(12):
        s.a_merge(_genuine(f"k{i}"), now=0.0)
    assert len(s) > 1
    assert all(fr <= 0.05 + 4 / 256 for fr in s.fill_ratios()[:-1])
    assert all(s.exists(f"k{i}", now=0.0) for i in range(12))
    assert s.counter("k0", now=10.0) == 40
    other = TCBFSet(tau=0.05, df=1.0, now=0.0)
    other.a_merge(_genuine("remote"), now=0.0)
    other.a_merge(_genuine("remote"), now=0.0)
    s.m_merge(other, now=10.0)
    assert s.counter("remote", now=10.0) == 90
    s.apply_decay(100.0)
    assert len(s) == 1 and s.filters[0].is_empty()
    with pytest.raises(TCBFError):
        TCBFSet(tau=0.0)
