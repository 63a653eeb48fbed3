"""The Temporal Counting Bloom Filter (TCBF) of B-SUB (Zhao & Wu, ICDCS 2010, §IV).

A TCBF is an m-bit Bloom filter whose set bits carry a one-byte counter.
The counters do not count keys: they say how fresh and how strongly held an
interest is. Insertion sets a key's counters to ``I``; A-merge adds counters
(a consumer reinforcing a broker), M-merge takes the maximum (brokers
swapping filters without the bogus-counter loop of A-merge); every counter
decays at ``DF`` units per unit time, so an interest that is not reinforced
disappears. Forwarding compares two filters' counters for a key (the
*preference*).

Representation (Zhao and Wu 2010, §IV-A): ``counters`` is a ``bytearray(m)`` and bit j
is set exactly when ``counters[j] > 0``; counters saturate at ``C_MAX`` = 255.

Hashing (ours: the paper fixes no hash functions): a ``str`` key is canonicalised (Unicode
NFC, casefold, all whitespace removed, UTF-8); ``bytes`` are hashed as they
are. Position i is ``mmh3.hash(key, seed=i, signed=False) % m`` for
i = 0..k-1, and duplicate positions collapse.

Decay ticks, as in the paper: every counter of a filter loses one unit every
``1 / DF`` ("the DF ... is set to 0.138/min, or decremented by 1 every 7.2
minutes", Zhao & Wu 2010, §VII-B), on one clock per filter. The filter keeps
the tick phase ``t_ref`` as an exact rational and applies
``floor((now - t_ref) * DF)`` whole decrements, carrying the remainder, so
there is no float drift. What that means for a key's life (the counter's
quantisation, §VI-C: one byte of counter is 255 ticks):

- a counter set to ``c`` (insertion: ``I``; a merge: the merged value) at time
  ``t`` reaches 0 at the ``c``-th tick after ``t``, so with no further input
  the key is present for every elapsed time below ``L`` and absent from ``L``
  on, where ``c / DF - 1 / DF < L <= c / DF``: ``L = c / DF - phase``, the
  phase being how far ``t`` lies into the current tick (``next_tick``);
- ``L = c / DF`` exactly when ``t`` falls on a tick, and always for a key that
  enters an empty filter (an empty filter restarts its phase there);
- a key set in the middle of a tick loses up to one tick of life: I = 10,
  DF = 1/s, A-merged at t = 0.9 into a filter ticking since t = 0, it is gone
  at t = 10, 9.1 s later (``tests/unit/test_tcbf.py`` pins both bounds).

Every operation that takes ``now`` applies the decay first; ``now=None``
means "as of the last decay".
"""

from __future__ import annotations

import enum
import math
import struct
import unicodedata
from collections.abc import Iterable, Sequence
from fractions import Fraction

import mmh3

C_MAX = 255
HASH_ID_MMH3_SEEDS = 1
"""``hash_id`` on the wire for the scheme above (canonical key, mmh3 seeds 0..k-1)."""
MAX_M = 0xFFFF
"""Largest filter length: ``m`` travels as a u16 (the FILTER message, ``bsub.wire``)."""
DEFAULT_M = 256
DEFAULT_K = 4
DEFAULT_I = 50

Key = str | bytes


class TCBFError(ValueError):
    """Bad TCBF parameters or an operation the TCBF does not allow."""


class TCBFDecodeError(TCBFError):
    """An encoded filter that is malformed; the message says what is wrong."""


class TCBFConfigMismatch(TCBFDecodeError):
    """A well-formed filter built with another m, k or hash scheme (count it, do not merge)."""


class InsertAfterMergeError(TCBFError):
    """Keys may only be inserted into a filter that was never merged (Zhao and Wu 2010, §IV-A)."""


# ----------------------------------------------------------------- hashing


def canonical_key(text: str) -> bytes:
    """NFC, casefold, remove all whitespace, UTF-8: ``"Twitter's New"`` -> ``twitter'snew``."""
    folded = unicodedata.normalize("NFC", text).casefold()
    return "".join(folded.split()).encode("utf-8")


def key_bytes(key: Key) -> bytes:
    """The bytes that get hashed: canonical form of a ``str``, ``bytes`` unchanged."""
    if isinstance(key, str):
        return canonical_key(key)
    if isinstance(key, bytes | bytearray | memoryview):
        return bytes(key)
    raise TCBFError(f"a TCBF key must be str or bytes, not {type(key).__name__}")


def positions(key: Key, m: int = DEFAULT_M, k: int = DEFAULT_K) -> frozenset[int]:
    """The key's position set ``{mmh3(key, seed=i) % m : i < k}`` (duplicates collapse)."""
    data = key_bytes(key)
    return frozenset(mmh3.hash(data, seed=i, signed=False) % m for i in range(k))


def _check_params(m: int, k: int) -> None:
    if isinstance(m, bool) or not isinstance(m, int) or not 1 <= m <= MAX_M:
        raise TCBFError(f"m must be an integer in 1..{MAX_M}, got {m!r}")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 255:
        raise TCBFError(f"k must be an integer in 1..255, got {k!r}")


def _check_counter(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= C_MAX:
        raise TCBFError(f"{name} must be an integer in 1..{C_MAX}, got {value!r}")


def _time(now: float) -> Fraction:
    if isinstance(now, bool) or not isinstance(now, int | float) or not math.isfinite(now):
        raise TCBFError(f"time must be a finite number, got {now!r}")
    return Fraction(now)


def _rate(df: float) -> Fraction:
    if isinstance(df, bool) or not isinstance(df, int | float) or not math.isfinite(df) or df < 0:
        raise TCBFError(f"decay factor must be a finite number >= 0, got {df!r}")
    return Fraction(df)


# -------------------------------------------------------------------- TCBF


class TCBF:
    """One Temporal Counting Bloom Filter (``m`` bits, ``k`` hashes, insertion value ``I``).

    ``df`` is the decaying factor in counter units per unit of the driver's
    clock (seconds for meshsub drivers); 0 disables decay (genuine filters).
    """

    __slots__ = ("_df", "_t_ref", "counters", "initial", "k", "m", "merged")

    def __init__(
        self,
        m: int = DEFAULT_M,
        k: int = DEFAULT_K,
        *,
        initial: int = DEFAULT_I,
        df: float = 0.0,
        now: float = 0.0,
    ) -> None:
        _check_params(m, k)
        _check_counter("initial value I", initial)
        self.m = m
        self.k = k
        self.initial = initial
        self.counters = bytearray(m)
        self._df = _rate(df)
        self._t_ref = _time(now)
        self.merged = False
        """True once the filter took part in a merge as the receiving side."""

    # ---------------------------------------------------------------- decay

    @property
    def df(self) -> float:
        return float(self._df)

    def set_df(self, df: float, now: float) -> None:
        """Change the decaying factor at ``now``, keeping progress towards the next decrement."""
        rate = _rate(df)
        self.apply_decay(now)
        t = _time(now)
        if self._df > 0 and rate > 0 and t > self._t_ref:
            progress = (t - self._t_ref) * self._df  # fraction of a decrement, in [0, 1)
            self._t_ref = t - progress / rate
        else:
            self._t_ref = max(self._t_ref, t)
        self._df = rate

    def apply_decay(self, now: float | None) -> None:
        """Bring the counters to time ``now`` (no-op for ``None`` or a clock going backwards)."""
        if now is None:
            return
        t = _time(now)
        if self._df == 0 or not any(self.counters):
            # Nothing decays: restart the phase so a fresh key lives exactly I/DF.
            self._t_ref = max(self._t_ref, t)
            return
        elapsed = t - self._t_ref
        if elapsed <= 0:
            return
        steps = math.floor(elapsed * self._df)
        if steps <= 0:
            return
        if steps >= C_MAX:
            self.counters = bytearray(self.m)
            self._t_ref = t
            return
        table = bytes(max(0, c - steps) for c in range(256))
        self.counters = bytearray(self.counters.translate(table))
        self._t_ref += steps / self._df

    def next_tick(self, now: float) -> float:
        """When the next decrement falls, at or after ``now`` (inf without decay): a
        counter set to ``c`` at ``now`` lasts ``next_tick(now) - now + (c - 1) / DF``."""
        if self._df == 0:
            return math.inf
        self.apply_decay(now)
        t = _time(now)
        if not any(self.counters) or t <= self._t_ref:
            # an empty filter restarts its phase when something enters it
            start = max(self._t_ref, t)
            return float(start + 1 / self._df)
        ticks = math.floor((t - self._t_ref) * self._df)
        return float(self._t_ref + (ticks + 1) / self._df)

    def lifetime(self, counter: int) -> float:
        """How long a counter of value ``counter`` survives from a tick: ``counter / DF``
        (up to one tick less when set between ticks, see the module docstring)."""
        return math.inf if self._df == 0 else float(counter / self._df)

    # ----------------------------------------------------- keys and positions

    def positions(self, key: Key) -> frozenset[int]:
        return positions(key, self.m, self.k)

    def _check_positions(self, pos: Iterable[int]) -> list[int]:
        out = list(pos)
        for p in out:
            if isinstance(p, bool) or not isinstance(p, int) or not 0 <= p < self.m:
                raise TCBFError(f"position {p!r} is outside 0..{self.m - 1}")
        return out

    def insert_positions(self, pos: Iterable[int], now: float | None = None) -> None:
        """Set each still-clear position to ``I``; set ones keep their value (§IV-A)."""
        if self.merged:
            raise InsertAfterMergeError(
                "cannot insert into a merged TCBF: insert into a fresh filter and merge it"
            )
        checked = self._check_positions(pos)
        self.apply_decay(now)
        for p in checked:
            if self.counters[p] == 0:
                self.counters[p] = self.initial

    def insert(self, key: Key, now: float | None = None) -> None:
        self.insert_positions(self.positions(key), now)

    def counter_at(self, pos: Iterable[int], now: float | None = None) -> int:
        """``min`` of the counters at ``pos``: 0 iff some position is clear."""
        checked = self._check_positions(pos)
        self.apply_decay(now)
        return min((self.counters[p] for p in checked), default=0)

    def counter(self, key: Key, now: float | None = None) -> int:
        """``c_F(key)``: the key's smallest counter, 0 iff the key is absent."""
        return self.counter_at(self.positions(key), now)

    def exists(self, key: Key, now: float | None = None) -> bool:
        """Existential query: every position of ``key`` is set."""
        return self.counter(key, now) > 0

    def __contains__(self, key: Key) -> bool:
        return self.exists(key)

    # --------------------------------------------------------------- merges

    def _check_compatible(self, other: TCBF) -> None:
        if not isinstance(other, TCBF):
            raise TCBFError(f"can only merge a TCBF, not {type(other).__name__}")
        if (self.m, self.k) != (other.m, other.k):
            raise TCBFError(
                f"cannot merge a TCBF(m={other.m}, k={other.k}) into a TCBF(m={self.m}, k={self.k})"
            )

    def a_merge(self, other: TCBF, now: float | None = None) -> None:
        """Additive merge into this filter: counters add, saturating at ``C_MAX``."""
        self._check_compatible(other)
        self.apply_decay(now)
        other.apply_decay(now)
        self.counters = bytearray(
            min(C_MAX, a + b) for a, b in zip(self.counters, other.counters, strict=True)
        )
        self.merged = True

    def m_merge(self, other: TCBF, now: float | None = None) -> None:
        """Maximum merge into this filter: each counter becomes the larger of the two."""
        self._check_compatible(other)
        self.apply_decay(now)
        other.apply_decay(now)
        self.counters = bytearray(map(max, self.counters, other.counters))
        self.merged = True

    # ----------------------------------------------------------- statistics

    def set_positions(self) -> list[int]:
        """Positions of the set bits, ascending."""
        return [j for j, c in enumerate(self.counters) if c]

    def popcount(self) -> int:
        """alpha: the number of set bits."""
        return self.m - self.counters.count(0)

    def fill_ratio(self) -> float:
        """FR = alpha / m (Eq. 3)."""
        return self.popcount() / self.m

    def estimated_keys(self) -> float:
        """n^ = (m/k) ln(1 / (1 - FR)) from the observed fill ratio (inf when full)."""
        return estimate_keys(self.fill_ratio(), self.m, self.k)

    def uniform_counter(self) -> int | None:
        """The common value if every set counter is equal (a genuine filter), else ``None``."""
        values = {c for c in self.counters if c}
        return values.pop() if len(values) == 1 else None

    def is_empty(self) -> bool:
        return not any(self.counters)

    # ------------------------------------------------------------- plumbing

    def copy(self) -> TCBF:
        out = TCBF.__new__(TCBF)
        out.m, out.k, out.initial = self.m, self.k, self.initial
        out.counters = bytearray(self.counters)
        out._df, out._t_ref, out.merged = self._df, self._t_ref, self.merged
        return out

    def __eq__(self, other: object) -> bool:
        """Same shape and counters (time bookkeeping is not compared)."""
        if not isinstance(other, TCBF):
            return NotImplemented
        return (self.m, self.k, self.counters) == (other.m, other.k, other.counters)

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        body = ", ".join(f"{j}:{c}" for j, c in enumerate(self.counters) if c)
        return f"TCBF(m={self.m}, k={self.k}, df={float(self._df):g}, {{{body}}})"


def preference(own: TCBF, peer: TCBF, key: Key, now: float | None = None) -> float:
    """PREF_{own,peer}(key): how much better ``peer`` holds ``key`` than ``own``.

    ``(c_peer - c_own) / c_own`` when ``own`` holds the key, else ``c_peer``
    (the paper's formula; its remark that the value is ``c_own`` would make it
    always 0 there; Zhao and Wu 2010, §V-D). Forward when the result is > 0.
    """
    return preference_at(own, peer, own.positions(key), now)


def preference_at(own: TCBF, peer: TCBF, pos: Iterable[int], now: float | None = None) -> float:
    """``preference`` for a key given by its positions (computed once per message)."""
    pos = list(pos)
    c_own = own.counter_at(pos, now)
    c_peer = peer.counter_at(pos, now)
    if c_own == 0:
        return float(c_peer)
    return (c_peer - c_own) / c_own


# ---------------------------------------------------------- multi-filter set


class TCBFSet:
    """Dynamic multi-filter allocation (Zhao and Wu 2010, §VI-D).

    A new sub-filter opens when the newest one's fill ratio exceeds ``tau``.
    A-merges go into the newest sub-filter; an M-merge of two sets merges
    sub-filters pairwise by age (oldest with oldest); all decay; a query is
    the OR of the sub-filters and a key's counter is its largest sub-filter
    counter. Sub-filters that decay to empty are dropped (one always stays).
    """

    def __init__(
        self,
        m: int = DEFAULT_M,
        k: int = DEFAULT_K,
        *,
        tau: float,
        max_filters: int = 8,
        initial: int = DEFAULT_I,
        df: float = 0.0,
        now: float = 0.0,
    ) -> None:
        if not (isinstance(tau, int | float) and 0.0 < tau <= 1.0):
            raise TCBFError(f"fill-ratio threshold tau must be in (0, 1], got {tau!r}")
        if isinstance(max_filters, bool) or not isinstance(max_filters, int) or max_filters < 1:
            raise TCBFError(f"max_filters must be a positive integer, got {max_filters!r}")
        self.tau = float(tau)
        self.max_filters = max_filters
        self.filters = [TCBF(m, k, initial=initial, df=df, now=now)]

    def _new(self, now: float | None) -> TCBF:
        proto = self.filters[-1]
        out = TCBF(proto.m, proto.k, initial=proto.initial, df=proto.df)
        out._t_ref = proto._t_ref
        out.apply_decay(now)
        return out

    def apply_decay(self, now: float | None) -> None:
        for f in self.filters:
            f.apply_decay(now)
        kept = [f for f in self.filters if not f.is_empty()]
        self.filters = kept or self.filters[-1:]

    def a_merge(self, genuine: TCBF, now: float | None = None) -> None:
        self.apply_decay(now)
        newest = self.filters[-1]
        if newest.fill_ratio() > self.tau and len(self.filters) < self.max_filters:
            newest = self._new(now)
            self.filters.append(newest)
        newest.a_merge(genuine, now)

    def m_merge(self, other: TCBFSet, now: float | None = None) -> None:
        self.apply_decay(now)
        other.apply_decay(now)
        for i, theirs in enumerate(other.filters):
            if i < len(self.filters):
                self.filters[i].m_merge(theirs, now)
            elif len(self.filters) < self.max_filters:
                mine = self._new(now)
                mine.m_merge(theirs, now)
                self.filters.append(mine)
            else:
                self.filters[-1].m_merge(theirs, now)

    def counter(self, key: Key, now: float | None = None) -> int:
        self.apply_decay(now)
        pos = self.filters[0].positions(key)
        return max(f.counter_at(pos) for f in self.filters)

    def exists(self, key: Key, now: float | None = None) -> bool:
        return self.counter(key, now) > 0

    def fill_ratios(self) -> list[float]:
        return [f.fill_ratio() for f in self.filters]

    def __len__(self) -> int:
        return len(self.filters)


# ------------------------------------------------------------------ encoding


class FilterKind(enum.IntEnum):
    """What a FILTER message carries (``bsub.wire``); BF kinds have no counters."""

    GENUINE = 0
    RELAY = 1
    INTEREST_BF = 2
    RELAY_BF = 3

    @property
    def has_counters(self) -> bool:
        return self in (FilterKind.GENUINE, FilterKind.RELAY)


class Encoding(enum.IntEnum):
    DENSE = 0
    SPARSE = 1
    SPARSE_UNIFORM = 2
    DENSE_UNIFORM = 3


_HEADER = struct.Struct(">BHBBBH")  # kind, m, k, hash_id, enc, count
HEADER_SIZE = _HEADER.size  # 8 bytes
# Tie-break when two encodings have the same size: dense before sparse (the
# rule "sparse iff alpha < m / ceil(log2 m)"), uniform before per-bit counters.
_PREFERENCE = (Encoding.DENSE_UNIFORM, Encoding.DENSE, Encoding.SPARSE_UNIFORM, Encoding.SPARSE)


def _pos_bytes(m: int) -> int:
    return 1 if m <= 256 else 2


def _body_size(enc: Encoding, m: int, alpha: int, counters: bool) -> int:
    bitmap = (m + 7) // 8
    pos = alpha * _pos_bytes(m)
    if enc is Encoding.DENSE:
        return bitmap + (alpha if counters else 0)
    if enc is Encoding.SPARSE:
        return pos + (alpha if counters else 0)
    if enc is Encoding.SPARSE_UNIFORM:
        return pos + 1
    return bitmap + 1


def _allowed(kind: FilterKind) -> tuple[Encoding, ...]:
    if kind.has_counters:
        return tuple(Encoding)
    return (Encoding.DENSE, Encoding.SPARSE)


def encode_body(f: TCBF, kind: FilterKind, now: float | None = None) -> tuple[Encoding, bytes]:
    """The smallest valid encoding of ``f`` for ``kind`` and its body bytes."""
    f.apply_decay(now)
    set_pos = f.set_positions()
    alpha = len(set_pos)
    counters = kind.has_counters
    uniform = f.uniform_counter() if counters else None
    candidates = [
        enc for enc in _PREFERENCE
        if enc in _allowed(kind)
        and (uniform is not None or enc not in (Encoding.SPARSE_UNIFORM, Encoding.DENSE_UNIFORM))
    ]  # fmt: skip
    enc = min(candidates, key=lambda e: (_body_size(e, f.m, alpha, counters), _PREFERENCE.index(e)))
    out = bytearray()
    if enc in (Encoding.DENSE, Encoding.DENSE_UNIFORM):
        bitmap = bytearray((f.m + 7) // 8)
        for p in set_pos:
            bitmap[p >> 3] |= 1 << (p & 7)
        out += bitmap
    else:
        width = _pos_bytes(f.m)
        for p in set_pos:
            out += p.to_bytes(width, "big")
    if enc in (Encoding.SPARSE_UNIFORM, Encoding.DENSE_UNIFORM):
        assert uniform is not None
        out.append(uniform)
    elif counters:
        out += bytes(f.counters[p] for p in set_pos)
    return enc, bytes(out)


def encode_filter(f: TCBF, kind: FilterKind, now: float | None = None) -> bytes:
    """A FILTER message body: 8-byte header (kind, m, k, hash_id, enc, count) + encoding."""
    kind = FilterKind(kind)
    enc, body = encode_body(f, kind, now)
    return _HEADER.pack(kind, f.m, f.k, HASH_ID_MMH3_SEEDS, enc, f.popcount()) + body


def decode_filter(
    data: bytes | bytearray | memoryview,
    *,
    m: int = DEFAULT_M,
    k: int = DEFAULT_K,
    hash_id: int = HASH_ID_MMH3_SEEDS,
    now: float = 0.0,
    df: float = 0.0,
    initial: int = DEFAULT_I,
) -> tuple[FilterKind, TCBF]:
    """Strictly decode ``encode_filter`` output; raise ``TCBFDecodeError`` on any defect.

    ``m``, ``k`` and ``hash_id`` are the receiver's configuration: a filter
    built with others raises ``TCBFConfigMismatch``. Counters are taken as
    current at ``now`` (the sender decayed them before sending). BF kinds
    decode with every set counter = 1: good for existential queries only.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TCBFDecodeError(f"filter must be bytes, not {type(data).__name__}")
    raw = bytes(data)
    if len(raw) < HEADER_SIZE:
        raise TCBFDecodeError(f"filter is {len(raw)} bytes, shorter than its header")
    kind_raw, f_m, f_k, f_hash, enc_raw, count = _HEADER.unpack_from(raw)
    try:
        kind = FilterKind(kind_raw)
    except ValueError:
        raise TCBFDecodeError(f"unknown filter kind {kind_raw}") from None
    if (f_m, f_k, f_hash) != (m, k, hash_id):
        raise TCBFConfigMismatch(
            f"filter has m={f_m}, k={f_k}, hash_id={f_hash}; "
            f"expected m={m}, k={k}, hash_id={hash_id}"
        )
    try:
        enc = Encoding(enc_raw)
    except ValueError:
        raise TCBFDecodeError(f"unknown filter encoding {enc_raw}") from None
    if enc not in _allowed(kind):
        raise TCBFDecodeError(f"encoding {enc.name} is not valid for a {kind.name} filter")
    if count > m:
        raise TCBFDecodeError(f"filter claims {count} set bits but has only m={m}")
    body = raw[HEADER_SIZE:]
    expected = _body_size(enc, m, count, kind.has_counters)
    if len(body) != expected:
        raise TCBFDecodeError(
            f"{enc.name} body of {count} set bits must be {expected} bytes, got {len(body)}"
        )
    set_pos = _decode_positions(enc, body, m, count)
    values = _decode_counters(enc, body, m, count, kind.has_counters)
    try:
        f = TCBF(m, k, initial=initial, df=df, now=now)
    except TCBFError as exc:
        raise TCBFDecodeError(str(exc)) from None
    for p, c in zip(set_pos, values, strict=True):
        f.counters[p] = c
    f.merged = f.uniform_counter() is None
    return kind, f


def _decode_positions(enc: Encoding, body: bytes, m: int, count: int) -> list[int]:
    if enc in (Encoding.DENSE, Encoding.DENSE_UNIFORM):
        nbytes = (m + 7) // 8
        bitmap = int.from_bytes(body[:nbytes], "little")
        if bitmap >> m:
            raise TCBFDecodeError("dense bitmap has bits set beyond m")
        if bitmap.bit_count() != count:
            raise TCBFDecodeError(
                f"dense bitmap has {bitmap.bit_count()} bits set, header says {count}"
            )
        return [j for j in range(m) if bitmap >> j & 1]
    width = _pos_bytes(m)
    out = [int.from_bytes(body[i * width : (i + 1) * width], "big") for i in range(count)]
    for i, p in enumerate(out):
        if p >= m:
            raise TCBFDecodeError(f"position {p} is outside 0..{m - 1}")
        if i and p <= out[i - 1]:
            raise TCBFDecodeError("sparse positions must be strictly ascending")
    return out


def _decode_counters(
    enc: Encoding, body: bytes, m: int, count: int, has_counters: bool
) -> Sequence[int]:
    if not has_counters:
        return [1] * count
    if enc in (Encoding.SPARSE_UNIFORM, Encoding.DENSE_UNIFORM):
        value = body[-1]
        if value == 0:
            raise TCBFDecodeError("uniform counter must be at least 1")
        return [value] * count
    values = body[len(body) - count :] if count else b""
    if 0 in values:
        raise TCBFDecodeError("a set bit carries a zero counter")
    return list(values)


# ------------------------------------------------------------------ formulas


def _check_mk(m: int, k: int) -> None:
    if m < 1 or k < 1:
        raise TCBFError(f"m and k must be positive, got m={m}, k={k}")


def expected_set_bits(
    n: float, m: int = DEFAULT_M, k: int = DEFAULT_K, exact: bool = True
) -> float:
    """Eq. 2: alpha = m (1 - (1 - 1/m)^(nk)), or ``m (1 - e^(-kn/m))`` with ``exact=False``."""
    _check_mk(m, k)
    if exact:
        return float(m * (1.0 - (1.0 - 1.0 / m) ** (n * k)))
    return m * -math.expm1(-k * n / m)


def expected_fill_ratio(
    n: float, m: int = DEFAULT_M, k: int = DEFAULT_K, exact: bool = True
) -> float:
    """Eq. 3: FR = alpha / m."""
    return expected_set_bits(n, m, k, exact) / m


def false_positive_rate(
    n: float, m: int = DEFAULT_M, k: int = DEFAULT_K, exact: bool = True
) -> float:
    """Eq. 1: f = (1 - (1 - 1/m)^(nk))^k (n = 38, m = 256, k = 4 gives 0.0404)."""
    return expected_fill_ratio(n, m, k, exact) ** k


def estimate_keys(fill_ratio: float, m: int = DEFAULT_M, k: int = DEFAULT_K) -> float:
    """Inverse of Eq. 3: n^ = (m/k) ln(1/(1 - FR)); ``inf`` for a full filter."""
    _check_mk(m, k)
    if not 0.0 <= fill_ratio <= 1.0:
        raise TCBFError(f"fill ratio must be in [0, 1], got {fill_ratio!r}")
    if fill_ratio >= 1.0:
        return math.inf
    return -(m / k) * math.log1p(-fill_ratio)


def distinct_keys_uniform(n_collected: float, n_universe: int) -> float:
    """Expected distinct keys among N draws from K equally popular keys: K (1 - (1 - 1/K)^N).

    Replaces the paper's Eq. 6 (Zhao and Wu 2010, §VI-C), which decreases for large N.
    """
    if n_universe < 1:
        raise TCBFError("the key universe must hold at least one key")
    return float(n_universe * (1.0 - (1.0 - 1.0 / n_universe) ** n_collected))


def distinct_keys(n_collected: float, popularity: Iterable[float]) -> float:
    """Expected distinct keys among N draws with key probabilities p_j: sum 1 - (1 - p_j)^N."""
    return float(sum(1.0 - (1.0 - p) ** n_collected for p in popularity))


def wasted_injection_ratio(fpr: float) -> float:
    """FPR^2: a message nobody wants passes a relay and the consumer's final match (§3.8 e)."""
    return fpr * fpr


def useful_false_injection_ratio(fpr: float) -> float:
    """FPR (1 - FPR): falsely injected yet reaching a truly interested consumer."""
    return fpr * (1.0 - fpr)


def _binomial_survival(n: int, p: float) -> list[float]:
    """``S[x] = P(X >= x)`` for X ~ Binomial(n, p), x = 0..n (log-space pmf, no underflow)."""
    if p <= 0.0:
        return [1.0] + [0.0] * n
    if p >= 1.0:
        return [1.0] * (n + 1)
    log_p, log_q = math.log(p), math.log1p(-p)
    lg_n = math.lgamma(n + 1)
    cdf = 0.0
    survival = [1.0]
    for x in range(n):
        log_pmf = lg_n - math.lgamma(x + 1) - math.lgamma(n - x + 1)
        cdf += math.exp(log_pmf + x * log_p + (n - x) * log_q)
        survival.append(max(0.0, 1.0 - cdf))
    return survival


def expected_min_increments(n_keys: int, m: int = DEFAULT_M, k: int = DEFAULT_K) -> float:
    """Corrected Eq. 4: E[min of k Binomial(N, k/m)] = sum_{x=1..N} (1 - F(x-1; N, k/m))^k."""
    _check_mk(m, k)
    if isinstance(n_keys, bool) or not isinstance(n_keys, int) or n_keys < 0:
        raise TCBFError(f"the number of keys N must be a non-negative integer, got {n_keys!r}")
    if n_keys == 0:
        return 0.0
    survival = _binomial_survival(n_keys, k / m)
    return sum(survival[x] ** k for x in range(1, n_keys + 1))


def decay_factor(
    n_keys: int,
    *,
    initial: float = DEFAULT_I,
    lifetime: float,
    m: int = DEFAULT_M,
    k: int = DEFAULT_K,
    delta: float = 0.0,
) -> float:
    """Eq. 5: DF = I (1 + E[MIN]) / T + delta, in counter units per unit of ``lifetime``.

    ``n_keys`` is N, the keys a broker collects within T. With I = 50,
    T = 600 min: N = 100 gives 0.1203/min, N = 150 gives 0.1601/min.
    """
    if not (math.isfinite(lifetime) and lifetime > 0):
        raise TCBFError(f"lifetime T must be positive, got {lifetime!r}")
    if not (math.isfinite(initial) and initial > 0):
        raise TCBFError(f"initial value I must be positive, got {initial!r}")
    return initial * (1.0 + expected_min_increments(n_keys, m, k)) / lifetime + delta


def joint_fpr(keys_per_filter: Sequence[float], m: int = DEFAULT_M, k: int = DEFAULT_K) -> float:
    """Eq. 7: 1 - prod_i (1 - (1 - e^(-n_i k/m))^k) for keys spread over several filters."""
    _check_mk(m, k)
    survive = 1.0
    for n_i in keys_per_filter:
        survive *= 1.0 - (-math.expm1(-n_i * k / m)) ** k
    return 1.0 - survive


def multi_filter_bytes(
    keys_per_filter: Sequence[float], m: int = DEFAULT_M, k: int = DEFAULT_K
) -> float:
    """Eq. 8 in bytes (units corrected): sum_i m (1 - e^(-k n_i/m)) (1 + ceil(log2 m)/8).

    That is the sparse size with one-byte counters: 2 bytes per set bit for m = 256.
    """
    _check_mk(m, k)
    per_bit = 1.0 + math.ceil(math.log2(m)) / 8.0 if m > 1 else 1.0
    return sum(m * -math.expm1(-k * n_i / m) * per_bit for n_i in keys_per_filter)


def best_filter_count(
    n_keys: int, s_max: float, m: int = DEFAULT_M, k: int = DEFAULT_K
) -> tuple[int, float]:
    """Eq. 9/10 with an equal split: the largest h with S(h) < S_max, and its threshold tau.

    The joint FPR falls as h grows while the size rises (the paper's text
    says otherwise, §VI-D), so the best h is the largest that fits.
    tau = 1 - e^(-k (n/h) / m). h never exceeds n (one key per filter).
    """
    if n_keys < 1:
        raise TCBFError("need at least one key to split")

    def size(h: int) -> float:
        return multi_filter_bytes([n_keys / h] * h, m, k)

    if size(1) >= s_max:
        raise TCBFError(f"S_max = {s_max} bytes is too small even for one filter ({size(1):.1f})")
    lo, hi = 1, n_keys
    while lo < hi:  # size(h) increases with h: largest h with size(h) < s_max
        mid = (lo + hi + 1) // 2
        if size(mid) < s_max:
            lo = mid
        else:
            hi = mid - 1
    return lo, -math.expm1(-k * (n_keys / lo) / m)
