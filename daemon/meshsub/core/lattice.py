"""Random walks on a square lattice of cells: where a walker is, and when it first arrives.

PUMA (Zheng 2008, ch. 5) predicts where a mobile client is ``t`` time units
after its last known cell; GIANT (ch. 6) asks how likely a random-walking
ferry is to visit the next broker within ``T`` units. Both assume the same
walk: every unit the walker moves to one of its four axis neighbours with
probability 1/4 (Zheng 2008, §5.2 and §6.2; the thesis's "nearest to the
destination" wording means exactly this, uniform 1/4).

The thesis ignores the edges of the region (§5.3.1, Appendix 6.A). A real
deployment has edges, so ``Lattice`` names the rule the walk follows there:

- ``infinite``: no edges (the thesis's analysis; reproduces its figures);
- ``renormalise``: uniform over the neighbours that exist (a border cell has
  three, a corner two);
- ``reflect``: a step that would leave the region goes the opposite way;
- ``stay``: a step that would leave the region leaves the walker where it is.

The predictor is only as good as its match to the walk it predicts, so a
driver should configure the same rule as its mobility model.

Hit (first-passage) probabilities come two ways and agree (a property test
checks it): the renewal recursion of Theorem 6.1, with the exact infinite-
lattice transition probabilities, and an absorbing-state dynamic programme,
which also works on bounded lattices. Theorem 6.1 as printed has garbled sum
bounds and a recursion that includes its own unknown; the corrected form used
here is ``f_{n0+2k} = q_{n0+2k}(0->x) - sum_{m<k} f_{n0+2m} q_{2(k-m)}(x->x)``
with ``n0 = |i| + |j|``.
"""

from __future__ import annotations

import enum
import math
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from meshsub.core.grid import Cell

_STEPS = ((1, 0), (0, 1), (-1, 0), (0, -1))


class LatticeError(ValueError):
    """A bad lattice, cell or time argument."""


class Boundary(enum.StrEnum):
    """What a walker does at the edge of the region (see the module docstring)."""

    INFINITE = "infinite"
    RENORMALISE = "renormalise"
    REFLECT = "reflect"
    STAY = "stay"


@dataclass(frozen=True, slots=True)
class Lattice:
    """The walker's world: ``cols`` x ``rows`` cells with a boundary rule, or no edges.

    With ``boundary = infinite``, ``cols`` and ``rows`` are ignored (pass 0).
    """

    cols: int = 0
    rows: int = 0
    boundary: Boundary = Boundary.INFINITE

    def __post_init__(self) -> None:
        object.__setattr__(self, "boundary", Boundary(self.boundary))
        if self.boundary is Boundary.INFINITE:
            object.__setattr__(self, "cols", 0)
            object.__setattr__(self, "rows", 0)
            return
        for name in ("cols", "rows"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise LatticeError(f"a bounded lattice needs {name} >= 1, got {value!r}")

    @property
    def bounded(self) -> bool:
        return self.boundary is not Boundary.INFINITE

    def contains(self, cell: Cell | tuple[int, int]) -> bool:
        if not self.bounded:
            return True
        return 0 <= cell[0] < self.cols and 0 <= cell[1] < self.rows

    def check(self, cell: Cell | tuple[int, int]) -> Cell:
        """``cell`` as a ``Cell``; ``LatticeError`` if it is outside the region."""
        if len(cell) != 2 or not all(isinstance(v, int) and not isinstance(v, bool)
                                     for v in cell):
            raise LatticeError(f"a cell is a pair of integers, got {cell!r}")
        if not self.contains(cell):
            raise LatticeError(f"cell {tuple(cell)} is outside the {self.cols}x{self.rows} region")
        return Cell(cell[0], cell[1])

    def moves(self, cell: Cell | tuple[int, int]) -> tuple[tuple[Cell, float], ...]:
        """One step from ``cell``: (next cell, probability) pairs summing to one."""
        x, y = cell
        if self.boundary is Boundary.INFINITE:
            return tuple((Cell(x + dx, y + dy), 0.25) for dx, dy in _STEPS)
        inside = [Cell(x + dx, y + dy) for dx, dy in _STEPS if self.contains((x + dx, y + dy))]
        if self.boundary is Boundary.RENORMALISE:
            if not inside:  # a 1x1 region: nowhere to go
                return ((Cell(x, y), 1.0),)
            share = 1.0 / len(inside)
            return tuple((c, share) for c in inside)
        out: dict[Cell, float] = {}
        for dx, dy in _STEPS:
            nxt = (x + dx, y + dy)
            if not self.contains(nxt):
                mirror = (x - dx, y - dy)
                nxt = mirror if self.boundary is Boundary.REFLECT and self.contains(mirror) \
                    else (x, y)
            key = Cell(nxt[0], nxt[1])
            out[key] = out.get(key, 0.0) + 0.25
        return tuple(out.items())


INFINITE = Lattice()
"""The thesis's edge-free lattice."""


# ------------------------------------------------------------------ closed forms


def walk_probability(di: int, dj: int, t: int) -> float:
    """P(walker is at offset (di, dj) after t steps), infinite lattice, exact.

    Rotating the axes by 45 degrees turns the walk into two independent
    one-dimensional walks, so ``q = C(t, (t+di+dj)/2) * C(t, (t+di-dj)/2) / 4**t``
    when the offset is reachable (``|di|+|dj| <= t``, same parity), else 0.
    Python's integer division of big integers rounds correctly, so the value
    is the float nearest the exact rational even for large ``t``.
    """
    _check_time(t)
    if abs(di) + abs(dj) > t or (t - di - dj) % 2:
        return 0.0
    scale: int = 4**t
    return _walk_count(di, dj, t) / scale


def _walk_count(di: int, dj: int, t: int) -> int:
    """Number of t-step walks from the origin ending at (di, dj) (of 4**t)."""
    a, b = (t + di + dj) // 2, (t + di - dj) // 2
    return math.comb(t, a) * math.comb(t, b)


def _check_time(t: int) -> None:
    if isinstance(t, bool) or not isinstance(t, int) or t < 0:
        raise LatticeError(f"time must be a non-negative integer, got {t!r}")


def support_size(t: int) -> int:
    """Cells the infinite-lattice walk can occupy after ``t`` steps: ``(t+1)**2``."""
    _check_time(t)
    return (t + 1) ** 2


# ------------------------------------------------------------------ distributions


class _Lru(OrderedDict[object, object]):
    """A small LRU map for the caches below (bounded: callers pass many starts)."""

    def __init__(self, capacity: int) -> None:
        super().__init__()
        self.capacity = capacity

    def get_or(self, key: object) -> object | None:
        value = self.get(key)
        if value is not None:
            self.move_to_end(key)
        return value

    def put(self, key: object, value: object) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > self.capacity:
            self.popitem(last=False)


_DIST_CACHE = _Lru(512)


def walk_distribution(start: Cell | tuple[int, int], t: int,
                      lattice: Lattice = INFINITE) -> Mapping[Cell, float]:
    """The distribution ``P^t = P^0 T^t`` of the walker's cell after ``t`` steps.

    Zheng 2008, eqs. 5.1-5.4, computed by iterating one step ``t`` times (the
    matrix power without the matrix). Only cells with positive probability
    are present. The result is cached (per lattice, start and t) and read-only.
    """
    lattice_start = lattice.check(start)
    _check_time(t)
    key = (lattice, lattice_start)
    history = _DIST_CACHE.get_or(key)
    if history is None:
        history = [MappingProxyType({lattice_start: 1.0})]
        _DIST_CACHE.put(key, history)
    assert isinstance(history, list)
    while len(history) <= t:
        history.append(MappingProxyType(_step(history[-1], lattice)))
    result: Mapping[Cell, float] = history[t]
    return result


def _step(dist: Mapping[Cell, float], lattice: Lattice) -> dict[Cell, float]:
    out: dict[Cell, float] = {}
    for cell, p in dist.items():
        for nxt, q in lattice.moves(cell):
            out[nxt] = out.get(nxt, 0.0) + p * q
    return out


# ------------------------------------------------------------------ hitting times


def hit_probability(di: int, dj: int, t_max: int) -> float:
    """P(a walker from the origin visits offset (di, dj) within ``t_max`` steps), infinite lattice.

    Theorem 6.1 (corrected, see the module docstring): the sum of the
    first-passage probabilities ``f_n`` for ``n <= t_max``. ``(0, 0)`` is
    visited at time 0 (probability 1). Tables are cached per ``(|di|, |dj|)``
    (the walk is symmetric under reflections and under swapping the axes) and
    extended on demand, so a broker pays the O(T**2) recursion once per offset.
    """
    _check_time(t_max)
    return _renewal_table(abs(di), abs(dj)).cumulative(t_max)


def first_passage(di: int, dj: int, t: int) -> float:
    """P(the walker's first visit to (di, dj) is at exactly step ``t``), infinite lattice."""
    _check_time(t)
    return _renewal_table(abs(di), abs(dj)).first(t)


class _RenewalTable:
    """First-passage probabilities to one offset, extended on demand.

    The renewal equation ``q_n(0->x) = sum_{s<=n} f_s q_{n-s}(x->x)`` splits every
    walk that is at x at time n by its first visit. Only times ``n0 + 2k``
    contribute (the lattice is bipartite, and no walk arrives before n0).
    """

    def __init__(self, i: int, j: int) -> None:
        a, b = (i, j) if i <= j else (j, i)
        self.i, self.j = a, b
        self.n0 = a + b
        self.f: list[float] = []
        """f[k] = first-passage probability at time n0 + 2k."""
        self.cum: list[float] = []
        """cum[k] = sum of f[0..k]."""

    def _extend(self, k_max: int) -> None:
        if self.n0 == 0:  # the start itself: visited at time 0
            while len(self.f) <= k_max:
                self.f.append(1.0 if not self.f else 0.0)
                self.cum.append(1.0)
            return
        f = self.f
        while len(f) <= k_max:
            k = len(f)
            n = self.n0 + 2 * k
            value = walk_probability(self.i, self.j, n)
            value -= math.fsum(f[m] * _return_probability(k - m) for m in range(k))
            f.append(max(0.0, value))
            self.cum.append(math.fsum((self.cum[-1] if self.cum else 0.0, f[-1])))

    def first(self, t: int) -> float:
        if t < self.n0 or (t - self.n0) % 2:
            return 0.0
        k = (t - self.n0) // 2
        self._extend(k)
        return self.f[k]

    def cumulative(self, t: int) -> float:
        if t < self.n0:
            return 0.0
        k = (t - self.n0) // 2
        self._extend(k)
        return min(1.0, self.cum[k])


_RETURN: list[float] = [1.0]


def _return_probability(m: int) -> float:
    """``q_{2m}(x->x) = C(2m, m)**2 / 4**(2m)``: back at the start after 2m steps."""
    while len(_RETURN) <= m:
        n = len(_RETURN)
        _RETURN.append(math.comb(2 * n, n) ** 2 / 4 ** (2 * n))
    return _RETURN[m]


_RENEWAL_CACHE = _Lru(4096)


def _renewal_table(i: int, j: int) -> _RenewalTable:
    key = (min(i, j), max(i, j))
    table = _RENEWAL_CACHE.get_or(key)
    if table is None:
        table = _RenewalTable(*key)
        _RENEWAL_CACHE.put(key, table)
    assert isinstance(table, _RenewalTable)
    return table


_DP_CACHE = _Lru(256)


def hit_probability_dp(start: Cell | tuple[int, int], target: Cell | tuple[int, int],
                       t_max: int, lattice: Lattice = INFINITE) -> float:
    """P(a walker from ``start`` visits ``target`` within ``t_max`` steps), by dynamic programme.

    Evolve the walk's distribution one step at a time, record the mass that
    arrives at ``target`` and remove it (an absorbing state), so what is
    recorded at step n is exactly the first-passage probability f_n. Works on
    bounded lattices (any boundary rule) and, for a check of Theorem 6.1, on
    the infinite one. Cached per (lattice, start, target) and extended on
    demand; the cost is O(t_max x cells reached).
    """
    begin, goal = lattice.check(start), lattice.check(target)
    _check_time(t_max)
    if begin == goal:
        return 1.0
    key = (lattice, begin, goal)
    state = _DP_CACHE.get_or(key)
    if state is None:
        state = _AbsorbingWalk(lattice, begin, goal)
        _DP_CACHE.put(key, state)
    assert isinstance(state, _AbsorbingWalk)
    return state.cumulative(t_max)


class _AbsorbingWalk:
    def __init__(self, lattice: Lattice, start: Cell, target: Cell) -> None:
        self.lattice = lattice
        self.target = target
        self.dist: dict[Cell, float] = {start: 1.0}
        self.cum: list[float] = [0.0]

    def cumulative(self, t: int) -> float:
        while len(self.cum) <= t:
            nxt = _step(self.dist, self.lattice)
            arrived = nxt.pop(self.target, 0.0)
            self.dist = nxt
            self.cum.append(math.fsum((self.cum[-1], arrived)))
        return min(1.0, self.cum[t])


def ferries_needed(p_hit: float, target: float) -> float:
    """Fewest independent walkers, all starting together, that reach ``target``.

    ``n = ceil(ln(1 - target) / ln(1 - p_hit))``: each walker misses with
    probability ``1 - p_hit``, so ``n`` of them all miss with ``(1 - p_hit)**n``
    (Zheng 2008, §6.5.2, Fig. 6.11's setting). ``inf`` when no number suffices.
    """
    if not (0.0 <= p_hit <= 1.0) or not (0.0 <= target < 1.0):
        raise LatticeError("p_hit must be in [0, 1] and target in [0, 1)")
    if target <= 0.0:
        return 0.0
    if p_hit >= 1.0:
        return 1.0
    if p_hit <= 0.0:
        return math.inf
    n = math.log1p(-target) / math.log1p(-p_hit)
    nearest = round(n)
    if abs(n - nearest) < 1e-9:  # exact powers: do not let rounding add a walker
        n = nearest
    return float(math.ceil(n))
