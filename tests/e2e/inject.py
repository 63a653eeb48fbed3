"""A raw UDP sender of bad frames, run inside a namespace by the end-to-end test.

``python inject.py HOST PORT FLEET_KEY_HEX`` sends, in order: garbage (a
wrong version byte), two truncated frames (one shorter than any frame, one
that lost the end of its authentication tag), a frame
authenticated with a wrong key under the fleet's key id, a frame under a key
id the fleet does not have, and one valid frame twice (the second is a replay).
Prints, as JSON, what the receiver should count: ``kernel``, the frames its admission
filter drops in the kernel (not our version byte, shorter than any frame, a key id the
fleet does not have: docs/security.md), and ``frame``, the refusals its codec counts by
reason for the frames that pass the filter.
"""

from __future__ import annotations

import json
import socket
import sys
import time

from meshsub.core.api import Message, MessageId
from meshsub.core.content import Event
from meshsub.protocols.flooding import DATA, encode_body
from meshsub.wire import FrameCodec, KeyRing

INTRUDER = 0xBAD


def frames(key_hex: str) -> list[bytes]:
    message = Message(DATA, MessageId(INTRUDER, 1, 1),
                      encode_body(Event("inject/test", {"n": 1}), time.time()), ttl=1)
    fleet = FrameCodec(INTRUDER, 1, KeyRing.from_hex({"1": key_hex}, 1))
    wrong_key = FrameCodec(INTRUDER + 1, 1, KeyRing.from_hex({"1": "ee" * 32}, 1))
    unknown_id = FrameCodec(INTRUDER + 2, 1, KeyRing.from_hex({"9": key_hex}, 9))
    valid = fleet.encode(1, message)[0]
    return [
        b"\xff" + b"garbage, not a meshsub frame" * 3,
        valid[:12],
        valid[:-3],
        wrong_key.encode(1, message)[0],
        unknown_id.encode(1, message)[0],
        valid,
        valid,
    ]


def main(argv: list[str]) -> int:
    host, port, key_hex = argv[0], int(argv[1]), argv[2]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for data in frames(key_hex):
            sock.sendto(data, (host, port))
            time.sleep(0.01)
    print(json.dumps({"kernel": 3, "frame": {"bad_tag": 2, "replay": 1}}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
