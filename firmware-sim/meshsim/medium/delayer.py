"""The NFQUEUE delayer: holds each queued packet for the delay its mark names (µs).

Run inside the medium's netns by ``meshsim.medium.delay.Delayer`` (not by hand):

    python -m meshsim.medium.delayer --queue 19795 [--max-len 16384]

The nftables medium sets the mark per directed pair (``meta mark set ... map
@delays``) and an iptables rule queues marked IP frames here (br_netfilter hands
bridged IP to iptables; the Python binding does not expose interface names, so
the mark carries all the delayer needs). A heap keeps held packets in release
order; equal delays stay FIFO, so a pair's frames are never reordered. Only the
metadata is copied to userspace (``COPY_META``): the verdict re-injects the
kernel's own copy.

Prints ``ready`` once bound. On SIGTERM, or when the process that started it is
gone (a crashed runner leaves no delayer behind), it releases everything it
holds, prints one JSON line of counts (``held``, ``released``, ``max_held``,
``by_mark``: packets per mark) and exits 0. Exit 2 with one line on stderr when it cannot run.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import json
import os
import select
import signal
import sys
import time
from typing import Any


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m meshsim.medium.delayer")
    parser.add_argument("--queue", type=int, required=True)
    parser.add_argument("--max-len", type=int, default=16384)
    args = parser.parse_args(argv)
    try:
        from netfilterqueue import COPY_META, NetfilterQueue
    except ImportError:
        print("delayer: netfilterqueue is not installed (pip install 'meshsub[vmesh]'; "
              "building it needs Debian's libnetfilter-queue-dev)", file=sys.stderr)
        return 2

    held: list[tuple[float, int, Any]] = []
    order = itertools.count()
    counts = {"held": 0, "released": 0, "max_held": 0}
    by_mark: dict[int, int] = {}

    def on_packet(pkt: Any) -> None:
        mark = pkt.get_mark()
        heapq.heappush(held, (time.monotonic() + mark / 1e6, next(order), pkt))
        counts["held"] += 1
        counts["max_held"] = max(counts["max_held"], len(held))
        by_mark[mark] = by_mark.get(mark, 0) + 1

    stopping = False

    def on_term(_sig: int, _frame: Any) -> None:
        nonlocal stopping
        stopping = True

    wake_r, wake_w = os.pipe()  # the signal wakes select at once instead of at its timeout
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    nfq = NetfilterQueue()
    try:
        nfq.bind(args.queue, on_packet, max_len=args.max_len, mode=COPY_META)
    except OSError as exc:
        print(f"delayer: cannot bind NFQUEUE {args.queue}: {exc}", file=sys.stderr)
        return 2
    fd = nfq.get_fd()
    parent = os.getppid()
    print("ready", flush=True)
    try:
        while not stopping and os.getppid() == parent:  # never outlive the medium's process
            timeout = max(0.0, held[0][0] - time.monotonic()) if held else 0.5
            readable, _, _ = select.select([fd, wake_r], [], [], timeout)
            if fd in readable:
                nfq.run(block=False)
            now = time.monotonic()
            while held and held[0][0] <= now:
                heapq.heappop(held)[2].accept()
                counts["released"] += 1
    finally:
        while held:  # stopping: let everything go now rather than drop it
            heapq.heappop(held)[2].accept()
            counts["released"] += 1
        nfq.unbind()
    print(json.dumps({**counts, "by_mark": by_mark}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
