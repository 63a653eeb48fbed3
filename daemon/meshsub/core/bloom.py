"""A general Bloom filter on mmh3: the set summary several protocols build on.

BRVST, the semantic-cluster protocol and B-SUB's TCBF all summarise sets of
keys in ``m`` bits with ``k`` hashes, but their implementations fix different
hash schemes, so the scheme is a parameter and is carried in the serialised
form (a receiver never compares filters built with different hashes):

- ``MMH3_DOUBLE`` (default): one 128-bit MurmurHash3 (x64, seed 0) split into
  two 64-bit halves ``h1``, ``h2``; position ``i`` is
  ``(h1 + i * (h2 | 1)) mod 2**64 mod m`` (Kirsch-Mitzenmacher double
  hashing: one hash call per key, the FPR of k independent hashes).
- ``MMH3_SEEDS``: ``mmh3.hash(key, seed=i, signed=False) % m`` for
  ``i = 0..k-1`` (the TCBF's, ``meshsub.core.tcbf``).
- ``SHA256_DOUBLE``: double hashing from SHA-256 (for the semantic-cluster
  protocol).

Keys are ``bytes`` or ``str`` (UTF-8, hashed as-is: canonicalisation is the
caller's job). Bit ``p`` lives in byte ``p >> 3`` under mask ``1 << (p & 7)``
(LSB first), which is also the wire layout.
"""

from __future__ import annotations

import enum
import hashlib
import math
import struct
from collections.abc import Iterable

import mmh3

MASK64 = (1 << 64) - 1
MAX_BITS = 1 << 24
"""Largest ``m`` accepted (2 MiB of bits): bounds memory for filters from the network."""
MAX_HASHES = 64
_HEADER = struct.Struct(">BBBI")  # format version, scheme, k, m
FORMAT_VERSION = 1


class BloomError(ValueError):
    """Bad Bloom parameters, incompatible filters, or a malformed serialised filter."""


class HashScheme(enum.IntEnum):
    MMH3_DOUBLE = 1
    MMH3_SEEDS = 2
    SHA256_DOUBLE = 3


def _key_bytes(key: bytes | str) -> bytes:
    if isinstance(key, str):
        return key.encode("utf-8")
    if isinstance(key, bytes | bytearray | memoryview):
        return bytes(key)
    raise BloomError(f"a Bloom key must be bytes or str, not {type(key).__name__}")


def positions(key: bytes | str, m: int, k: int, scheme: HashScheme = HashScheme.MMH3_DOUBLE,
              ) -> list[int]:
    """The ``k`` bit positions of ``key`` (duplicates possible, in hash order)."""
    data = _key_bytes(key)
    if scheme is HashScheme.MMH3_SEEDS:
        return [mmh3.hash(data, seed=i, signed=False) % m for i in range(k)]
    if scheme is HashScheme.MMH3_DOUBLE:
        h1, h2 = mmh3.hash64(data, seed=0, x64arch=True, signed=False)
        h2 |= 1
    elif scheme is HashScheme.SHA256_DOUBLE:
        digest = hashlib.sha256(data).digest()
        h1 = int.from_bytes(digest[0:8], "big")
        h2 = int.from_bytes(digest[8:16], "big") | 1
    else:  # pragma: no cover - exhaustive over the enum
        raise BloomError(f"unknown hash scheme {scheme!r}")
    return [((h1 + i * h2) & MASK64) % m for i in range(k)]


def key_mask(key: bytes | str, m: int, k: int,
             scheme: HashScheme = HashScheme.MMH3_DOUBLE) -> int:
    """The key's positions as an integer mask: bitmap ``b`` may hold it iff ``b & mask == mask``."""
    mask = 0
    for p in positions(key, m, k, scheme):
        mask |= 1 << p
    return mask


def optimal_parameters(n: int, p: float) -> tuple[int, int]:
    """``(m, k)`` for ``n`` keys at false-positive rate ``p``.

    ``m = ceil(-n ln p / (ln 2)^2)``, ``k = round(m/n ln 2)`` (at least 1).
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise BloomError(f"expected item count n >= 1, got {n!r}")
    if not (isinstance(p, float | int) and 0.0 < p < 1.0):
        raise BloomError(f"false-positive rate must be in (0, 1), got {p!r}")
    m = math.ceil(-n * math.log(p) / (math.log(2) ** 2))
    k = max(1, round(m / n * math.log(2)))
    if m > MAX_BITS:
        raise BloomError(f"m = {m} bits exceeds the maximum {MAX_BITS}")
    return m, min(k, MAX_HASHES)


def expected_fpr(m: int, k: int, n: int) -> float:
    """Exact expected FPR after ``n`` insertions: ``(1 - (1 - 1/m)^(kn))^k``."""
    return float((1.0 - (1.0 - 1.0 / m) ** (k * n)) ** k)


def approx_fpr(m: int, k: int, n: int) -> float:
    """The usual approximation ``(1 - e^(-kn/m))^k``."""
    return float((1.0 - math.exp(-k * n / m)) ** k)


def _check_params(m: int, k: int) -> None:
    if isinstance(m, bool) or not isinstance(m, int) or not 1 <= m <= MAX_BITS:
        raise BloomError(f"m must be an integer in 1..{MAX_BITS}, got {m!r}")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_HASHES:
        raise BloomError(f"k must be an integer in 1..{MAX_HASHES}, got {k!r}")


class BloomFilter:
    """An ``m``-bit Bloom filter with ``k`` hashes; see the module docstring for hashing."""

    __slots__ = ("_bits", "k", "m", "scheme")

    def __init__(self, m: int, k: int, scheme: HashScheme = HashScheme.MMH3_DOUBLE) -> None:
        _check_params(m, k)
        try:
            self.scheme = HashScheme(scheme)
        except ValueError:
            raise BloomError(f"unknown hash scheme {scheme!r}") from None
        self.m = m
        self.k = k
        self._bits = bytearray((m + 7) // 8)

    @classmethod
    def for_capacity(cls, n: int, p: float,
                     scheme: HashScheme = HashScheme.MMH3_DOUBLE) -> BloomFilter:
        """An empty filter sized for ``n`` keys at false-positive rate ``p``."""
        m, k = optimal_parameters(n, p)
        return cls(m, k, scheme)

    # ---------------------------------------------------------------- set ops

    def positions(self, key: bytes | str) -> list[int]:
        return positions(key, self.m, self.k, self.scheme)

    def add(self, key: bytes | str) -> None:
        bits = self._bits
        for p in self.positions(key):
            bits[p >> 3] |= 1 << (p & 7)

    def update(self, keys: Iterable[bytes | str]) -> None:
        for key in keys:
            self.add(key)

    def query(self, key: bytes | str) -> bool:
        """True if ``key`` may be in the set; False means it certainly is not."""
        bits = self._bits
        return all(bits[p >> 3] & (1 << (p & 7)) for p in self.positions(key))

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, bytes | str):
            return False
        return self.query(key)

    def test_bit(self, p: int) -> bool:
        if not 0 <= p < self.m:
            raise BloomError(f"bit {p} out of range 0..{self.m - 1}")
        return bool(self._bits[p >> 3] & (1 << (p & 7)))

    def _check_compatible(self, other: BloomFilter) -> None:
        if not isinstance(other, BloomFilter):
            raise BloomError(f"expected a BloomFilter, got {type(other).__name__}")
        if (self.m, self.k, self.scheme) != (other.m, other.k, other.scheme):
            raise BloomError(
                f"incompatible filters: (m={self.m}, k={self.k}, {self.scheme.name}) vs "
                f"(m={other.m}, k={other.k}, {other.scheme.name})")

    def _as_int(self) -> int:
        return int.from_bytes(self._bits, "little")

    def _from_int(self, value: int) -> BloomFilter:
        out = BloomFilter(self.m, self.k, self.scheme)
        out._bits = bytearray(value.to_bytes(len(self._bits), "little"))
        return out

    def to_int(self) -> int:
        """The bitmap as an integer (bit ``p`` is ``1 << p``): fast OR/AND for routing tables."""
        return self._as_int()

    @classmethod
    def from_int(cls, value: int, m: int, k: int,
                 scheme: HashScheme = HashScheme.MMH3_DOUBLE) -> BloomFilter:
        """Inverse of :meth:`to_int`; ``BloomError`` if ``value`` has bits at or beyond ``m``."""
        if isinstance(value, bool) or not isinstance(value, int) or value < 0 \
                or value >> m:
            raise BloomError(f"not a bitmap of {m} bits")
        return cls(m, k, scheme)._from_int(value)

    def union(self, other: BloomFilter) -> BloomFilter:
        """The filter of the union of both key sets (bitwise OR); exact, not an estimate."""
        self._check_compatible(other)
        return self._from_int(self._as_int() | other._as_int())

    def __or__(self, other: BloomFilter) -> BloomFilter:
        return self.union(other)

    def union_update(self, other: BloomFilter) -> None:
        self._check_compatible(other)
        self._bits = bytearray((self._as_int() | other._as_int()).to_bytes(len(self._bits),
                                                                           "little"))

    def __ior__(self, other: BloomFilter) -> BloomFilter:
        self.union_update(other)
        return self

    def and_popcount(self, other: BloomFilter) -> int:
        """Bits set in both filters."""
        self._check_compatible(other)
        return (self._as_int() & other._as_int()).bit_count()

    def intersection_estimate(self, other: BloomFilter) -> float:
        """Estimated size of the intersection of the two key sets.

        Swamidass & Baldi (2007): ``n(A & B) ~= n(A) + n(B) - n(A | B)``,
        each term from :meth:`estimated_count`; clamped at 0. Infinite when
        the union filter is saturated (nothing can be said).
        """
        self._check_compatible(other)
        union_bits = (self._as_int() | other._as_int()).bit_count()
        n_union = self._estimate(union_bits)
        if math.isinf(n_union):
            return math.inf
        return max(0.0, self.estimated_count() + other.estimated_count() - n_union)

    # -------------------------------------------------------------- statistics

    def popcount(self) -> int:
        return self._as_int().bit_count()

    def is_empty(self) -> bool:
        return not any(self._bits)

    def fill_ratio(self) -> float:
        return self.popcount() / self.m

    def _estimate(self, set_bits: int) -> float:
        if set_bits >= self.m:
            return math.inf
        return -(self.m / self.k) * math.log1p(-set_bits / self.m)

    def estimated_count(self) -> float:
        """Estimated number of distinct keys inserted: ``-(m/k) ln(1 - X/m)``."""
        return self._estimate(self.popcount())

    def current_fpr(self) -> float:
        """FPR of this filter as it is now: ``fill_ratio ** k``."""
        return float(self.fill_ratio() ** self.k)

    def expected_fpr(self, n: int) -> float:
        """Expected FPR after ``n`` insertions into a filter of this shape."""
        return expected_fpr(self.m, self.k, n)

    # ----------------------------------------------------------- serialisation

    def to_bytes(self) -> bytes:
        """Header (version, scheme, k, m: 7 bytes) then ``ceil(m/8)`` bitmap bytes."""
        return _HEADER.pack(FORMAT_VERSION, self.scheme, self.k, self.m) + bytes(self._bits)

    @classmethod
    def from_bytes(cls, data: bytes) -> BloomFilter:
        """Inverse of :meth:`to_bytes`; ``BloomError`` on anything malformed."""
        if not isinstance(data, bytes | bytearray | memoryview):
            raise BloomError(f"expected bytes, got {type(data).__name__}")
        data = bytes(data)
        if len(data) < _HEADER.size:
            raise BloomError(f"truncated Bloom filter: {len(data)} bytes")
        version, scheme, k, m = _HEADER.unpack_from(data)
        if version != FORMAT_VERSION:
            raise BloomError(f"unsupported Bloom filter format version {version}")
        if scheme not in HashScheme._value2member_map_:
            raise BloomError(f"unknown hash scheme {scheme}")
        _check_params(m, k)
        body = data[_HEADER.size:]
        if len(body) != (m + 7) // 8:
            raise BloomError(f"bitmap is {len(body)} bytes, expected {(m + 7) // 8} for m={m}")
        spare = (-m) % 8
        if spare and body[-1] >> (8 - spare):
            raise BloomError("padding bits beyond m are set")
        out = cls(m, k, HashScheme(scheme))
        out._bits = bytearray(body)
        return out

    def copy(self) -> BloomFilter:
        out = BloomFilter(self.m, self.k, self.scheme)
        out._bits = bytearray(self._bits)
        return out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BloomFilter):
            return NotImplemented
        return (self.m, self.k, self.scheme, self._bits) == (
            other.m, other.k, other.scheme, other._bits)

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return (f"BloomFilter(m={self.m}, k={self.k}, scheme={self.scheme.name}, "
                f"set_bits={self.popcount()})")
