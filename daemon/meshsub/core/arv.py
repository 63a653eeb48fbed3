"""Attribute Range Vectors (Li and Wang 2014, §IV-A): numeric ranges as power-of-two bitmaps.

An attribute's domain ``[L, U)`` is cut into ``2**level`` equal segments; an
ARV sets the bit of every segment its target range overlaps, at the smallest
level where the segments fit the range to within an accuracy threshold alpha.
Because lengths are powers of two, vectors rescale losslessly (each bit
repeated in place), merge by OR and match by ``P AND NOT S == 0``.

Everything here is exact: bounds, widths, ratios and alpha are ``Fraction``s
(the paper's own example has the equality case 22/25 against alpha = 0.88,
which floats get wrong). Conventions (half-open intervals, the aggregate fit
test, the Lmax cap) are the ones documented in docs/protocols/brvst.md:

- A target is a half-open interval ``[lo, hi)`` inside the domain; segment
  ``k`` at level ``l`` is ``[L + k w, L + (k+1) w)`` with ``w = (U - L) / 2**l``.
- A zero-width target ``[v, v]`` (only produced for values snapped onto a
  domain edge) stands for the segment containing ``v``, the last one for
  ``v = U``; its fit is 0, so it is built at ``Lmax``.
- BUILD stops at the smallest level whose *aggregate* fit
  ``|T| / (segments x w) >= alpha``; capped at ``Lmax``. The paper's
  "each segment occupied more than alpha" read per segment is not monotone
  in the level and contradicts its own examples (docs/protocols/brvst.md).

In memory an ARV is ``(level, bits)`` with segment ``k`` at bit position
``N - 1 - k`` of the int, so ``format(bits, f"0{N}b")`` prints the paper's
left-to-right string (lowest segment first).
"""

from __future__ import annotations

import enum
import functools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TypeAlias

MAX_LEVEL = 12
"""Longest vector: 4096 bits (a 512-byte bitmap)."""

Exact: TypeAlias = Fraction
Interval: TypeAlias = tuple[Fraction, Fraction]
"""A half-open ``[lo, hi)`` (or a zero-width ``[v, v]``) in exact numbers."""


class ARVError(ValueError):
    """A bad domain, level, bitmap or target range."""


def exact(value: int | float | str | Fraction) -> Fraction:
    """``value`` as an exact rational: floats bit for bit, strings as decimals ("0.9" = 9/10)."""
    if isinstance(value, bool):
        raise ARVError(f"not a number: {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ARVError(f"not a finite number: {value!r}")
    try:
        return Fraction(value)
    except (ValueError, ZeroDivisionError) as exc:
        raise ARVError(f"not a number: {value!r}") from exc


def decimal(value: float | int | str | Fraction) -> Fraction:
    """A configured number as the decimal a person wrote: ``0.9`` is exactly 9/10.

    ``repr`` of a float is the shortest decimal that reads back as the same
    float, so this recovers "0.9" from the float 0.9 (whose binary value is
    slightly below 9/10) and keeps exact equality cases such as 22/25 = 0.88.
    """
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ARVError(f"not a finite number: {value!r}")
        return Fraction(repr(value))
    return exact(value)


@dataclass(frozen=True, slots=True)
class Domain:
    """One attribute's system-wide range ``[L, U)``, point width ``q`` and level cap ``Lmax``."""

    L: Fraction
    U: Fraction
    q: Fraction
    Lmax: int

    def __post_init__(self) -> None:
        for name in ("L", "U", "q"):
            object.__setattr__(self, name, exact(getattr(self, name)))
        if not self.U > self.L:
            raise ARVError(f"domain needs U > L, got [{self.L}, {self.U})")
        if not self.q > 0 or self.q > self.U - self.L:
            raise ARVError(f"point width q must be in (0, U - L], got {self.q}")
        if isinstance(self.Lmax, bool) or not isinstance(self.Lmax, int) \
                or not 0 <= self.Lmax <= MAX_LEVEL:
            raise ARVError(f"Lmax must be an integer in 0..{MAX_LEVEL}, got {self.Lmax!r}")

    @property
    def width(self) -> Fraction:
        return self.U - self.L

    def segment_width(self, level: int) -> Fraction:
        return self.width / (1 << level)

    def segments(self, level: int, lo: Fraction, hi: Fraction) -> tuple[int, int]:
        """Inclusive indices of the level-``level`` segments ``[lo, hi)`` overlaps.

        A zero-width ``[v, v]`` gives the segment containing ``v`` (the last
        for ``v = U``). The target must lie inside the domain. Memoised: the
        same publication is tested against many summaries.
        """
        return _segments(self, level, lo, hi)

    def clip(self, lo: Fraction, hi: Fraction) -> Interval:
        """``[lo, hi)`` cut to the domain; entirely outside, the zero-width edge it lies beyond.

        The snap keeps matching complete: a range beyond ``U`` can only be
        contained in ranges that reach ``U`` too, whose vectors set the last
        segment, which is what the snapped point sets (and likewise below ``L``).
        """
        if hi < lo:
            raise ARVError(f"empty range [{lo}, {hi})")
        c_lo, c_hi = max(lo, self.L), min(hi, self.U)
        if c_lo < c_hi or (c_lo == c_hi and lo == hi):
            return c_lo, c_hi
        edge = self.L if hi <= self.L else self.U
        return edge, edge

    def point(self, v: Fraction) -> Interval:
        """A point value as the interval ``[v, v + q)`` (``[U - q, U)`` at the top), clipped."""
        v = exact(v)
        if v + self.q > self.U and self.L <= v <= self.U:
            return self.U - self.q, self.U
        return self.clip(v, v + self.q)


@functools.lru_cache(maxsize=65536)
def _segments(domain: Domain, level: int, lo: Fraction, hi: Fraction) -> tuple[int, int]:
    n = 1 << level
    scale = n / domain.width
    k_lo = min(n - 1, math.floor((lo - domain.L) * scale))
    if hi == lo:
        return k_lo, k_lo
    k_hi = min(n - 1, math.ceil((hi - domain.L) * scale) - 1)
    return k_lo, k_hi


# --------------------------------------------------------------- bit helpers


def _even_mask(n: int) -> int:
    return int("01" * (n // 2), 2) if n >= 2 else 0


@functools.lru_cache(maxsize=64)
def _even_mask_cached(n: int) -> int:
    return _even_mask(n)


def _run_bits(level: int, k_lo: int, k_hi: int) -> int:
    """Bits ``k_lo..k_hi`` (segments, lowest first) set in a vector of level ``level``."""
    n = 1 << level
    return ((1 << (k_hi - k_lo + 1)) - 1) << (n - 1 - k_hi)


@dataclass(frozen=True, slots=True, order=True)
class ARV:
    """A vector of ``2**level`` bits; segment ``k`` is bit ``N - 1 - k`` of ``bits``."""

    level: int
    bits: int

    def __post_init__(self) -> None:
        if isinstance(self.level, bool) or not isinstance(self.level, int) \
                or not 0 <= self.level <= MAX_LEVEL:
            raise ARVError(f"ARV level must be in 0..{MAX_LEVEL}, got {self.level!r}")
        if isinstance(self.bits, bool) or not isinstance(self.bits, int) \
                or not 0 <= self.bits < 1 << (1 << self.level):
            raise ARVError(f"ARV bits do not fit {1 << self.level} segments")

    # ------------------------------------------------------------ forms

    @property
    def size(self) -> int:
        """Number of bits (segments), ``2**level``."""
        return 1 << self.level

    def __str__(self) -> str:
        return format(self.bits, f"0{self.size}b")

    @classmethod
    def parse(cls, text: str) -> ARV:
        """From the paper's left-to-right string (``"0100"``); the length must be 2**l."""
        n = len(text)
        if n == 0 or n & (n - 1) or set(text) - {"0", "1"}:
            raise ARVError(f"not an ARV string: {text!r}")
        return cls(n.bit_length() - 1, int(text, 2))

    @classmethod
    def run(cls, level: int, k_lo: int, k_hi: int) -> ARV:
        """Segments ``k_lo..k_hi`` set at ``level``."""
        n = 1 << level
        if not 0 <= k_lo <= k_hi < n:
            raise ARVError(f"segments {k_lo}..{k_hi} outside 0..{n - 1}")
        return cls(level, _run_bits(level, k_lo, k_hi))

    @property
    def bitmap_bytes(self) -> int:
        return (self.size + 7) // 8

    @property
    def encoded_size(self) -> int:
        """Bytes on the wire: 2 (attribute id) + 1 (level) + the bitmap."""
        return 3 + self.bitmap_bytes

    def to_bytes(self) -> bytes:
        """The bitmap, segment ``k`` in byte ``k // 8`` bit ``7 - k % 8``; pad bits 0."""
        nbytes = self.bitmap_bytes
        return (self.bits << (8 * nbytes - self.size)).to_bytes(nbytes, "big")

    @classmethod
    def from_bytes(cls, level: int, data: bytes) -> ARV:
        """Inverse of ``to_bytes``; raises ``ARVError`` for a wrong length or set pad bits."""
        if isinstance(level, bool) or not isinstance(level, int) or not 0 <= level <= MAX_LEVEL:
            raise ARVError(f"ARV level must be in 0..{MAX_LEVEL}")
        if not isinstance(data, bytes | bytearray):
            raise ARVError("ARV bitmap must be bytes")
        n = 1 << level
        nbytes = (n + 7) // 8
        if len(data) != nbytes:
            raise ARVError(f"ARV of level {level} needs {nbytes} bitmap bytes, got {len(data)}")
        raw = int.from_bytes(data, "big")
        pad = 8 * nbytes - n
        if raw & ((1 << pad) - 1):
            raise ARVError("ARV bitmap has pad bits set")
        return cls(level, raw >> pad)

    def segments(self) -> list[int]:
        """Indices of the set segments, lowest first."""
        text = str(self)
        return [k for k, c in enumerate(text) if c == "1"]

    def cover(self, domain: Domain) -> list[Interval]:
        """The union of the set segments as sorted, disjoint half-open intervals."""
        w = domain.segment_width(self.level)
        runs: list[Interval] = []
        for k in self.segments():
            lo, hi = domain.L + k * w, domain.L + (k + 1) * w
            if runs and runs[-1][1] == lo:
                runs[-1] = (runs[-1][0], hi)
            else:
                runs.append((lo, hi))
        return runs

    # ------------------------------------------------------------ the paper's operations

    def reducible(self) -> bool:
        """True if every aligned pair of bits is equal (the vector halves losslessly)."""
        if self.level == 0:
            return False
        return ((self.bits >> 1) ^ self.bits) & _even_mask_cached(self.size) == 0

    def simplified(self) -> ARV:
        """The canonical form: halve while every aligned pair is equal (``1100 -> 10``)."""
        return _simplify(self)

    def scaled(self, level: int) -> ARV:
        """The same cover at a finer ``level``: each bit repeated in place (``10 -> 1100``)."""
        return _scale(self, level)

    def reduced(self, level: int) -> ARV:
        """OR-reduction to a coarser ``level``: a coarse bit is set if any of its bits is."""
        return _reduce(self, level)

    def merge(self, other: ARV) -> ARV:
        """Cover union: scale both to the finer level, OR, simplify."""
        m = max(self.level, other.level)
        return ARV(m, self.scaled(m).bits | other.scaled(m).bits).simplified()

    def overlaps(self, other: ARV) -> bool:
        """True if the covers intersect (both scaled to the finer level, AND non-zero)."""
        m = max(self.level, other.level)
        return self.scaled(m).bits & other.scaled(m).bits != 0

    def has_segments(self, level: int, k_lo: int, k_hi: int) -> bool:
        """True if every level-``level`` segment ``k_lo..k_hi`` lies inside the cover."""
        if level <= self.level:
            fine = self.level - level
            k_lo, k_hi = k_lo << fine, ((k_hi + 1) << fine) - 1
            mask = _run_bits(self.level, k_lo, k_hi)
            return self.bits & mask == mask
        coarse = level - self.level
        return self.has_segments(self.level, k_lo >> coarse, k_hi >> coarse)


@functools.lru_cache(maxsize=16384)
def _simplify(v: ARV) -> ARV:
    level, bits = v.level, v.bits
    text = format(bits, f"0{1 << level}b")
    while level > 0 and ((bits >> 1) ^ bits) & _even_mask_cached(1 << level) == 0:
        text = text[::2]
        level -= 1
        bits = int(text, 2)
    return v if level == v.level else ARV(level, bits)


@functools.lru_cache(maxsize=16384)
def _scale(v: ARV, level: int) -> ARV:
    if level == v.level:
        return v
    if not v.level < level <= MAX_LEVEL:
        raise ARVError(f"cannot scale level {v.level} to {level}")
    k = 1 << (level - v.level)
    text = str(v).replace("1", "1" * k).replace("0", "0" * k)
    return ARV(level, int(text, 2))


@functools.lru_cache(maxsize=16384)
def _reduce(v: ARV, level: int) -> ARV:
    if level == v.level:
        return v
    if not 0 <= level < v.level:
        raise ARVError(f"cannot reduce level {v.level} to {level}")
    k = 1 << (v.level - level)
    text = str(v)
    out = "".join("1" if "1" in text[i:i + k] else "0" for i in range(0, len(text), k))
    return ARV(level, int(out, 2))


# ------------------------------------------------------------------- build


def fit(domain: Domain, level: int, lo: Fraction, hi: Fraction) -> Fraction:
    """Aggregate fit ``|T| / (overlapped segments x w)`` of ``[lo, hi)`` at ``level``."""
    k_lo, k_hi = domain.segments(level, lo, hi)
    return (hi - lo) / ((k_hi - k_lo + 1) * domain.segment_width(level))


def build(domain: Domain, lo: Fraction, hi: Fraction, alpha: Fraction) -> ARV:
    """The ARV of ``[lo, hi)``: the smallest level with fit >= alpha, capped at ``Lmax``.

    The target must already lie in the domain (``Domain.clip``); ``alpha`` in (0, 1].
    """
    return _build(domain, exact(lo), exact(hi), exact(alpha))


@functools.lru_cache(maxsize=65536)
def _build(domain: Domain, lo: Fraction, hi: Fraction, alpha: Fraction) -> ARV:
    """``build`` on exact arguments, memoised: a subscription's ranges are built again at
    every grid manager it registers with and every refresh that changed it, a
    publication's at every manager that matches it (``Schema.view``), each time with up
    to ``Lmax + 1`` levels of ``Fraction`` arithmetic; the workload draws its endpoints
    from a few hundred integers, so the same ranges come back. An ARV is an immutable
    value, so sharing one result is exact; a refused target raises every time."""
    if not (domain.L <= lo <= hi <= domain.U):
        raise ARVError(f"target [{lo}, {hi}) is not inside [{domain.L}, {domain.U})")
    if not 0 < alpha <= 1:
        raise ARVError(f"alpha must be in (0, 1], got {alpha}")
    target = hi - lo
    level = 0
    for level in range(domain.Lmax + 1):
        k_lo, k_hi = domain.segments(level, lo, hi)
        if target >= alpha * (k_hi - k_lo + 1) * domain.segment_width(level):
            break
    k_lo, k_hi = domain.segments(level, lo, hi)
    return ARV.run(level, k_lo, k_hi).simplified()


def merge_all(vectors: list[ARV]) -> ARV:
    """OR of several ARVs (at the finest of their levels), simplified; needs at least one."""
    if not vectors:
        raise ARVError("merge of no vectors")
    m = max(v.level for v in vectors)
    bits = 0
    for v in vectors:
        bits |= v.scaled(m).bits
    return ARV(m, bits).simplified()


# --------------------------------------------------------------- comparators


class Comparator(enum.StrEnum):
    """How a publication's ARV is tested against a subscription (or summary) ARV.

    - ``paper``: scale both to the finer level, ``P AND NOT S == 0`` (§IV-A3).
      A coarse P scaled up can claim segments the true range never touches:
      false negatives.
    - ``exact``: the segments of the exact publication interval at S's level
      must all be set in S. Needs the exact interval; never a false negative.
    - ``safe``: the paper's test when P is at least as fine as S, else S
      OR-reduced to P's level. Needs only ARVs; never a false negative, more
      false positives for range publications.
    """

    PAPER = "paper"
    EXACT = "exact"
    SAFE = "safe"


def attr_matches(
    p: ARV,
    s: ARV,
    mode: Comparator = Comparator.SAFE,
    *,
    p_exact: Interval | None = None,
    domain: Domain | None = None,
) -> bool:
    """Does the publication value (ARV ``p``) fall inside the subscription cover ``s``?

    ``exact`` needs ``p_exact`` (the clipped interval) and ``domain``; without
    them it falls back to ``safe``.
    """
    if mode is Comparator.EXACT and p_exact is not None and domain is not None:
        k_lo, k_hi = domain.segments(s.level, p_exact[0], p_exact[1])
        return s.has_segments(s.level, k_lo, k_hi)
    if mode is Comparator.PAPER or p.level >= s.level:
        m = max(p.level, s.level)
        return p.scaled(m).bits & ~s.scaled(m).bits == 0
    return p.bits & ~s.reduced(p.level).bits == 0
