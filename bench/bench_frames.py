"""Frame codec throughput and per-frame overhead.

Prints frames/s (and messages/s) for encode+authenticate and for
verify+decode of typical messages (100 B, 500 B, 1 KB bodies) and of 10 KB
messages segmented into 1200-byte frames, plus the bytes each frame adds on
top of its body.

Beside each whole-frame figure, measured in the same run and interleaved
with it (so that a busy machine slows both alike), the baseline: a bare loop
of ``msgpack.packb`` of the same 13 fields plus ``hmac.digest`` (SHA-256,
truncated to 16 bytes), and ``hmac.compare_digest`` plus ``msgpack.unpackb``
for decoding: the least any authenticated msgpack framing costs in Python.
The ratio codec/baseline is the figure to compare across machines (target
>= 0.5).

    .venv/bin/python bench/bench_frames.py [--seconds 1.0] [--repeat 3]

The machine is shared: figures are the best of ``--repeat`` runs, and the
load average is printed with them.
"""

from __future__ import annotations

import argparse
import hmac
import os
import sys
import time
from typing import Any

import msgpack

from meshsub.core.api import Message, MessageId
from meshsub.wire import FrameCodec, KeyRing
from meshsub.wire.frame import pack_body

KEYS = KeyRing.single(bytes(range(32)), 1)
TX, RX = 0x9E37_79B1, 0x7F4A_7C15  # full-width node ids, as random ids are
EPOCH = 1_763_700_000  # a boot time in seconds: a 5-byte msgpack integer


def body_of(size: int) -> dict[str, Any]:
    """An event-like body whose msgpack encoding is exactly ``size`` bytes."""
    body: dict[str, Any] = {"topic": "sensors/temperature", "attrs": {"c": 21.5}, "pad": b""}
    pad = size - len(pack_body(body))
    body["pad"] = b"x" * pad
    while len(pack_body(body)) > size:  # bin8 -> bin16 header growth
        pad -= 1
        body["pad"] = b"x" * pad
    return body


def message(size: int, seq: int) -> Message:
    return Message(17, MessageId(TX, EPOCH, 100_000 + seq), body_of(size), hop=2, ttl=14)


def rate(func: Any, count: int) -> float:
    start = time.perf_counter()
    func(count)
    return count / (time.perf_counter() - start)


def measure(size: int, seconds: float, repeat: int) -> None:
    msgs = [message(size, i) for i in range(64)]
    probe = FrameCodec(TX, EPOCH, KEYS)
    frames_per_msg = len(probe.encode(3, msgs[0]))
    frame_bytes = sum(len(f) for f in probe.encode(3, msgs[0]))
    body_bytes = len(pack_body(msgs[0].body))

    def encode(n: int) -> None:
        tx = FrameCodec(TX, EPOCH, KEYS)
        for i in range(n):
            tx.encode(3, msgs[i & 63])

    calib = max(50, int(200 / frames_per_msg))
    n = max(calib, int(rate(encode, calib) * seconds))
    enc = max(rate(encode, n) for _ in range(repeat))

    tx = FrameCodec(TX, EPOCH, KEYS)
    frames = [f for i in range(n) for f in tx.encode(3, msgs[i & 63])]

    def decode(count: int) -> None:
        rx = FrameCodec(RX, 1, KEYS)
        for f in frames[:count]:
            rx.decode(f, 0.0)

    dec = max(rate(decode, n) for _ in range(repeat))
    if frames_per_msg == 1:
        base_enc, base_dec, enc, dec = interleaved(msgs, frames, n, repeat, encode, decode)
    print(
        f"{size:>6} B body: {frames_per_msg:>2} frame(s), {frame_bytes:>6} B on air "
        f"(+{frame_bytes - body_bytes} B) | encode+auth {enc:>9,.0f} msg/s "
        f"{enc * frames_per_msg:>9,.0f} frames/s | verify+decode {dec:>9,.0f} msg/s "
        f"{dec * frames_per_msg:>9,.0f} frames/s"
    )
    if frames_per_msg == 1:
        print(f"{'':>13} bare msgpack+HMAC loop: encode {base_enc:>9,.0f}/s, decode "
              f"{base_dec:>9,.0f}/s | codec/baseline: encode {enc / base_enc:.2f}, "
              f"decode {dec / base_dec:.2f} (target >= 0.5)")


def interleaved(msgs: list[Message], frames: list[bytes], n: int, repeat: int,
                encode: Any, decode: Any) -> tuple[float, float, float, float]:
    """Best-of-``repeat`` rates of the bare loop and the codec, measured in turns."""
    key = bytes(range(32))
    fields = [[3, TX, EPOCH, i, m.type, m.flags, m.id.origin, m.id.epoch, m.id.seq, m.hop,
               m.ttl, m.reliable_id, m.body] for i, m in enumerate(msgs)]
    sealed = [f[:3] + msgpack.packb(fields[i & 63], use_bin_type=True) for i, f in
              enumerate(frames[:64])]
    bare_frames = [b + hmac.digest(key, b, "sha256")[:16] for b in sealed]

    def bare_encode(count: int) -> None:
        for i in range(count):
            head = b"\x01\x00\x01" + msgpack.packb(fields[i & 63], use_bin_type=True)
            _ = head + hmac.digest(key, head, "sha256")[:16]

    def bare_decode(count: int) -> None:
        for i in range(count):
            frame = bare_frames[i & 63]
            if not hmac.compare_digest(hmac.digest(key, frame[:-16], "sha256")[:16],
                                       frame[-16:]):
                raise AssertionError("bad tag")
            msgpack.unpackb(frame[3:-16], strict_map_key=False)

    best = [0.0, 0.0, 0.0, 0.0]
    short = max(50, n // 10)  # many short turns: a busy machine's quiet moments reach both
    for _ in range(10 * repeat):
        for k, func in enumerate((bare_encode, bare_decode, encode, decode)):
            best[k] = max(best[k], rate(func, short))
    return best[0], best[1], best[2], best[3]


def overhead() -> None:
    """Bytes a whole frame adds to its body, for small and full-width header values."""
    cases = [
        ("small ids and counters", 1, 1, Message(16, MessageId(1, 1, 1), b"", ttl=16)),
        ("32-bit ids, boot-time epochs", TX, EPOCH,
         Message(17, MessageId(RX, EPOCH, 70_000), b"", hop=2, ttl=14)),
        ("same, reliable id set", TX, EPOCH,
         Message(17, MessageId(RX, EPOCH, 70_000), b"", hop=2, ttl=14, reliable_id=70_000)),
    ]
    print("per-frame overhead (frame bytes minus packed body bytes):")
    for name, node, epoch, msg in cases:
        codec = FrameCodec(node, epoch, KEYS)
        codec._seq = 70_000  # a node some time after boot
        frame = codec.encode(3, msg)[0]
        print(f"  {name:32} {len(frame) - len(pack_body(msg.body)):>3} B "
              f"(of which 3 prefix + 16 tag)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="time per measurement")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure; best is shown")
    args = parser.parse_args(argv)
    if not args.seconds > 0 or args.repeat < 1:
        parser.error("--seconds must be positive and --repeat at least 1")
    overhead()
    load = os.getloadavg()
    print(f"throughput (one process, payload 1200 B, best of {args.repeat}; load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}):")
    for size in (100, 500, 1000, 10_000):
        measure(size, args.seconds, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
