"""Attribute predicates: one condition of a subscription's conjunction.

Semantics (comparisons across different types never match):

* a predicate on an absent attribute is false, every operator included;
* numbers (int, float) compare numerically with each other, strings with
  strings (Python ``str`` order, i.e. by code point), bools only with
  ``==``, ``!=`` and ``in``;
* a value of another type never matches, ``!=`` included: ``x != 5`` does
  not match ``x = "a"``;
* ``EXISTS`` matches any present value.

Equality, hashing and order are type-aware (``x == 1`` and ``x == 1.0`` are
different predicates that match the same events), so that equal predicates
always pack to equal wire bytes.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from meshsub.core.values import (
    BOOL,
    MAX_MEMBERS,
    ContentError,
    Value,
    check_name,
    check_string,
    check_value,
    kind,
    lookup_key,
    typed,
)


class Op(enum.Enum):
    """Operators; the value is the compact wire code."""

    EQ = 0
    NE = 1
    LT = 2
    LE = 3
    GT = 4
    GE = 5
    RANGE = 6
    PREFIX = 7
    IN = 8
    EXISTS = 9


COMPARISONS = frozenset({Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE})
ORDERED = frozenset({Op.LT, Op.LE, Op.GT, Op.GE})


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Predicate:
    """One condition on one attribute.

    Operands by operator: ``value`` for the six comparisons; ``lo``, ``hi``,
    ``lo_closed``, ``hi_closed`` for ``RANGE`` (both bounds, one type class);
    ``prefix`` for ``PREFIX``; ``members`` for ``IN`` (any iterable; stored
    deduplicated and sorted by a type-aware key); none for ``EXISTS``.
    Unused operands must be left at their defaults. The classmethods
    (``compare``, ``between``, ``starts_with``, ``one_of``, ``present``) are the
    readable way to build one.
    """

    attr: str
    op: Op
    value: Value | None = None
    lo: Value | None = None
    hi: Value | None = None
    lo_closed: bool = True
    hi_closed: bool = True
    members: tuple[Value, ...] = ()
    prefix: str | None = None
    _canon: tuple[Any, ...] = field(init=False, repr=False, compare=False)
    _member_keys: frozenset[tuple[str, Value]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "attr", check_name(self.attr))
        if not isinstance(self.op, Op):
            raise ContentError(f"predicate on {self.attr!r}: operator must be an Op: {self.op!r}")
        op = self.op
        where = f"predicate {self.attr!r} {op.name}"
        value, lo, hi, members, prefix = self.value, self.lo, self.hi, self.members, self.prefix
        unused: list[str] = []
        if op in COMPARISONS:
            if value is None:
                raise ContentError(f"{where}: needs a value")
            value = check_value(value, f"{where}: value")
            if op in ORDERED and kind(value) == BOOL:
                raise ContentError(f"{where}: booleans support only =, != and in")
            unused = self._unused(lo=lo, hi=hi, members=members, prefix=prefix)
        elif op is Op.RANGE:
            if lo is None or hi is None:
                raise ContentError(f"{where}: needs both bounds")
            lo = check_value(lo, f"{where}: lower bound")
            hi = check_value(hi, f"{where}: upper bound")
            if kind(lo) == BOOL or kind(lo) != kind(hi):
                raise ContentError(
                    f"{where}: bounds must be two numbers or two strings, not {lo!r} and {hi!r}"
                )
            if not (isinstance(self.lo_closed, bool) and isinstance(self.hi_closed, bool)):
                raise ContentError(f"{where}: lo_closed and hi_closed must be booleans")
            if lo > hi or (lo == hi and not (self.lo_closed and self.hi_closed)):  # type: ignore[operator]
                raise ContentError(f"{where}: empty range {lo!r}..{hi!r}")
            unused = self._unused(value=value, members=members, prefix=prefix)
        elif op is Op.PREFIX:
            if prefix is None:
                raise ContentError(f"{where}: needs a prefix")
            prefix = check_string(prefix, f"{where}: prefix")
            unused = self._unused(value=value, lo=lo, hi=hi, members=members)
        elif op is Op.IN:
            members = self._canonical_members(members, where)
            unused = self._unused(value=value, lo=lo, hi=hi, prefix=prefix)
        else:
            unused = self._unused(value=value, lo=lo, hi=hi, members=members, prefix=prefix)
        if op is not Op.RANGE and not (self.lo_closed is True and self.hi_closed is True):
            unused.append("lo_closed/hi_closed")
        if unused:
            raise ContentError(f"{where}: operand(s) {', '.join(unused)} do not apply")
        set_(self, "value", value)
        set_(self, "lo", lo)
        set_(self, "hi", hi)
        set_(self, "members", members)
        set_(self, "prefix", prefix)
        set_(self, "_member_keys", frozenset(lookup_key(m) for m in members))
        set_(
            self,
            "_canon",
            (
                self.attr,
                op.value,
                () if value is None else typed(value),
                () if lo is None else typed(lo),
                () if hi is None else typed(hi),
                self.lo_closed,
                self.hi_closed,
                tuple(typed(m) for m in members),
                () if prefix is None else (prefix,),
            ),
        )

    @staticmethod
    def _unused(**operands: object) -> list[str]:
        return [name for name, v in operands.items() if v is not None and v != ()]

    @staticmethod
    def _canonical_members(members: object, where: str) -> tuple[Value, ...]:
        if isinstance(members, str | bytes) or not isinstance(members, Iterable):
            raise ContentError(f"{where}: members must be a collection of values")
        seen: dict[tuple[str, Value], Value] = {}
        for i, m in enumerate(members):
            if i >= MAX_MEMBERS:
                raise ContentError(f"{where}: more than {MAX_MEMBERS} members")
            v = check_value(m, f"{where}: member")
            seen.setdefault(typed(v), v)
        if not seen:
            raise ContentError(f"{where}: needs at least one member")
        return tuple(seen[k] for k in sorted(seen))

    # ------------------------------------------------------------ constructors

    @classmethod
    def compare(cls, attr: str, op: Op | str, value: Value) -> Predicate:
        """``attr OP value`` for ``==, !=, <, <=, >, >=`` (as Op or symbol)."""
        if isinstance(op, str):
            try:
                op = SYMBOL_OPS[op]
            except KeyError:
                raise ContentError(f"unknown comparison operator {op!r}") from None
        if op not in COMPARISONS:
            raise ContentError(f"{op.name} is not a comparison operator")
        return cls(attr, op, value=value)

    @classmethod
    def between(
        cls, attr: str, lo: Value, hi: Value, lo_closed: bool = True, hi_closed: bool = True
    ) -> Predicate:
        return cls(attr, Op.RANGE, lo=lo, hi=hi, lo_closed=lo_closed, hi_closed=hi_closed)

    @classmethod
    def starts_with(cls, attr: str, prefix: str) -> Predicate:
        return cls(attr, Op.PREFIX, prefix=prefix)

    @classmethod
    def one_of(cls, attr: str, members: Iterable[Value]) -> Predicate:
        return cls(attr, Op.IN, members=tuple(members))

    @classmethod
    def present(cls, attr: str) -> Predicate:
        return cls(attr, Op.EXISTS)

    # --------------------------------------------------------------- identity

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Predicate):
            return NotImplemented
        return self._canon == other._canon

    def __hash__(self) -> int:
        return hash(self._canon)

    def __repr__(self) -> str:
        from meshsub.core.syntax import format_predicate  # syntax imports this module

        return f"Predicate({format_predicate(self)!r})"

    @property
    def sort_key(self) -> tuple[Any, ...]:
        """Canonical order of predicates in a subscription (type-aware, total)."""
        return self._canon

    # --------------------------------------------------------------- matching

    def holds(self, value: Value | None) -> bool:
        """Does the predicate hold for an event whose attribute has ``value`` (None: absent)?"""
        if value is None:
            return False
        op = self.op
        if op is Op.EXISTS:
            return True
        if op is Op.IN:
            return lookup_key(value) in self._member_keys
        if op is Op.PREFIX:
            return isinstance(value, str) and value.startswith(self.prefix)  # type: ignore[arg-type]
        vk = kind(value)
        if op is Op.RANGE:
            lo, hi = self.lo, self.hi
            if vk != kind(lo) or vk == BOOL:  # type: ignore[arg-type]
                return False
            if value < lo or (value == lo and not self.lo_closed):  # type: ignore[operator]
                return False
            return not (value > hi or (value == hi and not self.hi_closed))  # type: ignore[operator]
        operand = self.value
        if vk != kind(operand):  # type: ignore[arg-type]
            return False
        if op is Op.EQ:
            return value == operand
        if op is Op.NE:
            return value != operand
        if vk == BOOL:
            return False
        if op is Op.LT:
            return value < operand  # type: ignore[operator]
        if op is Op.LE:
            return value <= operand  # type: ignore[operator]
        if op is Op.GT:
            return value > operand  # type: ignore[operator]
        return value >= operand  # type: ignore[operator]

    # ------------------------------------------------------------------- wire

    def to_wire(self) -> list[Any]:
        """``[attr, code, operands...]``: compact and canonical."""
        op = self.op
        if op in COMPARISONS:
            return [self.attr, op.value, self.value]
        if op is Op.RANGE:
            flags = (1 if self.lo_closed else 0) | (2 if self.hi_closed else 0)
            return [self.attr, op.value, self.lo, self.hi, flags]
        if op is Op.PREFIX:
            return [self.attr, op.value, self.prefix]
        if op is Op.IN:
            return [self.attr, op.value, list(self.members)]
        return [self.attr, op.value]

    @classmethod
    def from_wire(cls, obj: Any) -> Predicate:
        """Inverse of ``to_wire``; raises ``ContentError`` on anything malformed."""
        if not isinstance(obj, list | tuple) or len(obj) < 2:
            raise ContentError("predicate must be a list [attr, op, operands...]")
        attr, code, *rest = obj
        if type(code) is not int or not 0 <= code <= 9:
            raise ContentError(f"predicate: unknown operator code {code!r}")
        op = Op(code)
        expected = {Op.RANGE: 3, Op.EXISTS: 0}.get(op, 1)
        if len(rest) != expected:
            raise ContentError(f"predicate {op.name}: expected {expected} operand(s)")
        if op in COMPARISONS:
            return cls(attr, op, value=rest[0])
        if op is Op.RANGE:
            flags = rest[2]
            if type(flags) is not int or not 0 <= flags <= 3:
                raise ContentError(f"predicate RANGE: bad bound flags {flags!r}")
            return cls(attr, op, lo=rest[0], hi=rest[1], lo_closed=bool(flags & 1),
                       hi_closed=bool(flags & 2))
        if op is Op.PREFIX:
            if not isinstance(rest[0], str):
                raise ContentError("predicate PREFIX: prefix must be a string")
            return cls(attr, op, prefix=rest[0])
        if op is Op.IN:
            if not isinstance(rest[0], list | tuple):
                raise ContentError("predicate IN: members must be a list")
            return cls(attr, op, members=tuple(rest[0]))
        return cls(attr, op)


SYMBOL_OPS: dict[str, Op] = {
    "=": Op.EQ,
    "==": Op.EQ,
    "!=": Op.NE,
    "<": Op.LT,
    "<=": Op.LE,
    ">": Op.GT,
    ">=": Op.GE,
}
"""Comparison symbols of the text syntax (``=`` and ``==`` are the same)."""
