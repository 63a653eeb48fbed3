"""Generated content: event and subscription templates, how they are read and drawn.

An event template is a topic, attributes each drawn from a distribution, an
optional k-of-n ``pick`` and an optional delivery ``scope``; a subscription
template is a topic filter, predicates each drawn (``exists``, ``eq`` or a
``range``), and an optional ``pick``. Two workload shapes of the protocols to
come are built in:

- **k-of-n sets** (``pick``): k names (k uniform in a range) out of a
  vocabulary of n, each with a drawn value or predicate: TG's tag sets (1 to 4
  of 50 interests, Liu 2011, §4.2) and BRVST's attribute sets (1 to 3 of 15,
  Li and Wang 2014, §V);
- **dependent range pairs** (``range``): ``lo <= hi`` inside a domain, either
  a width drawn uniformly or log-uniformly and then a position where the pair
  fits, or two sorted uniform endpoints (the two readings BRVST's false-positive
  check depends on); DIBS's queries have log-uniform sizes from 1 to the whole
  key space (Pham and Tran 2012, §4). In an event a pair is the two attributes
  ``NAME_lo`` and ``NAME_hi``; in a subscription the predicate ``NAME = [lo, hi]``,
  or (``contains``) the two predicates ``NAME_lo >= lo NAME_hi <= hi``: the event's
  range inside the subscription's, BRVST's matching rule (Li and Wang 2014, §III).

Reading a template checks it completely: every problem is one ``ScenarioError``
naming the key. Drawing with no random stream gives the first value of each
distribution (load-time checks build such a sample).
"""

from __future__ import annotations

import math
import random
from dataclasses import replace
from typing import Any

from meshsim.scenario.model import (
    SCOPE_ATTR,
    AttrDist,
    Lifetime,
    Pick,
    PredDist,
    RangeDist,
    SubTemplate,
    Template,
)
from meshsim.scenario.reader import ScenarioError, Table, check_int, check_number, type_name
from meshsub.core.content import ContentError, Event, Predicate, Subscription, Value
from meshsub.core.syntax import MAX_ALTERNATIVES

ATTR_KINDS = ("uniform_int", "uniform_float", "choice", "const", "random_text", "range")
PRED_KINDS = ("exists", "eq", "range", "contains")
WIDTH_KINDS = ("uniform", "log_uniform")
LIFETIME_KINDS = ("const", "uniform", "exponential")
MAX_NAMES = 1024
TEXT_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789 "

# ----------------------------------------------------------------------- reading


def scalar(value: Any, path: str) -> int | float | str | bool:
    if isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return check_number(value, path)
    raise ScenarioError(path, f"expected a number, string or boolean, got {type_name(value)}")


def attr_dist(spec: Any, path: str) -> AttrDist:
    """``DIST``: a plain value, or a table naming exactly one kind (``ATTR_KINDS``)."""
    if not isinstance(spec, dict):
        return AttrDist("const", (scalar(spec, path),))
    st = Table(spec, path)
    kinds = [k for k in ATTR_KINDS if k in spec]
    if len(kinds) != 1:
        st.raw("decimals", None)
        for k in ATTR_KINDS:
            st.raw(k, None)
        st.done()
        raise ScenarioError(path, f"give exactly one of {', '.join(ATTR_KINDS)}")
    kind = kinds[0]
    decimals = st.opt_integer("decimals", lo=0)
    raw = st.raw(kind)
    st.done()
    where = f"{path}.{kind}"
    if kind == "const":
        return AttrDist(kind, (scalar(raw, where),))
    if kind == "range":
        return AttrDist(kind, (range_dist(raw, where),))
    if not isinstance(raw, list) or not raw:
        raise ScenarioError(where, f"expected a non-empty array, got {type_name(raw)}")
    if kind == "choice":
        return AttrDist(kind, tuple(scalar(v, where) for v in raw))
    if len(raw) != 2:
        raise ScenarioError(where, "expected [low, high]")
    lo: float
    hi: float
    if kind in ("uniform_int", "random_text"):
        lo, hi = check_int(raw[0], where), check_int(raw[1], where)
        if kind == "random_text" and not 0 <= lo <= hi <= 1024:
            raise ScenarioError(where, "text lengths must be within 0..1024")
    else:
        lo, hi = check_number(raw[0], where), check_number(raw[1], where)
    if lo > hi:
        raise ScenarioError(where, "low must not exceed high")
    return AttrDist(kind, (lo, hi), decimals)


def range_dist(spec: Any, path: str) -> RangeDist:
    """``{ low, high, width = { uniform | log_uniform = [a, b] } | w, draw, integer }``."""
    t = Table(spec, path)
    low, high = t.number("low"), t.number("high")
    if low >= high:
        raise t.err("high", f"must be greater than low ({low:g})")
    draw = t.string("draw", "width", choices=("width", "sorted"))
    integer = t.boolean("integer", isinstance(spec.get("low"), int)
                        and isinstance(spec.get("high"), int))
    half_open = t.boolean("half_open", False)
    if half_open and not integer:
        raise t.err("half_open", "only for integer pairs (a..b becomes [a, b + 1))")
    kind, wmin, wmax = "uniform", 0.0, high - low
    if draw == "width":
        raw = t.raw("width", high - low)
        where = f"{path}.width"
        if isinstance(raw, dict):
            wt = Table(raw, where)
            kinds = [k for k in WIDTH_KINDS if k in raw]
            if len(kinds) != 1:
                raise ScenarioError(where, f"give exactly one of {', '.join(WIDTH_KINDS)}")
            kind = kinds[0]
            bounds = wt.raw(kind)
            wt.done()
            if not isinstance(bounds, list) or len(bounds) != 2:
                raise ScenarioError(f"{where}.{kind}", "expected [min, max]")
            wmin = check_number(bounds[0], f"{where}.{kind}", lo=0.0)
            wmax = check_number(bounds[1], f"{where}.{kind}", lo=0.0)
        else:
            wmin = wmax = check_number(raw, where, lo=0.0)
        if wmin > wmax:
            raise ScenarioError(where, "min must not exceed max")
        if wmax > high - low:
            raise ScenarioError(where, f"a width above high - low ({high - low:g}) fits nowhere")
        if kind == "log_uniform" and wmin <= 0:
            raise ScenarioError(where, "log_uniform widths need min > 0")
    elif t.has("width"):
        t.raw("width")
        raise t.err("width", "only with draw = \"width\"")
    t.done()
    return RangeDist(low, high, draw, kind, wmin, wmax, integer, half_open)


def pred_dist(spec: Any, path: str) -> PredDist:
    """``PRED``: ``"exists"``, ``{ eq = DIST }``, ``{ range = RANGE }`` or
    ``{ contains = RANGE }``."""
    if spec == "exists":
        return PredDist("exists")
    if not isinstance(spec, dict) or len(spec) != 1 or next(iter(spec)) not in PRED_KINDS:
        raise ScenarioError(path, f'expected "exists", {{ eq = DIST }}, {{ range = {{ low, '
                                  f'high, ... }} }} or {{ contains = {{ ... }} }}, got '
                                  f'{type_name(spec)}')
    kind, value = next(iter(spec.items()))
    where = f"{path}.{kind}"
    if kind == "eq":
        return PredDist("eq", attr_dist(value, where))
    return PredDist(kind, range_dist(value, where))


def names(spec: Any, path: str) -> tuple[str, ...]:
    """A vocabulary: an array of names, or ``{ prefix, count }`` (prefix0 .. prefix{n-1})."""
    if isinstance(spec, dict):
        t = Table(spec, path)
        prefix = t.string("prefix")
        count = t.integer("count", lo=1, hi=MAX_NAMES)
        t.done()
        out = tuple(f"{prefix}{i}" for i in range(count))
    elif isinstance(spec, list) and spec and all(isinstance(n, str) for n in spec):
        out = tuple(spec)
        if len(set(out)) != len(out):
            raise ScenarioError(path, "a name is listed twice")
    else:
        raise ScenarioError(path, f"expected an array of names or {{ prefix, count }}, got "
                                  f"{type_name(spec)}")
    if len(out) > MAX_NAMES:
        raise ScenarioError(path, f"at most {MAX_NAMES} names")
    return out


def pick(spec: Any, path: str, *, subscription: bool) -> Pick:
    """``{ names, k = N | [min, max], value = DIST }`` (events) or ``predicate = PRED``."""
    t = Table(spec, path)
    vocabulary = names(t.raw("names"), f"{path}.names")
    raw_k = t.raw("k", 1)
    if isinstance(raw_k, list):
        if len(raw_k) != 2:
            raise t.err("k", "expected N or [min, max]")
        k_min, k_max = check_int(raw_k[0], f"{path}.k", lo=1), check_int(raw_k[1], f"{path}.k")
    else:
        k_min = k_max = check_int(raw_k, f"{path}.k", lo=1)
    if k_max < k_min:
        raise t.err("k", "max must not be below min")
    if k_max > len(vocabulary):
        raise t.err("k", f"cannot pick {k_max} of {len(vocabulary)} names")
    if subscription:
        dist: AttrDist | PredDist = pred_dist(t.raw("predicate", "exists"), f"{path}.predicate")
    else:
        dist = attr_dist(t.raw("value", True), f"{path}.value")
    t.done()
    return Pick(vocabulary, k_min, k_max, dist)


def lifetime(spec: Any, path: str) -> Lifetime:
    """``"forever"``, seconds, ``{ uniform = [a, b] }`` or ``{ exponential = mean }``."""
    if spec == "forever":
        return Lifetime()
    if isinstance(spec, int | float) and not isinstance(spec, bool):
        return Lifetime("const", (check_number(spec, path, lo=0.0, lo_open=True),))
    if not isinstance(spec, dict) or len(spec) != 1 or next(iter(spec)) not in LIFETIME_KINDS:
        raise ScenarioError(path, 'expected "forever", seconds, { uniform = [a, b] } or '
                                  '{ exponential = MEAN }')
    kind, raw = next(iter(spec.items()))
    where = f"{path}.{kind}"
    if kind == "uniform":
        if not isinstance(raw, list) or len(raw) != 2:
            raise ScenarioError(where, "expected [min, max]")
        a = check_number(raw[0], where, lo=0.0, lo_open=True)
        b = check_number(raw[1], where, lo=a)
        return Lifetime(kind, (a, b))
    return Lifetime(kind, (check_number(raw, where, lo=0.0, lo_open=True),))


def event_template(t: Table, scopes: frozenset[str]) -> Template:
    """``{ topic, weight, attrs = { NAME = DIST }, pick, scope }``; checked by a sample."""
    topic = t.string("topic")
    weight = t.number("weight", 1.0, lo=0.0, lo_open=True)
    at = t.table("attrs")
    attrs = tuple((name, attr_dist(at.raw(name), f"{at.path}.{name}")) for name in sorted(at.data))
    at.done()
    chosen = pick(t.raw("pick"), f"{t.path}.pick", subscription=False) if t.has("pick") else None
    scope = t.opt_string("scope")
    if scope is not None and not (scope in scopes or scope == "@origin"
                                  or scope.startswith("@origin:")):
        raise t.err("scope", f"{scope!r} is neither a node group ({', '.join(sorted(scopes))}) "
                             "nor @origin[:PREFIX]")
    t.done()
    template = Template(topic, weight, attrs, chosen, scope)
    try:
        sample_event(template, None)
    except ContentError as exc:
        raise t.err("topic", str(exc)) from None
    return template


def sub_template(t: Table) -> SubTemplate:
    """``{ topic, weight, predicates = { NAME = PRED }, pick, mode }``; checked by a sample.

    ``mode = "or"`` makes the picked names alternatives (a disjunction, Liu 2011,
    §3.6), ``"and"`` (the default) a conjunction."""
    topic = t.string("topic")
    weight = t.number("weight", 1.0, lo=0.0, lo_open=True)
    pt = t.table("predicates")
    preds = tuple((name, pred_dist(pt.raw(name), f"{pt.path}.{name}")) for name in sorted(pt.data))
    pt.done()
    chosen = pick(t.raw("pick"), f"{t.path}.pick", subscription=True) if t.has("pick") else None
    any_of = t.string("mode", "and", choices=("and", "or")) == "or"
    if any_of and chosen is None:
        raise t.err("mode", '"or" needs a pick (its names are the alternatives)')
    if any_of and chosen is not None and chosen.k_max > MAX_ALTERNATIVES:
        raise t.err("mode", f"an OR of more than {MAX_ALTERNATIVES} names")
    t.done()
    template = SubTemplate(topic, weight, preds, chosen, any_of)
    try:
        sample_subscription(template, None)
    except ContentError as exc:
        raise t.err("topic", str(exc)) from None
    return template


# ----------------------------------------------------------------------- drawing


def draw_range(d: RangeDist, rng: random.Random | None) -> tuple[float, float]:
    """One dependent pair ``(lo, hi)``, ``low <= lo <= hi <= high`` (``hi <= high + 1``
    and ``lo < hi`` when ``half_open``)."""
    if d.half_open:
        lo_n, hi_n = draw_range(replace(d, half_open=False), rng)
        return lo_n, hi_n + 1.0
    if rng is None:
        return (_num(d, d.low), _num(d, d.low + (d.width_min if d.draw == "width" else 0.0)))
    if d.draw == "sorted":
        a, b = sorted((rng.uniform(d.low, d.high), rng.uniform(d.low, d.high)))
        return _num(d, a), _num(d, b)
    if d.width_kind == "log_uniform":
        width = math.exp(rng.uniform(math.log(d.width_min), math.log(d.width_max)))
    else:
        width = rng.uniform(d.width_min, d.width_max)
    lo = rng.uniform(d.low, d.high - width)
    lo_n = _num(d, lo)
    return lo_n, _num(d, min(d.high, lo_n + width))


def _num(d: RangeDist, value: float) -> float:
    return float(round(value)) if d.integer else value


def _typed(d: RangeDist, value: float) -> Value:
    return int(value) if d.integer else value


def draw_value(dist: AttrDist, rng: random.Random | None) -> Value:
    if dist.kind == "const":
        return dist.args[0]  # type: ignore[no-any-return]
    if dist.kind == "choice":
        return dist.args[0] if rng is None else rng.choice(dist.args)  # type: ignore[no-any-return]
    lo, hi = dist.args
    if dist.kind == "random_text":
        size = lo if rng is None else rng.randint(lo, hi)
        return "x" * size if rng is None else "".join(rng.choices(TEXT_ALPHABET, k=size))
    if dist.kind == "uniform_int":
        return int(lo if rng is None else rng.randint(lo, hi))
    value = float(lo if rng is None else rng.uniform(lo, hi))
    return round(value, dist.decimals) if dist.decimals is not None else value


def _attrs(name: str, dist: AttrDist, rng: random.Random | None) -> list[tuple[str, Value]]:
    if dist.kind == "range":
        d: RangeDist = dist.args[0]
        lo, hi = draw_range(d, rng)
        return [(f"{name}_lo", _typed(d, lo)), (f"{name}_hi", _typed(d, hi))]
    return [(name, draw_value(dist, rng))]


def _chosen(p: Pick, rng: random.Random | None) -> list[str]:
    if rng is None:
        return list(p.names[:p.k_min])
    k = rng.randint(p.k_min, p.k_max)
    return sorted(rng.sample(p.names, k))


def sample_event(template: Template, rng: random.Random | None) -> Event:
    """One event from ``template``; with no rng, the first value of each distribution."""
    attrs: list[tuple[str, Value]] = []
    for name, dist in template.attrs:
        attrs.extend(_attrs(name, dist, rng))
    if template.pick is not None:
        assert isinstance(template.pick.dist, AttrDist)
        for name in _chosen(template.pick, rng):
            attrs.extend(_attrs(name, template.pick.dist, rng))
    if template.scope is not None:
        attrs.append((SCOPE_ATTR, template.scope))
    merged = dict(attrs)  # a picked name may repeat a fixed one: the later wins
    return Event(template.topic, merged)


def _predicates(name: str, dist: PredDist, rng: random.Random | None) -> list[Predicate]:
    if dist.kind == "exists":
        return [Predicate.present(name)]
    if dist.kind == "eq":
        assert isinstance(dist.value, AttrDist)
        return [Predicate.compare(name, "=", draw_value(dist.value, rng))]
    assert isinstance(dist.value, RangeDist)
    lo, hi = draw_range(dist.value, rng)
    lo_v, hi_v = _typed(dist.value, lo), _typed(dist.value, hi)
    if dist.kind == "contains":
        return [Predicate.compare(f"{name}_lo", ">=", lo_v),
                Predicate.compare(f"{name}_hi", "<=", hi_v)]
    return [Predicate.between(name, lo_v, hi_v)]


def sample_subscription(template: SubTemplate, rng: random.Random | None) -> Subscription:
    """One draw of a conjunctive template (the first alternative of an OR one)."""
    return sample_alternatives(template, rng)[0]


def sample_alternatives(template: SubTemplate, rng: random.Random | None
                        ) -> tuple[Subscription, ...]:
    """One draw: a conjunction (one alternative), or with ``any_of`` one alternative per
    picked name, each also carrying the template's own predicates."""
    preds = [p for name, dist in template.preds for p in _predicates(name, dist, rng)]
    if template.pick is None:
        return (Subscription(template.topic, tuple(preds)),)
    dist = template.pick.dist
    assert isinstance(dist, PredDist)
    picked = [_predicates(name, dist, rng) for name in _chosen(template.pick, rng)]
    if template.any_of:
        return tuple(Subscription(template.topic, (*preds, *alt)) for alt in picked)
    return (Subscription(template.topic, (*preds, *(p for alt in picked for p in alt))),)


def draw_lifetime(life: Lifetime, rng: random.Random) -> float | None:
    """Seconds the subscription lasts, or None (``forever``)."""
    if life.kind == "forever":
        return None
    if life.kind == "const":
        return life.args[0]
    if life.kind == "uniform":
        return rng.uniform(*life.args)
    return rng.expovariate(1.0 / life.args[0])
