"""The real frame codec, used by the simulator only to size transmissions.

Every node has its own ``FrameCodec`` (frames carry the transmitter's id and
frame sequence), all sharing one simulation fleet key. Receivers get the
``Message`` object directly: decoding every copy would cost time and tell the
simulation nothing the protocol tests do not already cover.

A size is what ``FrameCodec.encode`` would produce, but through
``FrameCodec.frame_sizes``: no frame is built or authenticated, and a body is packed
once while the same body object is being sent (a flooded message is relayed by every
node with its sender's body: ``Message.forwarded``), as ``core.bodies.SharedDecode``
remembers it. Exact because packing is a pure function of the body and a sent body is
never changed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from meshsub.core.api import Message
from meshsub.core.bodies import SharedDecode
from meshsub.wire.frame import packb

SIM_KEY = b"meshsim-simulation-fleet-key-000"
"""Not a secret: simulated frames never leave the process."""

Sizer = Callable[[int, Message], list[int]]
"""(protocol_id, message) -> size in bytes of each frame on the air."""

_body_bytes = SharedDecode()
"""The last body sized, and its packed size: the process's one memo (as bodies'
``shared_decode``), shared by every node's sizer."""


def packed_body_bytes(body: Any) -> int:
    """``body``'s msgpack size inside a frame: ``len(packb([body])) - 1`` keeps the
    nesting depth it has there, so a body too deep to pack fails here as in ``encode``."""
    return len(packb([body])) - 1


def make_sizer(node: int, epoch: int, payload_size: int) -> Sizer:
    from meshsub.wire import FrameCodec, KeyRing

    codec: Any = FrameCodec(node, epoch, KeyRing.single(SIM_KEY, 1), payload_size=payload_size)

    def sizes(protocol_id: int, message: Message) -> list[int]:
        try:
            body_bytes = _body_bytes(packed_body_bytes, message.body)
        except Exception:  # unencodable: encode raises the codec's own error for it
            return [len(frame) for frame in codec.encode(protocol_id, message)]
        result: list[int] = codec.frame_sizes(protocol_id, message, body_bytes)
        return result

    return sizes
