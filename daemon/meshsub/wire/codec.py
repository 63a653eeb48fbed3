"""``FrameCodec``: messages to authenticated frames and back, for one node.

Sans-I/O: it holds the node's transmit sequence, the replay windows and the
partial reassemblies, and takes ``now`` from the driver. Every refused frame
raises ``FrameError`` *and* is counted in ``counters`` under its reason, so a
driver can emit a ``drop`` record from the exception and report totals from
the counters.
"""

from __future__ import annotations

import math
from collections import Counter
from hmac import compare_digest
from typing import Any, Final, NamedTuple

import msgpack

from meshsub.core.api import NODE_ID_MAX, Message, NodeId
from meshsub.wire.errors import FrameError
from meshsub.wire.frame import (
    EPOCH_MAX,
    FLAG_FRAGMENT,
    FLAGS_MAX,
    FRAGMENT_COUNT_MAX,
    FRAGMENT_FIELDS,
    FRAGMENT_ID_MAX,
    HOP_MAX,
    MIN_FRAME_BYTES,
    PREFIX_BYTES,
    RELIABLE_ID_MAX,
    SECTION_FIELDS,
    SEQ_MAX,
    TTL_MAX,
    TYPE_MAX,
    VERSION,
    WHOLE_FIELDS,
    array,
    fragment_fields,
    fragment_frame,
    link_fields,
    message_fields,
    pack_body,
    pack_elements,
    packb,
    parse_section,
    seal,
    unpack_array,
    verify_and_unpack,
    whole_message,
)
from meshsub.wire.keys import TAG_BYTES, KeyRing
from meshsub.wire.reassembly import CHUNK_CHARGE, Reassembler
from meshsub.wire.replay import DEFAULT_MAX_TRANSMITTERS, DEFAULT_WINDOW, ReplayWindow

DEFAULT_PAYLOAD: Final = 1200
MIN_PAYLOAD: Final = 256
MAX_PAYLOAD: Final = 65507
"""The largest UDP payload over IPv4."""
DEFAULT_MAX_MESSAGE: Final = 65536
DEFAULT_MAX_FRAGMENTS: Final = 512
DEFAULT_MAX_REASSEMBLIES: Final = 64
DEFAULT_REASSEMBLY_TIMEOUT: Final = 30.0
WHOLE_OVERHEAD_MAX: Final = PREFIX_BYTES + TAG_BYTES + 25
"""A whole frame is at most this much longer than its message section
(prefix, tag, and the link fields: protocol id 2, transmitter 5, epoch 9, seq 9)."""


class Decoded(NamedTuple):
    """A message accepted from the air, with who transmitted it over the last hop.

    A named tuple rather than a frozen dataclass: one is made per received
    frame, and a tuple is built several times faster.
    """

    transmitter: NodeId
    transmitter_epoch: int
    protocol_id: int
    message: Message
    frame_bytes: int
    """Bytes of every frame that carried it (all fragments for a segmented message)."""
    frames: int = 1
    newest: bool = True
    """The last frame was the newest of its transmitter (not a late one inside the
    replay window): only such a frame may teach the driver the transmitter's address."""


class FrameCodec:
    """Encodes this node's messages and decodes its neighbours' frames.

    ``epoch`` is the node's boot epoch and must grow across reboots (a
    persisted counter or the boot time): receivers refuse an older epoch and
    track sequences per epoch. ``keys`` may be replaced at any time (rotation).
    """

    def __init__(
        self,
        node: NodeId,
        epoch: int,
        keys: KeyRing,
        *,
        payload_size: int = DEFAULT_PAYLOAD,
        max_message: int = DEFAULT_MAX_MESSAGE,
        max_fragments: int = DEFAULT_MAX_FRAGMENTS,
        replay_window: int = DEFAULT_WINDOW,
        max_transmitters: int = DEFAULT_MAX_TRANSMITTERS,
        max_reassemblies: int = DEFAULT_MAX_REASSEMBLIES,
        max_reassembly_bytes: int | None = None,
        reassembly_timeout: float = DEFAULT_REASSEMBLY_TIMEOUT,
    ) -> None:
        link_fields(0, node, epoch, 0)  # range-checks node and epoch
        if not MIN_PAYLOAD <= payload_size <= MAX_PAYLOAD:
            raise ValueError(f"payload_size must be in {MIN_PAYLOAD}..{MAX_PAYLOAD}")
        if max_message < 1:
            raise ValueError("max_message must be positive")
        if not 2 <= max_fragments <= FRAGMENT_COUNT_MAX:
            raise ValueError(f"max_fragments must be in 2..{FRAGMENT_COUNT_MAX}")
        if max_reassembly_bytes is None:
            max_reassembly_bytes = max(
                1 << 20, 4 * (max_message + max_fragments * CHUNK_CHARGE)
            )
        self.node = node
        self.epoch = epoch
        self.keys = keys
        self.payload_size = payload_size
        self.max_message = max_message
        self.max_fragments = max_fragments
        self.max_frame = max(payload_size, max_message + WHOLE_OVERHEAD_MAX)
        """Longest frame ``decode`` reads; longer ones are ``oversized``."""
        self.counters: Counter[str] = Counter()
        self.replay = ReplayWindow(replay_window, max_transmitters)
        self.reassembly = Reassembler(
            self.counters,
            max_message=max_message,
            max_fragments=max_fragments,
            max_partials=max_reassemblies,
            max_bytes=max_reassembly_bytes,
            timeout=reassembly_timeout,
        )
        self._seq = 0
        self._fragment_id = 0
        self._node_epoch_bytes = _int_bytes(node) + _int_bytes(epoch)

    # -------------------------------------------------------------- encoding

    def encode(self, protocol_id: int, message: Message) -> list[bytes]:
        """One frame, or fragment frames, each at most ``payload_size`` bytes.

        Raises ``FrameError`` (``unencodable``, ``oversized``) without using up
        a sequence number. Every call makes new frames: a retransmission is
        encoded again, never resent as the same bytes (receivers would drop it
        as a replay).

        The common case (plain int header fields, a whole frame) packs the
        13 fields in one ``packb`` call; anything else takes the general path
        below, which produces the same bytes.
        """
        header = self._plain_header(protocol_id, message)
        if header is not None:
            try:
                packed: bytes = _packb([*header, message.body])
            except Exception as exc:  # TypeError, OverflowError, ValueError (recursion)
                raise FrameError("unencodable",
                                 f"body: {type(exc).__name__}: {exc}") from None
            if self._take_whole(protocol_id, header[3], len(packed)):
                keys = self.keys
                kid = keys.current
                head = bytes((VERSION, 0, kid)) + packed
                return [head + keys.tag(kid, head)]
        return self._encode_general(protocol_id, message)

    def frame_sizes(self, protocol_id: int, message: Message, body_bytes: int) -> list[int]:
        """``[len(frame) for frame in encode(protocol_id, message)]``, with the same
        effects (sequence numbers, counters) and errors, given ``body_bytes``, the packed
        size of ``message.body`` as ``len(packb([body])) - 1`` (at the nesting depth it
        has in a frame).

        For a driver that only needs sizes (the simulator): in the common case no frame
        is built or authenticated, and a body sent by many nodes is packed once by the
        caller (docs/benchmarks.md, "Third round"). Both fixed arrays of the whole
        frame (12 header fields, then 13 with the body) have a one-byte header.
        """
        header = self._plain_header(protocol_id, message)
        if header is not None:
            packed = len(_packb(header)) + body_bytes
            if self._take_whole(protocol_id, header[3], packed):
                return [PREFIX_BYTES + packed + TAG_BYTES]
        return [len(frame) for frame in self._encode_general(protocol_id, message)]

    def _plain_header(self, protocol_id: int, message: Message) -> list[Any] | None:
        """The 12 header fields of a whole frame in wire order (its body comes last), if
        they are all plain ints in range (the reliable id may be None), else None: then
        ``_encode_general`` checks them field by field."""
        mid = message.id
        mtype, flags, hop, ttl, rid = (message.type, message.flags, message.hop, message.ttl,
                                       message.reliable_id)
        origin, epoch, seq = mid.origin, mid.epoch, mid.seq
        tx_seq = self._seq + 1
        if (type(mtype) is int and type(flags) is int and type(origin) is int
                and type(epoch) is int and type(seq) is int and type(hop) is int
                and type(ttl) is int and type(protocol_id) is int
                and (rid is None or (type(rid) is int and 0 <= rid <= RELIABLE_ID_MAX))
                and 0 <= mtype <= TYPE_MAX and 0 <= flags <= FLAGS_MAX
                and 0 <= origin <= NODE_ID_MAX and 0 <= epoch <= EPOCH_MAX
                and 0 <= seq <= SEQ_MAX and 0 <= hop <= HOP_MAX and 0 <= ttl <= TTL_MAX
                and 0 <= protocol_id <= 0xFF and tx_seq <= SEQ_MAX):
            return [protocol_id, self.node, self.epoch, tx_seq, mtype, flags, origin, epoch,
                    seq, hop, ttl, rid]
        return None

    def _take_whole(self, protocol_id: int, tx_seq: int, packed: int) -> bool:
        """Whether a whole frame of ``packed`` msgpack bytes fits (frame and message
        limits); if so its sequence number is used up and it is counted."""
        size = PREFIX_BYTES + packed + TAG_BYTES
        if size > self.payload_size or packed - self._link_bytes(protocol_id,
                                                                 tx_seq) > self.max_message:
            return False
        self._seq = tx_seq
        counters = self.counters
        counters["messages_out"] += 1
        counters["frames_out"] += 1
        counters["bytes_out"] += size
        return True

    def _link_bytes(self, protocol_id: int, seq: int) -> int:
        """Packed size of the four link fields (what a whole frame adds to its section)."""
        return (_int_bytes(protocol_id) + self._node_epoch_bytes + _int_bytes(seq))

    def _encode_general(self, protocol_id: int, message: Message) -> list[bytes]:
        """``encode`` for every case: checks field by field, segments when needed."""
        fields = pack_elements(message_fields(message))
        link = pack_elements(link_fields(protocol_id, self.node, self.epoch, self._seq + 1))
        body = pack_body(message.body)
        section_len = 1 + len(fields) + len(body)
        if section_len > self.max_message:
            raise FrameError(
                "oversized", f"message of {section_len} bytes, limit {self.max_message}"
            )
        if PREFIX_BYTES + 1 + len(link) + section_len - 1 + TAG_BYTES <= self.payload_size:
            self._seq += 1
            frame = seal(self.keys, array(WHOLE_FIELDS, link, fields, body))
            self._count_out([frame], fragments=False)
            return [frame]
        frames = self._segment(protocol_id, array(SECTION_FIELDS, fields, body))
        self._count_out(frames, fragments=True)
        return frames

    def _segment(self, protocol_id: int, section: bytes) -> list[bytes]:
        """Cut ``section`` into as few fragment frames as fit ``payload_size``."""
        fragment_id = self._fragment_id
        count = 2
        while True:  # the header grows with count (seq, index): iterate to a fixed point
            room = self.payload_size - self._fragment_overhead(protocol_id, fragment_id, count)
            chunk = room - 2 if room - 2 <= 0xFF else room - 3  # bin8 or bin16 header
            needed = math.ceil(len(section) / chunk)
            if needed <= count:
                count = max(needed, 2)
                break
            count = needed
        if count > self.max_fragments:
            raise FrameError("oversized", f"{count} fragments, limit {self.max_fragments}")
        frames = []
        for index in range(count):
            link = link_fields(protocol_id, self.node, self.epoch, self._seq + 1 + index)
            header = pack_elements([*link, *fragment_fields(fragment_id, index, count)])
            piece = packb(section[index * chunk : (index + 1) * chunk])
            frames.append(seal(self.keys, array(FRAGMENT_FIELDS, header, piece), fragment=True))
        self._seq += count
        self._fragment_id = (fragment_id + 1) & FRAGMENT_ID_MAX
        return frames

    def _fragment_overhead(self, protocol_id: int, fragment_id: int, count: int) -> int:
        """Bytes of a fragment frame besides its chunk and the chunk's bin header, at most."""
        link = link_fields(protocol_id, self.node, self.epoch, self._seq + count)
        header = pack_elements([*link, fragment_id, count - 1, count])
        return PREFIX_BYTES + 1 + len(header) + TAG_BYTES

    def _count_out(self, frames: list[bytes], *, fragments: bool) -> None:
        self.counters["messages_out"] += 1
        self.counters["frames_out"] += len(frames)
        self.counters["bytes_out"] += sum(len(f) for f in frames)
        if fragments:
            self.counters["fragments_out"] += len(frames)

    # -------------------------------------------------------------- decoding

    def decode(self, data: bytes | bytearray | memoryview, now: float) -> Decoded | None:
        """The message a frame completes, or ``None`` if it was a fragment kept for later.

        Raises only ``FrameError``, whatever ``data`` holds; each refusal is
        counted under its reason. The replay window moves only for frames
        whose tag verified.

        The receive path of every datagram is the first branch: a whole frame
        (``bytes``, prefix in order) verified and unpacked here without the
        calls and slices of ``verify_and_unpack``; anything else takes the
        general path, which raises the same errors. Both end in
        ``_accept_whole`` for whole frames.
        """
        counters = self.counters
        counters["frames_in"] += 1
        try:
            if type(data) is bytes:
                size = len(data)
                counters["bytes_in"] += size
                keys = self.keys
                if (MIN_FRAME_BYTES <= size <= self.max_frame and data[0] == VERSION
                        and data[1] == 0 and keys.accepts(data[2])):
                    end = size - TAG_BYTES
                    if not compare_digest(keys.tag(data[2], data[:end]), data[end:]):
                        raise FrameError("bad_tag", f"key id {data[2]}")
                    try:
                        fields = _unpackb(data[PREFIX_BYTES:end], strict_map_key=False)
                    except Exception as exc:  # ExtraData, FormatError, StackError, ...
                        raise FrameError("malformed", f"msgpack: {type(exc).__name__}") from None
                    if type(fields) is not list:
                        raise FrameError("malformed",
                                         f"expected an array, got {type(fields).__name__}")
                    return self._accept_whole(fields, size, now)
            elif isinstance(data, bytes | bytearray | memoryview):
                counters["bytes_in"] += len(data)
            else:
                raise FrameError("malformed", f"frame is {type(data).__name__}, not bytes")
            return self._decode(data, now)
        except FrameError as err:
            counters[err.reason] += 1
            raise

    def _accept_whole(self, fields: list[Any], size: int, now: float) -> Decoded:
        """The message of a verified whole frame's fields, past the own-frame and replay checks."""
        pid, transmitter, tx_epoch, tx_seq, message = whole_message(fields)
        newest = self._check_replay(transmitter, tx_epoch, tx_seq, now)
        self.counters["messages_in"] += 1
        return Decoded(transmitter, tx_epoch, pid, message, size, 1, newest)

    def _decode(self, data: bytes | bytearray | memoryview, now: float) -> Decoded | None:
        """The general path: any buffer type, fragments, and every malformed prefix."""
        key_id, flags, fields, size = verify_and_unpack(data, self.keys, self.max_frame)
        if not flags & FLAG_FRAGMENT:
            return self._accept_whole(fields, size, now)
        # Partial messages time out here and in ``expire`` (the driver calls it
        # periodically); whole frames never touch the reassembly.
        self.reassembly.expire(now)
        frame = fragment_frame(fields, key_id, size)
        newest = self._check_replay(frame.transmitter, frame.transmitter_epoch,
                                    frame.transmitter_seq, now)
        if frame.fragment is None:  # fragment_frame returns a fragment or raises
            raise FrameError("malformed", "frame carries neither message nor fragment")
        key = (frame.transmitter, frame.transmitter_epoch, frame.fragment.fragment_id)
        done = self.reassembly.add(key, frame.protocol_id, frame.fragment, frame.size, now)
        self.counters["fragments_in"] += 1
        if done is None:
            return None
        message = parse_section(unpack_array(done.section))
        self.counters["messages_in"] += 1
        return Decoded(
            frame.transmitter,
            frame.transmitter_epoch,
            frame.protocol_id,
            message,
            done.frame_bytes,
            done.frames,
            newest,
        )

    def _check_replay(self, transmitter: NodeId, epoch: int, seq: int, now: float) -> bool:
        """Own frames, replays and new transmitters beyond a full table are refused; a
        fresh frame moves the window. Returns whether it was the transmitter's newest
        (not a late one inside the window)."""
        if transmitter == self.node:
            raise FrameError("own_frame", f"seq {seq}")
        replay = self.replay
        why = replay.check(transmitter, epoch, seq)
        if why is not None:
            raise FrameError("replay", f"from {transmitter:x}: {why}")
        if not replay.has_room(transmitter, now):
            raise FrameError("transmitters_full", f"from {transmitter:x}")
        return replay.accept(transmitter, epoch, seq, now)

    def expire(self, now: float) -> int:
        """Drop timed-out partial messages (counted as ``reassembly_timeout``); how many."""
        return self.reassembly.expire(now)

    def status(self) -> dict[str, Any]:
        """Counters and occupancy, for operators (``meshsubctl status``)."""
        return {
            "counters": dict(self.counters),
            "transmitters": len(self.replay),
            "transmitters_evicted": self.replay.evicted,
            "reassemblies": len(self.reassembly),
            "reassembly_bytes": self.reassembly.charged_bytes,
            "key_ids": sorted(self.keys.key_ids),
            "current_key": self.keys.current,
        }


_unpackb = msgpack.unpackb


def _packb(value: Any) -> bytes:
    packed: bytes = msgpack.packb(value, use_bin_type=True)
    return packed


def _int_bytes(value: int) -> int:
    """Bytes of a non-negative integer in msgpack."""
    if value < 0x80:
        return 1
    if value <= 0xFF:
        return 2
    if value <= 0xFFFF:
        return 3
    if value <= 0xFFFF_FFFF:
        return 5
    return 9
