"""A grid of PUMA/paging base stations with walking clients, over the test harness.

One base station per cell (node id ``1 + gx * rows + gy``), linked to its four
axis neighbours; clients (ids from 1000) are linked to the base station of
the cell they stand in, and nothing else, as in Zheng 2008, §5.2.
"""

from __future__ import annotations

import random
from typing import Any

from harness import Net, Tx

from meshsub.core.grid import Cell
from meshsub.core.params import parse_params
from meshsub.protocols.puma import messages as m
from meshsub.protocols.puma.backbone import Backbone

CLIENT_TYPES = frozenset({m.SUBSCRIBE, m.PUBLISH})
"""Types only a client originates (its routed messages are counted by their first hop)."""


class World:
    def __init__(self, cls: type[Backbone], cols: int = 5, rows: int = 5,
                 clients: tuple[int, ...] = (1000,), delay: float = 0.001,
                 **params: Any) -> None:
        self.cls = cls
        self.cols, self.rows = cols, rows
        common = {"cols": cols, "rows": rows, "beacon_s": 0.0, **params}
        self.net = Net({}, delay=delay)
        for gx in range(cols):
            for gy in range(rows):
                node = self.station(Cell(gx, gy))
                p = parse_params(cls.Params, {**common, "role": "base", "cell_x": gx,
                                              "cell_y": gy})
                self.net.nodes[node] = cls(node, params=p, seed=1)
        client_params = parse_params(cls.Params, {**common, "role": "client"})
        for c in clients:
            self.net.nodes[c] = cls(c, params=client_params, seed=1)
        for gx in range(cols):
            for gy in range(rows):
                here = self.station(Cell(gx, gy))
                if gx + 1 < cols:
                    self.net.link(here, self.station(Cell(gx + 1, gy)))
                if gy + 1 < rows:
                    self.net.link(here, self.station(Cell(gx, gy + 1)))
        self.where: dict[int, Cell | None] = {c: None for c in clients}
        self.settle()

    def station(self, cell: Cell | tuple[int, int]) -> int:
        return 1 + cell[0] * self.rows + cell[1]

    def node(self, node: int) -> Backbone:
        proto = self.net.nodes[node]
        assert isinstance(proto, Backbone)
        return proto

    def settle(self, span: float = 0.05) -> None:
        self.net.run(until=self.net.now + span)

    def place(self, client: int, cell: Cell | tuple[int, int] | None) -> None:
        """Move ``client`` to ``cell`` (None: out of every base station's reach)."""
        old = self.where[client]
        if old is not None:
            self.net.unlink(client, self.station(old))
        self.where[client] = None if cell is None else Cell(cell[0], cell[1])
        if cell is not None:
            self.net.link(client, self.station(cell))
        self.settle()

    def step(self, client: int, rng: random.Random) -> Cell:
        """One unit of the 4-neighbour walk (renormalised at the edges)."""
        here = self.where[client]
        assert here is not None
        options = [Cell(here[0] + dx, here[1] + dy)
                   for dx, dy in ((1, 0), (0, 1), (-1, 0), (0, -1))
                   if 0 <= here[0] + dx < self.cols and 0 <= here[1] + dy < self.rows]
        nxt = rng.choice(options)
        self.place(client, nxt)
        return nxt

    def txs(self, since: float = 0.0, types: frozenset[int] | None = None) -> list[Tx]:
        return [tx for tx in self.net.txs if tx.time >= since
                and tx.message.type >= 16 and tx.message.type != m.BEACON
                and (types is None or tx.message.type in types)]

    def client_txs(self, client: int, since: float = 0.0) -> list[Tx]:
        return [tx for tx in self.txs(since) if tx.src == client]
