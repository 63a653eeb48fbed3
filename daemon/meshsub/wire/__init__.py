"""The wire layer: authenticated msgpack frames, replay windows, segmentation.

Drivers hold one ``FrameCodec`` per node: ``encode`` turns a protocol's
``Message`` into frames for the link, ``decode`` turns received bytes back
into a ``Decoded`` message (or raises ``FrameError`` with a counted reason).
"""

from meshsub.wire.codec import Decoded, FrameCodec
from meshsub.wire.errors import DECODE_REASONS, ENCODE_REASONS, REASONS, FrameError
from meshsub.wire.frame import Fragment, Frame, decode_frame, seal
from meshsub.wire.keys import KeyRing
from meshsub.wire.replay import ReplayWindow

__all__ = [
    "DECODE_REASONS",
    "ENCODE_REASONS",
    "REASONS",
    "Decoded",
    "Fragment",
    "Frame",
    "FrameCodec",
    "FrameError",
    "KeyRing",
    "ReplayWindow",
    "decode_frame",
    "seal",
]
