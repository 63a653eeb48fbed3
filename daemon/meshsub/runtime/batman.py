"""batman-adv mode: physical neighbours and their addresses from batctl's JSON tables.

On bat0, batman routes at layer 2 and a broadcast floods the whole mesh
(three times per Wi-Fi frame at the lowest rate), so beacons must not be
broadcast there. Instead we read who is one radio hop away and unicast
beacons to them:

* ``originators_json`` (``oj``): originators whose best next hop is the
  originator itself are one hop away (``tq`` in BATMAN_IV, ``throughput``
  in BATMAN_V);
* ``neighbors_json`` (``nj``): confirms the physical neighbour and its hard
  interface;
* ``transtable_global_json`` (``tgj``): the MAC addresses a remote
  originator announces (its bat0 MAC among them), which give the IPv6
  link-local address (EUI-64) ...
* ``dat_cache_json`` (``dcj``): ... or the IPv4 address via batman's
  distributed ARP table.

Field names follow batctl's documentation (``batctl meshif bat0 nj`` etc.).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from meshsub.runtime import boundedjson

log = logging.getLogger(__name__)

MAC_RE = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")
MAX_DEPTH = 8
"""batctl's tables are arrays of flat objects: anything deeper is not batctl."""


class BatctlError(RuntimeError):
    """batctl is missing, failed, or printed something that is not its JSON."""


@dataclass(frozen=True, slots=True)
class BatmanNeighbor:
    address: str
    hard_ifname: str
    last_seen_ms: int
    throughput_kbps: int | None = None


@dataclass(frozen=True, slots=True)
class BatmanOriginator:
    originator: str
    next_hop: str
    hard_ifname: str
    last_seen_ms: int
    tq: int | None = None
    throughput_kbps: int | None = None
    best: bool = False


@dataclass(frozen=True, slots=True)
class BatmanCandidate:
    """A one-hop batman neighbour and the IP addresses we can unicast beacons to."""

    originator: str
    hard_ifname: str
    last_seen_ms: int
    tq: int | None
    throughput_kbps: int | None
    mesh_macs: tuple[str, ...]
    addresses: tuple[str, ...]

    @property
    def link_quality(self) -> float | None:
        """batman's own estimate in 0..1 (TQ / 255), when BATMAN_IV provides one."""
        return None if self.tq is None else self.tq / 255.0


def _rows(text: str, what: str) -> list[Any]:
    try:
        data = boundedjson.loads(text, max_depth=MAX_DEPTH)
    except ValueError as exc:
        raise BatctlError(f"{what}: not JSON ({exc})") from None
    if not isinstance(data, list):
        raise BatctlError(f"{what}: expected a JSON array, got {type(data).__name__}")
    return data


def _mac(value: Any) -> str | None:
    if isinstance(value, str) and MAC_RE.match(value.lower()):
        return value.lower()
    return None


def _uint(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def parse_neighbors(text: str, counters: Counter[str] | None = None) -> list[BatmanNeighbor]:
    """``batctl meshif bat0 neighbors_json``; malformed rows are skipped and counted."""
    counters = counters if counters is not None else Counter()
    out = []
    for row in _rows(text, "neighbors_json"):
        if not isinstance(row, dict):
            counters["bad_neighbor_row"] += 1
            continue
        mac, seen = _mac(row.get("neigh_address")), _uint(row.get("last_seen_msecs"))
        if mac is None or seen is None:
            counters["bad_neighbor_row"] += 1
            continue
        out.append(BatmanNeighbor(mac, str(row.get("hard_ifname", "")), seen,
                                  _uint(row.get("throughput"))))
    return out


def parse_originators(text: str, counters: Counter[str] | None = None) -> list[BatmanOriginator]:
    """``batctl meshif bat0 originators_json``; malformed rows are skipped and counted."""
    counters = counters if counters is not None else Counter()
    out = []
    for row in _rows(text, "originators_json"):
        if not isinstance(row, dict):
            counters["bad_originator_row"] += 1
            continue
        orig, hop = _mac(row.get("orig_address")), _mac(row.get("neigh_address"))
        seen = _uint(row.get("last_seen_msecs"))
        if orig is None or hop is None or seen is None:
            counters["bad_originator_row"] += 1
            continue
        tq = _uint(row.get("tq"))
        out.append(BatmanOriginator(orig, hop, str(row.get("hard_ifname", "")), seen,
                                    tq if tq is None or tq <= 255 else None,
                                    _uint(row.get("throughput")), row.get("best") is True))
    return out


def parse_translation_global(text: str, counters: Counter[str] | None = None
                             ) -> dict[str, set[str]]:
    """``transtable_global_json`` -> originator -> the unicast MACs it announces."""
    counters = counters if counters is not None else Counter()
    out: dict[str, set[str]] = {}
    for row in _rows(text, "transtable_global_json"):
        if not isinstance(row, dict):
            counters["bad_tt_row"] += 1
            continue
        client, orig = _mac(row.get("tt_address")), _mac(row.get("orig_address"))
        if client is None or orig is None:
            counters["bad_tt_row"] += 1
            continue
        if int(client[:2], 16) & 1 or row.get("best") is not True:
            continue  # multicast listener entries, or a non-best duplicate
        out.setdefault(orig, set()).add(client)
    return out


def parse_dat_cache(text: str, counters: Counter[str] | None = None) -> dict[str, str]:
    """``dat_cache_json`` -> MAC -> IPv4 address (batman's distributed ARP table)."""
    counters = counters if counters is not None else Counter()
    out: dict[str, str] = {}
    for row in _rows(text, "dat_cache_json"):
        mac = _mac(row.get("dat_cache_hwaddress")) if isinstance(row, dict) else None
        ip = row.get("dat_cache_ip4address") if isinstance(row, dict) else None
        try:
            if mac is None:
                raise ValueError
            out[mac] = str(ipaddress.IPv4Address(ip))
        except ValueError:
            counters["bad_dat_row"] += 1
    return out


def eui64_link_local(mac: str) -> str:
    """The fe80:: address the kernel derives from ``mac`` (addr_gen_mode eui64)."""
    octets = bytearray(bytes.fromhex(mac.replace(":", "")))
    octets[0] ^= 0x02
    iid = bytes(octets[:3]) + b"\xff\xfe" + bytes(octets[3:])
    return str(ipaddress.IPv6Address(b"\xfe\x80" + bytes(6) + iid))


def one_hop_candidates(
    neighbors: Iterable[BatmanNeighbor],
    originators: Iterable[BatmanOriginator],
    translation: dict[str, set[str]],
    dat: dict[str, str],
    *,
    family: str = "ipv4",
    max_last_seen_ms: int = 30_000,
) -> list[BatmanCandidate]:
    """Originators one radio hop away (best next hop is the originator itself and it is
    in the neighbour table), with the addresses we can reach them at."""
    physical = {n.address: n for n in neighbors if n.last_seen_ms <= max_last_seen_ms}
    out = []
    for o in originators:
        if not o.best or o.next_hop != o.originator or o.originator not in physical:
            continue
        if o.last_seen_ms > max_last_seen_ms:
            continue
        macs = tuple(sorted(translation.get(o.originator, ())))
        if family == "ipv6":
            addrs = tuple(eui64_link_local(m) for m in macs)
        else:
            addrs = tuple(sorted({dat[m] for m in (*macs, o.originator) if m in dat}))
        n = physical[o.originator]
        out.append(BatmanCandidate(o.originator, o.hard_ifname or n.hard_ifname, o.last_seen_ms,
                                   o.tq, o.throughput_kbps if o.throughput_kbps is not None
                                   else n.throughput_kbps, macs, addrs))
    return sorted(out, key=lambda c: c.originator)


def candidate_addresses(candidates: Iterable[BatmanCandidate], port: int
                        ) -> list[tuple[str, int]]:
    """``(address, port)`` of every resolved one-hop neighbour: the unicast targets
    for beacons (``Discovery.set_peers("batman", ...)``) and for one-hop
    "broadcasts" (``Link.set_one_hop_peers``)."""
    return sorted({(a, port) for c in candidates for a in c.addresses})


Runner = Callable[[list[str]], Awaitable[str]]


async def run_batctl(args: list[str], timeout: float = 5.0) -> str:
    """Run batctl; ``BatctlError`` with a one-line reason on any failure."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    except FileNotFoundError:
        raise BatctlError(f"{args[0]} not found: install batctl (apt install batctl)") from None
    try:
        async with asyncio.timeout(timeout):  # unlike wait_for, never swallows a cancel
            out, err = await proc.communicate()
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        raise BatctlError(f"{' '.join(args)}: timed out after {timeout}s") from None
    if proc.returncode != 0:
        first = (err or out).decode(errors="replace").strip().splitlines()
        raise BatctlError(f"{' '.join(args)}: exit {proc.returncode}: "
                          f"{first[0] if first else 'no output'}")
    return out.decode(errors="replace")


class BatmanPoller:
    """Polls batctl every ``interval`` s and reports the one-hop candidates."""

    TABLES = ("neighbors_json", "originators_json", "transtable_global_json", "dat_cache_json")

    def __init__(
        self,
        *,
        mesh_interface: str = "bat0",
        family: str = "ipv4",
        interval: float = 5.0,
        on_candidates: Callable[[list[BatmanCandidate]], None],
        runner: Runner = run_batctl,
        batctl: str = "batctl",
    ) -> None:
        self.mesh_interface = mesh_interface
        self.family = family
        self.interval = interval
        self._on_candidates = on_candidates
        self._runner = runner
        self._batctl = batctl
        self.candidates: list[BatmanCandidate] = []
        self.counters: Counter[str] = Counter()
        self.last_error: str | None = None
        self._task: asyncio.Task[None] | None = None

    async def _table(self, name: str) -> str:
        return await self._runner([self._batctl, "meshif", self.mesh_interface, name])

    async def poll_once(self) -> list[BatmanCandidate]:
        """Read the four tables and compute the candidates (raises ``BatctlError``)."""
        texts = [await self._table(name) for name in self.TABLES]
        neighbors = parse_neighbors(texts[0], self.counters)
        originators = parse_originators(texts[1], self.counters)
        translation = parse_translation_global(texts[2], self.counters)
        dat = parse_dat_cache(texts[3], self.counters) if self.family == "ipv4" else {}
        self.candidates = one_hop_candidates(neighbors, originators, translation, dat,
                                             family=self.family)
        self.counters["polls"] += 1
        self.counters["unresolved"] = sum(1 for c in self.candidates if not c.addresses)
        return self.candidates

    async def _run(self) -> None:
        while True:
            try:
                candidates = await self.poll_once()
            except BatctlError as exc:
                self.counters["errors"] += 1
                if str(exc) != self.last_error:
                    log.warning("batman tables unavailable: %s", exc)
                self.last_error = str(exc)
            except Exception as exc:  # output nobody foresaw must not end the poller
                self.counters["errors"] += 1
                if f"bug: {exc}" != self.last_error:
                    log.exception("batman tables could not be read")
                self.last_error = f"bug: {exc}"
            else:
                self.last_error = None
                self._on_candidates(candidates)
            await asyncio.sleep(self.interval)

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="batman-poll")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def status(self) -> dict[str, Any]:
        return {
            "mesh_interface": self.mesh_interface,
            "last_error": self.last_error,
            "counters": dict(self.counters),
            "one_hop": [
                {"originator": c.originator, "tq": c.tq, "throughput_kbps": c.throughput_kbps,
                 "last_seen_ms": c.last_seen_ms, "addresses": list(c.addresses)}
                for c in self.candidates
            ],
        }
