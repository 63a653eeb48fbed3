"""Admission: drop frames that cannot be ours as early as possible, and keep a trace of
refusals that costs nothing per frame.

An outsider in radio range has no key, so everything it sends fails
authentication; what matters is what each of its frames costs the node and
what it leaves behind. Three layers:

1. A classic BPF socket filter (``attach``) on the mesh socket: the kernel
   drops a datagram unless it is long enough and starts with our version byte,
   known frame flags and a key id of the key ring, before it is queued or
   copied to the daemon. (Such drops count in the socket's kernel drop counter.)
2. The same prefix check in Python (``admit``), for sockets without the
   filter, and a per-source budget of authentication failures: a source
   address that failed more than ``fail_rate`` times a second (burst
   ``fail_burst``) has its frames dropped before the HMAC until its budget
   refills. Legitimate neighbours never fail, so they never spend budget.
3. Refusals are counted by reason and written to telemetry as at most one
   ``counter`` record per ``summary_s`` (reason ``frames_refused``, the count in
   ``bytes``), and one log line per interval: a flood neither fills the spool
   nor the journal (issue 25: the spool used to grow 1.3 MB/s).

Limit: budgets are per source *address*, which a sender on the same link can
forge; an outsider forging a neighbour's address can make this node drop that
neighbour's frames while the forged failures last (docs/security.md).
"""

from __future__ import annotations

import ctypes
import socket
import struct
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from meshsub.core.api import TelemetryValue
from meshsub.runtime.logging import get_logger
from meshsub.wire.frame import KNOWN_FLAGS, MIN_FRAME_BYTES, VERSION

log = get_logger("meshsub.admission")

SO_ATTACH_FILTER: Final = 26
UDP_HEADER: Final = 8
"""A socket filter on a UDP socket sees the datagram from its UDP header on."""
AUTH_REASONS: Final = frozenset({"bad_version", "malformed", "oversized", "unknown_key",
                                 "bad_tag"})
"""Refusals that spend a source's budget: what an outsider without the key causes."""
MAX_FILTER_KEYS: Final = 240
DEFAULT_FAIL_RATE: Final = 500.0
DEFAULT_FAIL_BURST: Final = 2000.0
DEFAULT_MAX_SOURCES: Final = 1024
DEFAULT_SUMMARY_S: Final = 10.0

Record = Callable[[str, Mapping[str, TelemetryValue]], None]

# classic BPF opcodes (linux/filter.h)
_LD_W_LEN: Final = 0x80
_LDB_ABS: Final = 0x30
_JGE_K: Final = 0x35
_JEQ_K: Final = 0x15
_JSET_K: Final = 0x45
_RET_K: Final = 0x06
_ACCEPT: Final = 0xFFFF_FFFF


def prefix_filter(key_ids: Iterable[int]) -> list[tuple[int, int, int, int]]:
    """The BPF program: accept a datagram only if it could be one of our frames.

    Length at least ``MIN_FRAME_BYTES``, version byte ``VERSION``, no unknown
    flag bit, and a key id of ``key_ids``. Instructions are (code, jt, jf, k).
    """
    ids = sorted(set(key_ids))
    if not ids or not all(0 <= k <= 0xFF for k in ids):
        raise ValueError("the filter needs key ids in 0..255")
    if len(ids) > MAX_FILTER_KEYS:  # BPF jump offsets are one byte
        raise ValueError(f"the filter takes at most {MAX_FILTER_KEYS} key ids")
    n = len(ids)
    # layout: 0 ld len, 1 jge, 2 ldb [8], 3 jeq, 4 ldb [9], 5 jset, 6 ldb [10],
    # 7 .. 6+n jeq per key id, 7+n ret accept, 8+n ret drop
    drop = 8 + n
    prog = [
        (_LD_W_LEN, 0, 0, 0),
        (_JGE_K, 0, drop - 2, UDP_HEADER + MIN_FRAME_BYTES),
        (_LDB_ABS, 0, 0, UDP_HEADER),
        (_JEQ_K, 0, drop - 4, VERSION),
        (_LDB_ABS, 0, 0, UDP_HEADER + 1),
        (_JSET_K, drop - 6, 0, 0xFF & ~KNOWN_FLAGS),
        (_LDB_ABS, 0, 0, UDP_HEADER + 2),
    ]
    for i, key_id in enumerate(ids):
        here = 7 + i
        prog.append((_JEQ_K, (7 + n) - here - 1, 0 if i < n - 1 else drop - here - 1, key_id))
    prog += [(_RET_K, 0, 0, _ACCEPT), (_RET_K, 0, 0, 0)]
    return prog


def run_filter(prog: list[tuple[int, int, int, int]], packet: bytes) -> bool:
    """Interpret the subset of classic BPF ``prefix_filter`` uses (tests check the
    program against the Python rule with it; the kernel runs the real thing)."""
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = prog[pc]
        if code == _LD_W_LEN:
            acc = len(packet)
        elif code == _LDB_ABS:
            if k >= len(packet):
                return False  # the kernel drops on an out-of-bounds load
            acc = packet[k]
        elif code == _RET_K:
            return k != 0
        elif code in (_JGE_K, _JEQ_K, _JSET_K):
            hit = (acc >= k if code == _JGE_K else acc == k if code == _JEQ_K
                   else bool(acc & k))
            pc += jt if hit else jf
        else:
            raise ValueError(f"opcode 0x{code:02x} is not in the filter's subset")
        pc += 1


def attach_filter(sock: Any, key_ids: Iterable[int]) -> None:
    """Attach ``prefix_filter`` to a socket (OSError if the kernel refuses)."""
    prog = prefix_filter(key_ids)
    code = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *i) for i in prog))
    fprog = struct.pack("HL", len(prog), ctypes.addressof(code))
    # the kernel copies the program during the call: ``code`` may go after it
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)


@dataclass(slots=True)
class _Budget:
    tokens: float
    at: float


class Admission:
    """The receive path's gate; ``admit`` before decoding, ``refused`` after a refusal."""

    def __init__(
        self,
        key_ids: Iterable[int],
        *,
        record: Record,
        fail_rate: float = DEFAULT_FAIL_RATE,
        fail_burst: float = DEFAULT_FAIL_BURST,
        max_sources: int = DEFAULT_MAX_SOURCES,
        summary_s: float = DEFAULT_SUMMARY_S,
    ) -> None:
        if fail_rate <= 0 or fail_burst < 1 or max_sources < 1 or summary_s <= 0:
            raise ValueError("admission limits must be positive")
        self.key_ids = frozenset(key_ids)
        self.fail_rate = fail_rate
        self.fail_burst = fail_burst
        self.max_sources = max_sources
        self.summary_s = summary_s
        self._record = record
        self._budgets: OrderedDict[str, _Budget] = OrderedDict()
        self.counters: Counter[str] = Counter()
        """Frames dropped here by reason (``prefix``, ``budget``) and kernel filter state."""
        self.refusals: Counter[str] = Counter()
        """Every refused frame by reason since start (codec reasons and ours)."""
        self._interval: Counter[str] = Counter()
        self._interval_start: float | None = None
        self.filter_attached = False

    # ------------------------------------------------------------ kernel

    def attach(self, sock: Any) -> bool:
        """Put the prefix filter on the link's socket; False (logged once) if impossible."""
        try:
            attach_filter(sock, self.key_ids)
        except (OSError, ValueError, AttributeError) as exc:
            if self.filter_attached or not self.counters["filter_errors"]:
                log.warning("no kernel prefix filter on the mesh socket", error=str(exc))
            self.counters["filter_errors"] += 1
            self.filter_attached = False
            return False
        self.filter_attached = True
        self.counters["filter_attached"] += 1
        return True

    # ------------------------------------------------------------ per frame

    def admit(self, data: bytes, source: str, now: float) -> bool:
        """Whether ``data`` from ``source`` is worth an HMAC; a False is counted."""
        if (len(data) < MIN_FRAME_BYTES or data[0] != VERSION or data[1] & ~KNOWN_FLAGS
                or data[2] not in self.key_ids):
            self._refuse("prefix", now)
            return False
        budget = self._budgets.get(source)
        if budget is not None:
            budget.tokens = min(self.fail_burst,
                                budget.tokens + (now - budget.at) * self.fail_rate)
            budget.at = now
            if budget.tokens < 1.0:
                self._refuse("budget", now)
                return False
        return True

    def refused(self, reason: str, source: str, now: float) -> None:
        """The codec refused a frame from ``source``: count it; authentication
        failures spend the source's budget."""
        self._count(reason, now)
        if reason not in AUTH_REASONS:
            return
        budget = self._budgets.get(source)
        if budget is None:
            budget = _Budget(self.fail_burst, now)
            self._budgets[source] = budget
            if len(self._budgets) > self.max_sources:
                self._budgets.popitem(last=False)  # the least recently failing source
                self.counters["sources_forgotten"] += 1
        else:
            self._budgets.move_to_end(source)
        budget.tokens -= 1.0

    def _refuse(self, reason: str, now: float) -> None:
        self.counters[reason] += 1
        self._count(f"admission_{reason}", now)

    def _count(self, reason: str, now: float) -> None:
        self.refusals[reason] += 1
        self._interval[reason] += 1
        if self._interval_start is None:
            self._interval_start = now

    # ------------------------------------------------------------ summary

    def tick(self, now: float) -> None:
        """Called periodically: at most one summary record (and log line) per interval."""
        if self._interval_start is None or now - self._interval_start < self.summary_s:
            return
        total = sum(self._interval.values())
        self._record("counter", {"reason": "frames_refused", "bytes": total})
        log.info("frames refused", seconds=round(now - self._interval_start, 1), total=total,
                 reasons=",".join(f"{k}={v}" for k, v in sorted(self._interval.items())))
        self._interval.clear()
        self._interval_start = None

    def throttled(self, now: float) -> list[str]:
        """Sources whose frames are dropped before the HMAC right now."""
        out = []
        for source, b in self._budgets.items():
            if min(self.fail_burst, b.tokens + (now - b.at) * self.fail_rate) < 1.0:
                out.append(source)
        return out

    def status(self, now: float) -> dict[str, Any]:
        throttled = self.throttled(now)
        return {
            "kernel_filter": self.filter_attached,
            "dropped": dict(self.counters),
            "refused": dict(self.refusals),
            "sources_tracked": len(self._budgets),
            "sources_throttled": len(throttled),
            "throttled": sorted(throttled)[:8],
        }
