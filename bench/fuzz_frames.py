"""Fuzz the frame decoder: random, mutated and re-authenticated frames.

Every input must end in a ``Decoded``, a stored fragment (``None``) or a
``FrameError`` with a documented reason; any other exception is counted as
*unexpected* (the run exits 1 if there is one). Re-sealed inputs carry a
valid tag, so the msgpack parser and field checks behind the MAC are fuzzed
too, not only the tag check.

    .venv/bin/python bench/fuzz_frames.py --count 1000000 [--procs 2] [--seed 1]
"""

from __future__ import annotations

import argparse
import random
import struct
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable
from multiprocessing import Pool
from typing import Any

from meshsub.core.api import Message, MessageId
from meshsub.wire import FrameCodec, FrameError, KeyRing, seal
from meshsub.wire.errors import DECODE_REASONS
from meshsub.wire.frame import packb

KEYS = KeyRing({1: b"fuzz-key-one-0123456789abcdef", 2: b"fuzz-key-two-0123456789abcdef"}, 1)
RX_NODE = 0x0000_0001
PAYLOAD = 400


def random_value(rng: random.Random, depth: int = 0) -> Any:
    """A random msgpack-able value, biased to the types and edges the parser must refuse."""
    kind = rng.randrange(12 if depth < 4 else 8)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return rng.choice([0, 1, -1, 127, 128, 255, 256, 2**16, 2**32 - 1, 2**32, 2**63, 2**64 - 1,
                           -(2**63)])
    if kind == 3:
        return rng.randrange(-(2**63), 2**64)
    if kind == 4:
        return rng.choice([0.0, -1.5, 1e300, float("inf"), float("nan")])
    if kind == 5:
        return rng.randbytes(rng.randrange(8)).decode("latin-1")
    if kind == 6:
        return rng.randbytes(rng.randrange(12))
    if kind == 7:
        return rng.randrange(256)
    if kind in (8, 9):
        size = rng.randrange(16) if rng.random() < 0.2 else rng.randrange(4)
        return [random_value(rng, depth + 1) for _ in range(size)]
    if kind == 10:
        return {rng.randrange(100): random_value(rng, depth + 1) for _ in range(rng.randrange(4))}
    return {str(rng.random()): random_value(rng, depth + 1) for _ in range(rng.randrange(4))}


# msgpack headers that announce big lengths or deep nesting, to splice into payloads
HOSTILE = [
    b"\xdd\xff\xff\xff\xff", b"\xdc\xff\xff", b"\xdf\xff\xff\xff\xff", b"\xde\xff\xff",
    b"\xdb\xff\xff\xff\xff", b"\xc6\xff\xff\xff\xff", b"\xc9\xff\xff\xff\xff\x01",
    b"\xd9\xff", b"\xc4\xff", b"\xc7\xff\x01", b"\xd4\xff\x00", b"\xc1", b"\x91" * 3000,
    b"\xcf\xff\xff\xff\xff\xff\xff\xff\xff", b"\xd3\x80\x00\x00\x00\x00\x00\x00\x00",
    b"\xa3\xff\xfe\xfd", b"\xd6\xff" + struct.pack(">I", 0xFFFFFFFF),
]


class Fuzzer:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        # the pool's transmitter gets mutated frames (its window jumps about); fresh
        # valid frames come from another transmitter, so they keep being accepted
        pool_tx = FrameCodec(0x00A0_0000 + seed, seed, KEYS, payload_size=PAYLOAD)
        self.tx = FrameCodec(0x00B0_0000 + seed, seed, KEYS, payload_size=PAYLOAD)
        self.rx = FrameCodec(RX_NODE, 1, KEYS, payload_size=PAYLOAD, max_reassemblies=32)
        self.pool = [f for _ in range(300) for f in pool_tx.encode(*self.valid_message())]
        self.generators: list[tuple[str, Callable[[], bytes]]] = [
            ("random_bytes", self.random_bytes),
            ("random_with_prefix", self.random_with_prefix),
            ("bit_flips", self.bit_flips),
            ("truncation", self.truncation),
            ("splice", self.splice),
            ("one_byte_changed", self.one_byte_changed),
            ("resealed_msgpack", self.resealed_msgpack),
            ("resealed_mutation", self.resealed_mutation),
            ("resealed_field", self.resealed_field),
            ("resealed_hostile", self.resealed_hostile),
            ("fresh_valid", self.fresh_valid),
            ("resealed_fragments", self.resealed_fragments),
            ("oversized", self.oversized),
        ]
        self.game_seq = 0
        self.section = packb([20, 0, 5, 1, 1, 0, 9, None, {"k": list(range(40))}])

    def valid_message(self) -> tuple[int, Message]:
        rng = self.rng
        size = rng.choice([0, 10, 100, 500, 1000, 3000])
        body: Any = rng.choice([rng.randbytes(size), {"t": "a/b", "v": [1, 2.5, None]},
                                list(range(size // 3))])
        return rng.randrange(8), Message(
            rng.randrange(16, 40), MessageId(rng.randrange(2**32), rng.randrange(9),
                                             rng.randrange(2**20)),
            body, hop=rng.randrange(5), ttl=rng.randrange(1 << 16), flags=rng.randrange(4),
            reliable_id=rng.choice([None, rng.randrange(2**32)]))

    def frame(self) -> bytes:
        return self.rng.choice(self.pool)

    def random_bytes(self) -> bytes:
        return self.rng.randbytes(self.rng.randrange(0, 1500))

    def random_with_prefix(self) -> bytes:
        rng = self.rng
        prefix = bytes((1, rng.randrange(2), rng.choice((1, 2, 3))))
        return prefix + rng.randbytes(rng.randrange(60))

    def bit_flips(self) -> bytes:
        data = bytearray(self.frame())
        for _ in range(self.rng.randrange(1, 9)):
            i = self.rng.randrange(len(data) * 8)
            data[i // 8] ^= 1 << (i % 8)
        return bytes(data)

    def truncation(self) -> bytes:
        data = self.frame()
        return data[: self.rng.randrange(len(data))]

    def splice(self) -> bytes:
        a, b = self.frame(), self.frame()
        return a[: self.rng.randrange(len(a) + 1)] + b[self.rng.randrange(len(b) + 1) :]

    def one_byte_changed(self) -> bytes:
        data = bytearray(self.frame())
        i = self.rng.randrange(len(data))
        data[i] = (data[i] + self.rng.randrange(1, 256)) & 0xFF
        return bytes(data)

    def resealed_msgpack(self) -> bytes:
        return seal(KEYS, packb(random_value(self.rng)), fragment=self.rng.random() < 0.3)

    def resealed_mutation(self) -> bytes:
        frame = self.frame()
        inner = bytearray(frame[3:-16])
        rng = self.rng
        for _ in range(rng.randrange(1, 4)):
            op = rng.randrange(4)
            i = rng.randrange(len(inner) + 1)
            if op == 0 and inner:
                inner[min(i, len(inner) - 1)] ^= 1 << rng.randrange(8)
            elif op == 1:
                del inner[i:]
            elif op == 2:
                inner[i:i] = rng.randbytes(rng.randrange(1, 6))
            elif inner:
                inner[min(i, len(inner) - 1)] = rng.randrange(256)
        return seal(KEYS, bytes(inner), fragment=bool(frame[1]) ^ (rng.random() < 0.05))

    def resealed_field(self) -> bytes:
        """A valid header array with one field replaced by a random value."""
        import msgpack

        frame = self.frame()
        fields = msgpack.unpackb(frame[3:-16])
        fields[self.rng.randrange(len(fields))] = random_value(self.rng)
        if self.rng.random() < 0.1:
            fields = fields[: self.rng.randrange(len(fields))]
        return seal(KEYS, packb(fields), fragment=bool(frame[1]))

    def resealed_hostile(self) -> bytes:
        inner = bytearray(self.frame()[3:-16])
        i = self.rng.randrange(len(inner) + 1)
        inner[i:i] = self.rng.choice(HOSTILE)
        return seal(KEYS, bytes(inner), fragment=self.rng.random() < 0.5)

    def fresh_valid(self) -> bytes:
        frames = self.tx.encode(*self.valid_message())
        return frames[0] if len(frames) == 1 else self.rng.choice(frames)


    def resealed_fragments(self) -> bytes:
        """Fragments of a few messages from a few transmitters, consistent or not.

        Fresh sequence numbers get them past the replay window, so they reach
        reassembly: duplicates, count mismatches, garbage sections, too many
        fragments, and complete messages.
        """
        rng = self.rng
        self.game_seq += 1
        count = rng.choice([2, 3, 3, 4, 600, 70000])
        index = rng.randrange(count + 1) if rng.random() < 0.1 else rng.randrange(min(count, 4))
        cut = max(1, len(self.section) // 3)
        chunk = (self.section[index * cut : (index + 1) * cut] if rng.random() < 0.7
                 else rng.randbytes(rng.randrange(0, 40)))
        fields = [rng.randrange(3), 0x00C0_0000 + rng.randrange(3), 1, self.game_seq,
                  rng.randrange(3), index, count, chunk]
        return seal(KEYS, packb(fields), fragment=True)

    def oversized(self) -> bytes:
        data = bytearray(self.rng.randbytes(self.rx.max_frame + 1 + self.rng.randrange(3000)))
        data[0:3] = self.frame()[0:3]
        return bytes(data)


def run(args: tuple[int, int]) -> tuple[Counter[str], Counter[str], list[str], dict[str, int]]:
    seed, count = args
    fuzz = Fuzzer(seed)
    outcomes: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    samples: list[str] = []
    rng = fuzz.rng
    for i in range(count):
        name, make = fuzz.generators[rng.randrange(len(fuzz.generators))]
        kinds[name] += 1
        data = make()
        now = i * 0.001
        try:
            result = fuzz.rx.decode(data, now)
        except FrameError as err:
            documented = err.reason in DECODE_REASONS
            outcomes[err.reason if documented else f"undocumented:{err.reason}"] += 1
            continue
        except Exception:  # the point of the fuzzer: anything else is a bug
            outcomes["unexpected"] += 1
            if len(samples) < 5:
                samples.append(f"{name} {data.hex()}\n{traceback.format_exc()}")
            continue
        outcomes["decoded" if result is not None else "fragment_stored"] += 1
        if i % 1000 == 0:
            fuzz.rx.expire(now)
    bounds = {
        "reassembly_bytes": fuzz.rx.reassembly.charged_bytes,
        "reassembly_bytes_max": fuzz.rx.reassembly.max_bytes,
        "reassemblies": len(fuzz.rx.reassembly),
        "transmitters": len(fuzz.rx.replay),
        "reassembly_timeout": fuzz.rx.counters["reassembly_timeout"],
        "reassembly_overflow": fuzz.rx.counters["reassembly_overflow"],
    }
    return outcomes, kinds, samples, bounds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1_000_000, help="inputs in total")
    parser.add_argument("--procs", type=int, default=2, choices=(1, 2), help="worker processes")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    if args.count < 1:
        parser.error("--count must be positive")
    shares = [args.count // args.procs + (i < args.count % args.procs) for i in range(args.procs)]
    jobs = [(args.seed * 1000 + i, n) for i, n in enumerate(shares)]
    start = time.perf_counter()
    if args.procs == 1:
        results = [run(jobs[0])]
    else:
        with Pool(args.procs) as pool:
            results = pool.map(run, jobs)
    elapsed = time.perf_counter() - start
    outcomes: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    samples: list[str] = []
    for got, made, failures, bounds in results:
        outcomes.update(got)
        kinds.update(made)
        samples += failures
        print(f"worker bounds: {bounds}")
    total = sum(outcomes.values())
    print(f"inputs: {total} in {elapsed:.1f} s ({total / elapsed:,.0f}/s over {args.procs} procs)")
    print("generators:")
    for name, n in sorted(kinds.items()):
        print(f"  {name:22} {n:>9}")
    print("outcomes:")
    for name, n in outcomes.most_common():
        print(f"  {name:22} {n:>9}")
    unexpected = outcomes["unexpected"] + sum(
        n for k, n in outcomes.items() if k.startswith("undocumented:"))
    print(f"unexpected exceptions: {unexpected}")
    for sample in samples:
        print(sample, file=sys.stderr)
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
