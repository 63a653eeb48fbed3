"""Implication between predicates on one attribute: the heart of covering.

``implies(conds, target)`` answers "does every value satisfying all of
``conds`` satisfy ``target``?" It must be *sound* (a protocol that prunes a
covered subscription would otherwise lose events) and is as complete as is
practical. The set of values satisfying a conjunction is described per type
class:

* when an ``==`` or ``in`` is present, a finite candidate set, filtered by
  every other condition with ``Predicate.holds`` (exact);
* bools: the finite set {false, true}, filtered the same way (exact);
* numbers and strings: an interval (the intersection of every bound; a string
  prefix *is* the interval ``[p, successor(p))``, exactly) minus the points
  excluded by ``!=``.

An interval is treated as infinite unless it is a single point, which is true
over the reals and only conservative over floats and strings (it can make us
miss a covering, never claim a false one).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from meshsub.core.predicates import ORDERED, Op, Predicate
from meshsub.core.values import BOOL, NUMBER, STRING, Kind, Value, kind

_MAX_CHAR = "\U0010ffff"


@dataclass(frozen=True, slots=True)
class Interval:
    """Bounds within one type class; ``None`` is unbounded on that side."""

    lo: Any = None
    lo_closed: bool = False
    hi: Any = None
    hi_closed: bool = False

    def intersect(self, other: Interval) -> Interval:
        lo, lo_closed = self.lo, self.lo_closed
        if other.lo is not None and (lo is None or other.lo > lo):
            lo, lo_closed = other.lo, other.lo_closed
        elif other.lo is not None and other.lo == lo:
            lo_closed = lo_closed and other.lo_closed
        hi, hi_closed = self.hi, self.hi_closed
        if other.hi is not None and (hi is None or other.hi < hi):
            hi, hi_closed = other.hi, other.hi_closed
        elif other.hi is not None and other.hi == hi:
            hi_closed = hi_closed and other.hi_closed
        return Interval(lo, lo_closed, hi, hi_closed)

    @property
    def empty(self) -> bool:
        if self.lo is None or self.hi is None:
            return False
        if self.lo == self.hi:
            return not (self.lo_closed and self.hi_closed)
        return bool(self.lo > self.hi)

    @property
    def point(self) -> bool:
        return self.lo is not None and self.lo == self.hi and self.lo_closed and self.hi_closed

    def contains(self, v: Any) -> bool:
        if self.lo is not None and (v < self.lo or (v == self.lo and not self.lo_closed)):
            return False
        return not (self.hi is not None and (v > self.hi or (v == self.hi and not self.hi_closed)))

    def within(self, outer: Interval) -> bool:
        """True if this (non-empty) interval is a subset of ``outer``."""
        if outer.lo is not None:
            if self.lo is None or self.lo < outer.lo:
                return False
            if self.lo == outer.lo and self.lo_closed and not outer.lo_closed:
                return False
        if outer.hi is not None:
            if self.hi is None or self.hi > outer.hi:
                return False
            if self.hi == outer.hi and self.hi_closed and not outer.hi_closed:
                return False
        return True


FULL = Interval()
ALL_STRINGS = Interval("", True)
"""Strings have a least element, the empty string: ``x < ""`` is empty."""


def prefix_successor(prefix: str) -> str | None:
    """The least string above every string starting with ``prefix`` (None: no bound)."""
    stem = prefix.rstrip(_MAX_CHAR)
    if not stem:
        return None
    return stem[:-1] + chr(ord(stem[-1]) + 1)


def interval_of(p: Predicate, k: Kind) -> Interval | None:
    """The values of class ``k`` that an ordered/range/prefix predicate admits (None: none)."""
    if p.op is Op.PREFIX:
        if k != STRING:
            return None
        assert p.prefix is not None
        return Interval(p.prefix, True, prefix_successor(p.prefix), False)
    if p.op is Op.RANGE:
        assert p.lo is not None
        if kind(p.lo) != k:
            return None
        return Interval(p.lo, p.lo_closed, p.hi, p.hi_closed)
    assert p.op in ORDERED and p.value is not None
    if kind(p.value) != k:
        return None
    if p.op is Op.LT:
        return Interval(hi=p.value, hi_closed=False)
    if p.op is Op.LE:
        return Interval(hi=p.value, hi_closed=True)
    if p.op is Op.GT:
        return Interval(lo=p.value, lo_closed=False)
    return Interval(lo=p.value, lo_closed=True)


@dataclass(frozen=True, slots=True)
class _Finite:
    values: tuple[Value, ...]


@dataclass(frozen=True, slots=True)
class _Span:
    kind: Kind
    interval: Interval
    excluded: tuple[Value, ...]


def _parts(conds: Sequence[Predicate]) -> list[_Finite | _Span]:
    """Describe the values satisfying every condition (non-empty ``conds``); [] = none."""
    finite: tuple[Value, ...] | None = None
    for p in conds:
        if p.op is Op.EQ:
            assert p.value is not None
            vals: tuple[Value, ...] = (p.value,)
        elif p.op is Op.IN:
            vals = p.members
        else:
            continue
        if finite is None or len(vals) < len(finite):
            finite = vals
    if finite is not None:
        return _survivors(finite, conds)
    parts: list[_Finite | _Span] = []
    for k in (BOOL, NUMBER, STRING):
        if k == BOOL:
            parts.extend(_survivors((False, True), conds))
            continue
        interval = ALL_STRINGS if k == STRING else FULL
        excluded: list[Value] = []
        for p in conds:
            if p.op is Op.EXISTS:
                continue
            if p.op is Op.NE:
                assert p.value is not None
                if kind(p.value) != k:
                    break
                excluded.append(p.value)
                continue
            bound = interval_of(p, k)
            if bound is None:
                break
            interval = interval.intersect(bound)
        else:
            if interval.empty:
                continue
            if interval.point:
                parts.extend(_survivors((interval.lo,), conds))
            else:
                parts.append(_Span(k, interval, tuple(excluded)))
    return parts


def _survivors(values: Sequence[Value], conds: Sequence[Predicate]) -> list[_Finite | _Span]:
    kept = tuple(v for v in values if all(p.holds(v) for p in conds))
    return [_Finite(kept)] if kept else []


def satisfiable(conds: Sequence[Predicate]) -> bool:
    """False only if provably no value satisfies every condition (empty ``conds``: True)."""
    return not conds or bool(_parts(conds))


def implies(conds: Sequence[Predicate], target: Predicate) -> bool:
    """Sound test: every value (absent included) satisfying all ``conds`` satisfies ``target``."""
    if not conds:
        return False  # the attribute may be absent, and absent satisfies no predicate
    if target.op is Op.EXISTS:
        return True
    for part in _parts(conds):
        if isinstance(part, _Finite):
            if not all(target.holds(v) for v in part.values):
                return False
        elif not _span_implies(part, target):
            return False
    return True


def _span_implies(span: _Span, target: Predicate) -> bool:
    op = target.op
    if op in (Op.EQ, Op.IN):
        return False  # an interval that is not a point is treated as infinite
    if op is Op.NE:
        assert target.value is not None
        v = target.value
        if kind(v) != span.kind:
            return False
        return not span.interval.contains(v) or any(e == v for e in span.excluded)
    bound = interval_of(target, span.kind)
    return bound is not None and span.interval.within(bound)
