"""Where BRVST's attribute ranges live in meshsub's content model, without a new value type.

The paper's content is a set of numeric attributes whose values are points or
ranges inside system-wide domains (§III). In meshsub an event is a topic plus
typed attributes and a subscription a conjunction of predicates, so:

- a publication value of schema attribute ``x`` is the half-open range
  ``[x_lo, x_hi)``, carried as two number attributes ``x_lo`` and ``x_hi``
  (``x_lo < x_hi``); a point ``v`` is ``x_lo = v, x_hi = v + q``;
- a subscription's range ``[a, b)`` on ``x`` is containment as two predicates,
  ``x_lo >= a`` and ``x_hi <= b``.

The exact matcher, the covering test and the evaluation's ground truth then
see BRVST's semantic rule (the publication range inside the subscription's)
with no special case. ARVs are a summary only: each subscription's ARVs must
cover every publication range its predicates accept, so bounds come from the
predicates that imply containment (lower bounds on ``x_lo``, upper bounds on
``x_hi``); any other predicate widens to the domain edge. The grid manager
always checks the subscription itself before delivering (``gm_check =
"exact"``), so a wider summary costs traffic, never a wrong delivery.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

from meshsub.core.arv import (
    ARV,
    ARVError,
    Comparator,
    Domain,
    Interval,
    attr_matches,
    build,
    decimal,
)
from meshsub.core.content import Subscription
from meshsub.core.predicates import Op, Predicate
from meshsub.core.values import ContentError, Value, check_name

if TYPE_CHECKING:
    from meshsub.protocols.brvst.params import BrvstParams

LO_SUFFIX = "_lo"
HI_SUFFIX = "_hi"
MAX_ATTRIBUTES = 1024


class SchemaError(ValueError):
    """A bad schema entry, or content that BRVST cannot summarise; ``reason`` names the drop."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class PubView:
    """A publication as the managers see it: exact ranges and P-ARVs per schema attribute."""

    ranges: Mapping[int, Interval]
    arvs: Mapping[int, ARV]

    def advert_key(self) -> bytes:
        """Canonical bytes of the P-ARVs (the advertisement table's key, with the publisher)."""
        return b"".join(a.to_bytes(2, "big") + bytes([v.level]) + v.to_bytes()
                        for a, v in sorted(self.arvs.items()))


@dataclass(frozen=True, slots=True)
class AttrSpec:
    attr_id: int
    name: str
    domain: Domain


def auto_lmax(domain_width: Fraction, q: Fraction) -> int:
    """``min(12, ceil(log2(W / q)) + 2)``: points get close to width q before the cap."""
    ratio = domain_width / q
    level = 0
    while (1 << level) < ratio:
        level += 1
    return min(12, level + 2)


def _bound(value: object) -> Fraction | None:
    """A predicate operand as an exact bound, or None if it is not a number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return Fraction(value)


def _lower(p: Predicate) -> Fraction | None:
    """The lower bound ``p`` puts on ``x_lo`` (>=, >, =, a range, a set of numbers)."""
    return _side(p, (Op.GE, Op.GT, Op.EQ), p.lo, min)


def _upper(p: Predicate) -> Fraction | None:
    """The upper bound ``p`` puts on ``x_hi`` (<=, <, =, a range, a set of numbers)."""
    return _side(p, (Op.LE, Op.LT, Op.EQ), p.hi, max)


def _side(p: Predicate, ops: tuple[Op, ...], range_end: object,
          pick: Callable[[list[Fraction]], Fraction]) -> Fraction | None:
    """One side's bound: the operand of a comparison in ``ops``, the range's end, or the
    extreme (``pick``) of a set whose members are all numbers."""
    if p.op in ops:
        return _bound(p.value)
    if p.op is Op.RANGE:
        return _bound(range_end)
    if p.op is Op.IN:
        nums = [b for b in (_bound(m) for m in p.members) if b is not None]
        return pick(nums) if len(nums) == len(p.members) else None
    return None


class Schema:
    """The configured attributes, their domains, alpha, and the content <-> range mapping."""

    def __init__(self, specs: list[AttrSpec], alpha: Fraction) -> None:
        if not specs:
            raise SchemaError("schema", "the schema needs at least one attribute")
        if not 0 < alpha <= 1:
            raise SchemaError("schema", f"alpha must be in (0, 1], got {alpha}")
        self.specs = specs
        self.alpha = alpha
        self.by_id = {s.attr_id: s for s in specs}
        self._lo = {s.name + LO_SUFFIX: s for s in specs}
        self._hi = {s.name + HI_SUFFIX: s for s in specs}

    @classmethod
    def from_params(cls, params: BrvstParams) -> Schema:
        """From ``BrvstParams`` (attributes, L, U, q, Lmax, alpha); ``SchemaError`` if bad."""
        names: tuple[str, ...] = params.attributes
        if len(names) > MAX_ATTRIBUTES:
            raise SchemaError("schema", f"more than {MAX_ATTRIBUTES} attributes")
        try:
            defaults = (decimal(params.L), decimal(params.U),
                        decimal(params.q))
            alpha = decimal(params.alpha)
        except ARVError as exc:
            raise SchemaError("schema", str(exc)) from None
        lmax_default: int = params.Lmax
        specs: list[AttrSpec] = []
        seen: set[str] = set()
        for attr_id, text in enumerate(names):
            spec = cls._parse_entry(attr_id, text, defaults, lmax_default)
            if spec.name in seen:
                raise SchemaError("schema", f"attribute {spec.name!r} given twice")
            seen.add(spec.name)
            specs.append(spec)
        return cls(specs, alpha)

    @staticmethod
    def _parse_entry(attr_id: int, text: str, defaults: tuple[Fraction, Fraction, Fraction],
                     lmax_default: int) -> AttrSpec:
        parts = text.split(":") if isinstance(text, str) else []
        if not 1 <= len(parts) <= 5:
            raise SchemaError("schema", f"bad attribute entry {text!r}: use name[:L:U[:q[:Lmax]]]")
        name = parts[0]
        try:
            check_name(name + LO_SUFFIX)
        except ContentError as exc:
            raise SchemaError("schema", f"bad attribute name {name!r}: {exc}") from None
        lo, hi, q = defaults
        try:
            if len(parts) == 2:
                raise SchemaError("schema", f"attribute {name!r}: give both L and U")
            if len(parts) >= 3:
                lo, hi = Fraction(parts[1]), Fraction(parts[2])
            if len(parts) >= 4:
                q = Fraction(parts[3])
            lmax = int(parts[4]) if len(parts) == 5 else lmax_default
            if lmax == 0:
                if not hi > lo or not q > 0:
                    raise SchemaError("schema", f"attribute {name!r}: need U > L and q > 0")
                lmax = auto_lmax(hi - lo, q)
            domain = Domain(lo, hi, q, lmax)
        except (ValueError, ZeroDivisionError) as exc:
            if isinstance(exc, SchemaError):
                raise
            raise SchemaError("schema", f"attribute {name!r}: {exc}") from None
        return AttrSpec(attr_id, name, domain)

    # ------------------------------------------------------------------ mapping

    def subscription_ranges(self, sub: Subscription) -> dict[int, Interval]:
        """The range per schema attribute ``sub`` constrains (a superset of what it accepts).

        ``SchemaError`` with reason ``no_attribute`` if it names no schema
        attribute (BRVST does not support "match everything"), ``empty_range``
        if its bounds leave no publication range (``x_lo >= 60 x_hi <= 40``).
        """
        lows: dict[int, Fraction] = {}
        highs: dict[int, Fraction] = {}
        named: set[int] = set()
        for p in sub.predicates:
            spec = self._lo.get(p.attr)
            if spec is not None:
                named.add(spec.attr_id)
                b = _lower(p)
                if b is not None:
                    lows[spec.attr_id] = max(b, lows.get(spec.attr_id, b))
                continue
            spec = self._hi.get(p.attr)
            if spec is not None:
                named.add(spec.attr_id)
                b = _upper(p)
                if b is not None:
                    highs[spec.attr_id] = min(b, highs.get(spec.attr_id, b))
        if not named:
            raise SchemaError("no_attribute", "the subscription names no schema attribute")
        out: dict[int, Interval] = {}
        for attr_id in sorted(named):
            dom = self.by_id[attr_id].domain
            lo, hi = lows.get(attr_id), highs.get(attr_id)
            if lo is not None and hi is not None and lo >= hi:
                raise SchemaError("empty_range",
                                  f"attribute {self.by_id[attr_id].name!r}: no range in "
                                  f"[{lo}, {hi})")
            # A missing side reaches the domain edge, or beyond it with the other side
            # (x_lo >= U accepts only ranges at or above U: the zero-width top edge).
            if lo is None:
                lo = dom.L if hi is None else min(dom.L, hi)
            if hi is None:
                hi = max(dom.U, lo)
            out[attr_id] = dom.clip(lo, hi)
        return out

    def publication_ranges(self, attrs: Mapping[str, Value]) -> dict[int, Interval]:
        """The range of every schema attribute an event carries (``x_lo`` and/or ``x_hi``).

        A missing or non-numeric side reaches the domain edge (a subscription
        on ``x_lo`` alone must still see the attribute). ``SchemaError`` with
        reason ``bad_range`` if both sides are numbers and ``x_lo >= x_hi``.
        """
        out: dict[int, Interval] = {}
        for spec in self.specs:
            lo_name, hi_name = spec.name + LO_SUFFIX, spec.name + HI_SUFFIX
            if lo_name not in attrs and hi_name not in attrs:
                continue
            lo, hi = _bound(attrs.get(lo_name)), _bound(attrs.get(hi_name))
            if lo is not None and hi is not None and lo >= hi:
                raise SchemaError("bad_range", f"attribute {spec.name!r}: {lo_name} must be "
                                  f"below {hi_name}")
            dom = spec.domain
            if lo is None:
                lo = dom.L if hi is None else min(dom.L, hi)
            if hi is None:
                hi = max(dom.U, lo)
            out[spec.attr_id] = dom.clip(lo, hi)
        return out

    def arvs(self, ranges: Mapping[int, Interval]) -> dict[int, ARV]:
        """The ARV of each range at this schema's alpha."""
        return {a: build(self.by_id[a].domain, lo, hi, self.alpha)
                for a, (lo, hi) in sorted(ranges.items())}

    def view(self, attrs: Mapping[str, Value]) -> PubView:
        """A publication's ranges and P-ARVs, built once per manager that matches it."""
        ranges = self.publication_ranges(attrs)
        return PubView(ranges, self.arvs(ranges))

    def raw_attrs(self, attrs: Mapping[str, Value]) -> tuple[tuple[str, Value], ...]:
        """The event attributes the schema reads (what an advertisement carries)."""
        return tuple((name, value) for name, value in sorted(attrs.items())
                     if name in self._lo or name in self._hi)

    def matches(self, pub: PubView, summary: Mapping[int, ARV], mode: Comparator) -> bool:
        """MATCH(p, F): every attribute of ``summary`` is in ``pub`` and passes ``mode``."""
        for attr, s in summary.items():
            p = pub.arvs.get(attr)
            if p is None:
                return False
            if not attr_matches(p, s, mode, p_exact=pub.ranges[attr],
                                domain=self.by_id[attr].domain):
                return False
        return True

    # ------------------------------------------------------------------ helpers

    def point_attrs(self, name: str, value: int | float) -> dict[str, int | float]:
        """Event attributes for a point value: ``x_lo = v`` and ``x_hi = v + q``."""
        spec = next((s for s in self.specs if s.name == name), None)
        if spec is None:
            raise SchemaError("schema", f"unknown attribute {name!r}")
        q = spec.domain.q
        hi: int | float = value + int(q) if isinstance(value, int) and q.denominator == 1 \
            else float(Fraction(value) + q)
        return {name + LO_SUFFIX: value, name + HI_SUFFIX: hi}

    def range_attrs(self, name: str, lo: int | float, hi: int | float) -> dict[str, int | float]:
        """Event attributes for the publication range ``[lo, hi)``."""
        return {name + LO_SUFFIX: lo, name + HI_SUFFIX: hi}

    def containment(self, name: str, lo: int | float, hi: int | float) -> tuple[Predicate, ...]:
        """The subscription predicates for "the range lies inside ``[lo, hi)``"."""
        return (Predicate.compare(name + LO_SUFFIX, Op.GE, lo),
                Predicate.compare(name + HI_SUFFIX, Op.LE, hi))

    def config_digest(self) -> bytes:
        """SHA-256 of the canonical schema and alpha (part of the configuration hash)."""
        text = ";".join(f"{s.attr_id}:{s.name}:{s.domain.L}:{s.domain.U}:{s.domain.q}:"
                        f"{s.domain.Lmax}" for s in self.specs)
        return hashlib.sha256(f"{text}|{self.alpha}".encode()).digest()
