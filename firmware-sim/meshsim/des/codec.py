"""The real frame codec, used by the simulator only to size transmissions.

Every node has its own ``FrameCodec`` (frames carry the transmitter's id and
frame sequence), all sharing one simulation fleet key. Receivers get the
``Message`` object directly: decoding every copy would cost time and tell the
simulation nothing the protocol tests do not already cover.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from meshsub.core.api import Message

SIM_KEY = b"meshsim-simulation-fleet-key-000"
"""Not a secret: simulated frames never leave the process."""

Sizer = Callable[[int, Message], list[int]]
"""(protocol_id, message) -> size in bytes of each frame on the air."""


def make_sizer(node: int, epoch: int, payload_size: int) -> Sizer:
    from meshsub.wire import FrameCodec, KeyRing

    codec: Any = FrameCodec(node, epoch, KeyRing.single(SIM_KEY, 1), payload_size=payload_size)

    def sizes(protocol_id: int, message: Message) -> list[int]:
        return [len(frame) for frame in codec.encode(protocol_id, message)]

    return sizes
