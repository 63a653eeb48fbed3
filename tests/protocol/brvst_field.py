"""A field of BRVST nodes on the in-test harness: positions, unit-disk links, moves, crashes.

Nodes sit on a square lattice (55 m apart, so the eight nearest are within the
80 m radio range and a 250 m grid is several hops across). ``move`` feeds the
node its new position and re-links it; ``crash`` cuts every link of a node so
that it is silent from then on, as a crashed device is.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from harness import Net

from meshsub.core.api import (
    NeighborChanged,
    NeighborDown,
    NeighborInfo,
    NeighborUp,
    Position,
    PositionChanged,
)
from meshsub.core.params import parse_params
from meshsub.protocols.brvst import Brvst, BrvstParams
from meshsub.protocols.brvst import messages as m

R = 80.0
SPACING = 55.0


class Field:
    def __init__(self, width: float, height: float, *, spacing: float = SPACING,
                 **params: Any) -> None:
        self.params = parse_params(BrvstParams, {"area_width_m": width, "area_height_m": height,
                                                 "R": R, **params})
        self.pos: dict[int, tuple[float, float]] = {}
        nid = 1
        y = spacing / 2
        while y < height:
            x = spacing / 2
            while x < width:
                self.pos[nid] = (x, y)
                nid += 1
                x += spacing
            y += spacing
        self.net = Net.of(Brvst, list(self.pos), params=self.params, delay=0.002)
        self.crashed: set[int] = set()
        for n, (x, y) in self.pos.items():
            self.net.feed(n, PositionChanged(0.0, Position(x, y)))
        for a in self.pos:
            for b in self.pos:
                if a < b and math.dist(self.pos[a], self.pos[b]) <= R:
                    self._link(a, b)

    # ------------------------------------------------------------ topology

    def node(self, n: int) -> Brvst:
        proto = self.net.nodes[n]
        assert isinstance(proto, Brvst)
        return proto

    def nearest(self, x: float, y: float, exclude: set[int] | None = None) -> int:
        skip = (exclude or set()) | self.crashed
        return min((n for n in self.pos if n not in skip),
                   key=lambda n: (math.dist(self.pos[n], (x, y)), n))

    def _info(self, n: int) -> NeighborInfo:
        return NeighborInfo(n, Position(*self.pos[n]))

    def _link(self, a: int, b: int) -> None:
        net = self.net
        net.adjacency.setdefault(a, set()).add(b)
        net.adjacency.setdefault(b, set()).add(a)
        net.feed(a, NeighborUp(net.now, self._info(b)))
        net.feed(b, NeighborUp(net.now, self._info(a)))

    def _unlink(self, a: int, b: int) -> None:
        net = self.net
        net.adjacency[a].discard(b)
        net.adjacency[b].discard(a)
        net.feed(a, NeighborDown(net.now, b))
        net.feed(b, NeighborDown(net.now, a))

    def move(self, n: int, x: float, y: float) -> None:
        """``n`` is now at (x, y): its position input, and links re-drawn by the radio range."""
        net = self.net
        self.pos[n] = (x, y)
        net.feed(n, PositionChanged(net.now, Position(x, y)))
        for other in list(self.pos):
            if other == n or other in self.crashed:
                continue
            near = math.dist(self.pos[n], self.pos[other]) <= R
            linked = net.linked(n, other)
            if near and not linked:
                self._link(n, other)
            elif not near and linked:
                self._unlink(n, other)
            elif near:
                net.feed(other, NeighborChanged(net.now, self._info(n)))

    def walk(self, n: int, x: float, y: float, speed: float = 5.0, dt: float = 0.5) -> None:
        """Move ``n`` in a straight line at ``speed`` m/s, one step every ``dt`` seconds."""
        x0, y0 = self.pos[n]
        steps = max(1, math.ceil(math.dist((x0, y0), (x, y)) / (speed * dt)))
        for i in range(1, steps + 1):
            self.run(self.net.now + dt)
            self.move(n, x0 + (x - x0) * i / steps, y0 + (y - y0) * i / steps)

    def crash(self, n: int) -> None:
        """``n`` stops: every link goes (its neighbours notice, as beacon loss would tell)."""
        for other in list(self.net.adjacency.get(n, ())):
            self._unlink(n, other)
        self.crashed.add(n)

    # ------------------------------------------------------------ views

    def run(self, until: float) -> None:
        self.net.run(until=until)

    def managers(self, level: str) -> dict[tuple[int, int], list[int]]:
        """Area -> the live nodes that currently hold the role ("gm" or "zm")."""
        out: dict[tuple[int, int], list[int]] = {}
        for n in self.pos:
            if n in self.crashed:
                continue
            proto = self.node(n)
            if level == "gm" and proto.gm is not None:
                out.setdefault(tuple(proto.gm.cell), []).append(n)  # type: ignore[arg-type]
            if level == "zm" and proto.zm is not None:
                out.setdefault(tuple(proto.zm.zone), []).append(n)  # type: ignore[arg-type]
        return out

    def txs_of(self, mtype: int, since: float = 0.0) -> int:
        return sum(1 for tx in self.net.txs if tx.message.type == mtype and tx.time >= since)

    def drops(self) -> Counter[str]:
        return Counter(str(e.attrs.get("reason")) for _t, _n, e in self.net.emitted
                       if e.event == "drop")


__all__ = ["Field", "R", "m"]
