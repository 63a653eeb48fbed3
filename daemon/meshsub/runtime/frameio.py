"""Messages to the link and frames from it, with the telemetry the simulator writes.

One place turns a protocol's send actions into encoded frames on the UDP
link (a ``tx`` record per transmission, ``SendToMany`` as one unicast per
neighbour) and received datagrams back into messages (an ``rx`` record per
accepted frame). Everything refused on the way is a counted drop with a
reason: the codec's ``FrameError`` reasons (also in ``FrameCodec.counters``),
``encode_<reason>``, frames of another protocol, sends without a route.

Drops an insider with the fleet key can cause at the radio's rate (authenticated
frames of another protocol id, link-layer frames that are not beacons) are
counted at once and recorded as summaries: one ``drop`` record per reason with
its ``count`` per ``summary_s`` (``tick``) and at stop (``flush_summaries``), as
the protocols' summarised drops (docs/telemetry.md, "Drop summaries").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from meshsub.core.api import LINK_PROTOCOL_ID, Message, NodeId, TelemetryValue
from meshsub.core.protocol import DROP_SUMMARY_S, Protocol
from meshsub.core.telemetry import frame_attrs
from meshsub.runtime.link import Address, Link, LinkState
from meshsub.runtime.logging import get_logger
from meshsub.wire import DECODE_REASONS, Decoded, FrameCodec, FrameError

log = get_logger("meshsub.frames")

__all__ = ["LINK_PROTOCOL_ID", "FrameIO", "Record"]

Record = Callable[[str, Mapping[str, TelemetryValue]], None]
"""Write one telemetry record (event name, attributes) for this node."""


class FrameIO:
    """Encodes, sends, receives and decodes for one node; counts every refusal."""

    def __init__(self, *, codec: FrameCodec, link: Link, protocol: Protocol,
                 record: Record, summary_s: float = DROP_SUMMARY_S) -> None:
        self.codec = codec
        self.link = link
        self.protocol = protocol
        self._record = record
        self.drops: Counter[str] = Counter()
        """Node-level drops (not the codec's): wrong protocol, no route, encode errors."""
        self.counters: Counter[str] = Counter()
        self.on_refused: Callable[[str], None] = lambda reason: None
        """Told the reason of every frame the codec refuses (the node's admission
        counts them and writes one summary record per interval, not one per frame)."""
        self.summary_s = summary_s
        """Longest wait of a summarised drop for its record (0: one record per drop)."""
        self._pending: Counter[str] = Counter()
        self._pending_since: float | None = None
        self.link_refusals = 0
        """Transmissions the link refused (``link_down``, ``send_failed``): not sent, and
        worth another try later, unlike a destination without an address."""

    # -------------------------------------------------------------- sending

    def _encode(self, protocol_id: int, message: Message, kind: str) -> list[bytes] | None:
        try:
            return self.codec.encode(protocol_id, message)
        except FrameError as err:
            reason = f"encode_{err.reason}"
            self.drops[reason] += 1
            self._record("drop", {"reason": reason, "event_id": str(message.id),
                                  "msg_type": message.type, "msg_kind": kind})
            log.warning("message not encodable", reason=err.reason, event_id=str(message.id),
                        error=err.detail)
            return None

    def _why_not_sent(self, node: NodeId | None) -> str:
        if self.link.state != LinkState.UP:
            return "link_down"
        if node is not None and self.link.address_of(node) is None:
            return "no_address"
        return "send_failed"

    def _unsent(self, message: Message, kind: str, reason: str, peer: NodeId | None) -> None:
        if reason in ("link_down", "send_failed"):
            self.link_refusals += 1
        self.drops[reason] += 1
        self._record("drop", {"reason": reason, "event_id": str(message.id),
                              "msg_type": message.type, "msg_kind": kind, "peer": peer})

    def transmit(self, message: Message, dests: Iterable[NodeId] | None) -> None:
        """Broadcast (``dests`` None) or unicast to each destination; a ``tx`` record each.

        Every unicast copy is encoded anew: each frame carries a fresh link
        sequence, and receivers refuse a repeated one as a replay.
        """
        pid = self.protocol.protocol_id
        kind = self.protocol.kind_of(message.type).value
        if dests is None:
            frames = self._encode(pid, message, kind)
            if frames is None:
                return
            if all([self.link.send_broadcast(f) for f in frames]):
                self._record("tx", frame_attrs(message, kind, sum(map(len, frames))))
                self.counters["tx_broadcast"] += 1
            else:
                self._unsent(message, kind, self._why_not_sent(None), None)
            return
        for dest in sorted(dests):
            if self.link.state != LinkState.UP or self.link.address_of(dest) is None:
                self._unsent(message, kind, self._why_not_sent(dest), dest)
                continue
            frames = self._encode(pid, message, kind)
            if frames is None:
                return
            if all([self.link.send_to_node(dest, f) for f in frames]):
                self._record("tx", frame_attrs(message, kind, sum(map(len, frames)), dest))
                self.counters["tx_unicast"] += 1
            else:
                self._unsent(message, kind, self._why_not_sent(dest), dest)

    def send_beacon(self, message: Message, addr: Address | None) -> int:
        """Discovery's transmit hook: a beacon to ``addr`` (``None``: broadcast); bytes sent."""
        kind = self.protocol.kind_of(message.type).value
        frames = self._encode(LINK_PROTOCOL_ID, message, kind)
        if frames is None:
            return 0
        if addr is None:
            ok = all([self.link.send_broadcast(f) > 0 for f in frames])
        else:
            ok = all([self.link.send_to(addr, f) for f in frames])
        if not ok:
            self.drops["beacon_unsent"] += 1
            return 0
        nbytes = sum(map(len, frames))
        self._record("tx", frame_attrs(message, kind, nbytes))
        return nbytes

    # ------------------------------------------------------------ receiving

    def decode(self, data: bytes, now: float) -> Decoded | None:
        """The message ``data`` completes, or ``None`` (a kept fragment, or a counted drop).

        Returned messages are of this node's protocol or link-layer beacons
        (protocol id 0); another protocol's frames are dropped here.
        """
        try:
            decoded = self.codec.decode(data, now)
        except FrameError as err:
            if err.reason != "own_frame":
                self.on_refused(err.reason)
                log.debug("frame refused", reason=err.reason, error=err.detail)
            return None
        if decoded is None:
            return None
        if decoded.protocol_id not in (LINK_PROTOCOL_ID, self.protocol.protocol_id):
            self._foreign(decoded)
            return None
        kind = self.protocol.kind_of(decoded.message.type).value
        self._record("rx", frame_attrs(decoded.message, kind, decoded.frame_bytes,
                                       decoded.transmitter))
        return decoded

    def _foreign(self, decoded: Decoded) -> None:
        """A frame of another protocol id: authenticated, but not for us (counted)."""
        message = decoded.message
        self._summarized("wrong_protocol", {"event_id": str(message.id),
                                            "msg_type": message.type,
                                            "peer": decoded.transmitter})

    def link_unknown_type(self, message: Message, transmitter: NodeId) -> None:
        """A link-layer (protocol id 0) frame that is not a beacon (counted, summarised)."""
        self._summarized("link_unknown_type", {"msg_type": message.type, "peer": transmitter})

    def _summarized(self, reason: str, attrs: dict[str, TelemetryValue]) -> None:
        """Count a drop now; record it in the next summary (or at once if ``summary_s``
        is 0, with the per-frame attributes)."""
        self.drops[reason] += 1
        if self.summary_s <= 0:
            self._record("drop", {"reason": reason, **attrs})
            return
        self._pending[reason] += 1

    def tick(self, now: float) -> None:
        """The driver's clock (every second or so): write the pending summaries once
        ``summary_s`` has passed since the first drop they hold."""
        if not self._pending:
            return
        if self._pending_since is None:
            self._pending_since = now
        elif now - self._pending_since >= self.summary_s:
            self.flush_summaries()

    def flush_summaries(self) -> None:
        """One ``drop`` record per pending reason with its ``count`` (also at stop)."""
        pending, self._pending, self._pending_since = self._pending, Counter(), None
        for reason, count in sorted(pending.items()):
            self._record("drop", {"reason": reason, "count": count})

    def frame_drops(self) -> dict[str, int]:
        """Refused frames by the codec's reason (``meshsubctl status``)."""
        counters = self.codec.counters
        return {reason: counters[reason] for reason in sorted(DECODE_REASONS)
                if counters[reason]} | {
            reason: counters[reason]
            for reason in ("reassembly_timeout", "reassembly_overflow") if counters[reason]
        }

    def status(self) -> dict[str, Any]:
        return {
            "frame_drops": self.frame_drops(),
            "node_drops": dict(self.drops),
            "counters": dict(self.counters),
        }
