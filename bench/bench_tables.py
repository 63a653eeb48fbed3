"""Bytes of every per-peer table of the daemon filled to its entry cap (issue 25), no root.

An insider with the fleet key can create one entry per made-up node id in the replay
table, the link's address map and the neighbour table, and fill the store-carry-forward
buffer; an outsider creates one admission budget per (forged) source address. Each of
those tables is capped in entries; this script fills each one to its cap with the
largest entries an attacker can make (longest addresses, names as long as a beacon
carries, 60 KB messages) and measures the Python heap it takes (``tracemalloc``), so
the entry caps read as byte bounds. The baseline, in the same run, is the same table
empty. Printed: entries, bytes at the cap, bytes per entry, and the sum.

    flock -x /tmp/msub-locks/cpu.lock .venv/bin/python bench/bench_tables.py

Heap bytes, not RSS: the interpreter's allocator adds its own overhead on top (the
insider bench, bench/bench_insider.py, measures the daemon's RSS).
"""

from __future__ import annotations

import gc
import subprocess
import sys
import tempfile
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack

from meshsub.core.api import Message, MessageId
from meshsub.core.buffer import ScfBuffer
from meshsub.runtime.admission import DEFAULT_MAX_SOURCES, Admission
from meshsub.runtime.discovery import MAX_NAME_BYTES
from meshsub.runtime.neighbors import DEFAULT_MAX_NEIGHBORS, NeighborTable
from meshsub.runtime.store import Store
from meshsub.wire.replay import DEFAULT_MAX_TRANSMITTERS, ReplayWindow

NAME = "n" * (MAX_NAME_BYTES - 4)
"""The longest node name a beacon carries, less the 4 digits that make each unique."""


def measure(fill: Callable[[], Any]) -> int:
    """Heap bytes held by what ``fill`` builds and returns."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = fill()
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    del kept
    return grown


def replay_table() -> ReplayWindow:
    window = ReplayWindow()
    for n in range(DEFAULT_MAX_TRANSMITTERS):  # a full window each: a 1024-bit bitmap
        window.accept(0x10000000 + n, 1_800_000_000 + n, 1 << 40, 1.7e9 + n)
        window.accept(0x10000000 + n, 1_800_000_000 + n, (1 << 40) + window.window - 1)
    return window


def address_map() -> dict[int, tuple[str, int, int, int]]:
    # what ``Link.learn`` keeps: one address per transmitter of the replay table, IPv6
    # link-local with a scope (the longest form), each decoded from its own datagram
    return {0x10000000 + n: (f"fe80::{n:x}:ffff:ffff:ffff", 4242 + n % 7, 0, 3)
            for n in range(DEFAULT_MAX_TRANSMITTERS)}


def neighbor_table() -> NeighborTable:
    table = NeighborTable()
    for n in range(DEFAULT_MAX_NEIGHBORS):
        table.heard(0x10000000 + n, 1, 5.0, 1.7e9, address=(f"fe80::{n:x}:ffff:ffff", 4242),
                    epoch=1_800_000_000 + n, name=f"{NAME}{n:04d}", protocol="epidemic",
                    capabilities=("broker", "gateway"))
    return table


def admission_budgets() -> Admission:
    admission = Admission([1], record=lambda event, attrs: None)
    for n in range(DEFAULT_MAX_SOURCES):
        admission.refused("bad_tag", f"fe80::{n:x}:ffff:ffff:ffff%mesh0", 1.7e9)
    return admission


def buffer_index(state_dir: Path) -> tuple[Store, ScfBuffer]:
    store = Store.in_state_dir(state_dir)
    buf = ScfBuffer(1000, store=store.buffer(), origin_share=1.0)
    for seq in range(1000):
        body = msgpack.unpackb(msgpack.packb([f"{seq}:{i}" + "x" * 1000 for i in range(15)]))
        buf.add(Message(16, MessageId(0x10000000 + seq % 7, 1 << 40, seq), body), 0.0, 1e9)
    return store, buf


def main() -> int:
    print("load before:", subprocess.run(["uptime"], capture_output=True, text=True).stdout
          .strip())
    rows: list[tuple[str, int, int]] = []
    rows.append(("replay table", DEFAULT_MAX_TRANSMITTERS, measure(replay_table)))
    rows.append(("link address map", DEFAULT_MAX_TRANSMITTERS, measure(address_map)))
    rows.append(("neighbour table", DEFAULT_MAX_NEIGHBORS, measure(neighbor_table)))
    rows.append(("admission budgets", DEFAULT_MAX_SOURCES, measure(admission_budgets)))
    with tempfile.TemporaryDirectory(prefix="msub-tables-") as tmp:
        held: list[Any] = []

        def fill() -> Any:
            held.append(buffer_index(Path(tmp)))
            return held[-1]

        grown = measure(fill)
        store, buf = held.pop()
        print(f"buffer: {len(buf)} messages, {buf.bytes / 1e6:.1f} MB on disk "
              f"(resident={buf.resident})")
        store.close()
    rows.append(("buffer index (bodies on disk)", 1000, grown))
    print(f"{'table':32} {'entries':>8} {'bytes':>10} {'B/entry':>8}")
    for name, entries, size in rows:
        print(f"{name:32} {entries:8d} {size:10d} {size / entries:8.0f}")
    total = sum(size for _, _, size in rows)
    print(f"{'all tables at their caps':32} {'':8} {total:10d}  ({total / 1e6:.2f} MB)")
    print("load after:", subprocess.run(["uptime"], capture_output=True, text=True).stdout
          .strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
