"""Paging: PUMA's baseline from cellular mobility management (Zheng 2008, §5.4.1, [PIT97]).

Same backbone, same previous broker (``Backbone``); the last mile differs:

- the client reports its cell to its previous broker whenever it is ``dist``
  or more cells (``dist_rule = beyond``: more than ``dist``) from the cell of
  its last report; the report goes to the base station of its cell and is
  relayed cell by cell to the previous broker (one client message plus the
  relay hops);
- on an event the previous broker sends it to the base station of the
  last-reported cell, which floods it over the *paging area*, every cell
  that can hold the client since its last report (within ``dist - 1`` cells,
  or ``dist`` with ``beyond``), along a tree: one message per cell other than
  the centre, plus one to the client;
- the client never replies, so there is no second round and no fallback.

The thesis does not say how its paging counted messages; the rules above
are the literal reading, and docs/protocols/paging.md records why the
thesis's paging costs cannot be reproduced from them.
"""

from __future__ import annotations

from typing import Any, ClassVar

from meshsub.core.api import Message, MessageId, NodeId
from meshsub.core.content import Event
from meshsub.core.grid import Cell, manhattan
from meshsub.core.params import ProtocolParams
from meshsub.protocols.puma import messages as m
from meshsub.protocols.puma.backbone import Backbone, Track
from meshsub.protocols.puma.params import PagingParams, Role
from meshsub.protocols.puma.predict import diamond_tree


class Paging(Backbone):
    """The paging baseline: location reports every ``dist`` cells, flooded paging areas."""

    name: ClassVar[str] = "paging"
    protocol_id: ClassVar[int] = 8
    Params: ClassVar[type[ProtocolParams]] = PagingParams
    params: PagingParams

    def __init__(self, node: NodeId, **kwargs: Any) -> None:
        super().__init__(node, **kwargs)
        self._last_report: dict[NodeId, Cell] = {}
        """Client: the cell last reported to each previous broker."""
        self.stats: dict[str, int] = {"reports": 0, "pages": 0, "local": 0}

    def status(self) -> dict[str, Any]:
        return {**super().status(), "stats": dict(self.stats)}

    def _extra_handlers(self) -> dict[int, Any]:
        return {m.PAGE: self._on_page} if self.role is Role.BASE else {}

    # ================================================================ previous broker

    def _deliver_to_client(self, track: Track, event: Event, event_id: MessageId,
                           published_at: float, hop: int) -> None:
        assert self.cell is not None
        if self.client_present(track.client):
            self.stats["local"] += 1
            local = m.Local(self.node, self.cell, m.Phase.PAGE, published_at, event, False)
            self.send(track.client, Message(m.LOCAL, event_id, local.encode(), hop=hop))
            return
        self.stats["pages"] += 1
        page = m.Page(track.last_cell, track.client, self.node, self.cell,
                      self.params.area_radius(), published_at, event)
        message = Message(m.PAGE, event_id, page.encode(), hop=hop)
        if page.dest == self.cell:
            self._page_here(page, event_id, hop)
        else:
            self.route(message, page.dest, reliable=self.params.reliable_events)

    def _on_page(self, sender: NodeId, message: Message) -> None:
        page = m.Page.decode(message.body)
        if page.dest != self.cell:
            self.route(Message(m.PAGE, message.id, message.body, hop=message.hop + 1),
                       page.dest, reliable=self.params.reliable_events)
            return
        self._page_here(page, message.id, message.hop + 1)

    def _page_here(self, page: m.Page, event_id: MessageId, hop: int) -> None:
        assert self.cell is not None
        tree = diamond_tree(self.cell, page.radius, self.contains)
        deliver = m.Deliver(page.client, page.root_node, page.root, m.Phase.PAGE,
                            page.published_at, page.event,
                            m.DeliveryTree.decode(m.encode_tree(tree)))
        self._run_tree(deliver, event_id, hop)

    def _on_routed_here(self, message: Message, routed: m.Routed, track: Track | None) -> bool:
        if message.type != m.REPORT:
            return False
        m.decode_empty(routed.inner, "REPORT")
        if track is None:
            self.drop("unknown_client", message, peer=routed.client)
        return True  # the location itself was taken by Backbone._on_routed

    # ================================================================ client

    def _on_base_changed(self, gap: float) -> None:
        if self.base is None or self.cell is None:
            return
        for root, root_node in sorted(self._client_roots()):
            last = self._last_report.get(root_node, root)
            if self.params.must_report(manhattan(self.cell, last)):
                self._last_report[root_node] = self.cell
                self.stats["reports"] += 1
                self._client_transmit(self.base, self._routed_from_client(m.REPORT, root, ()))
