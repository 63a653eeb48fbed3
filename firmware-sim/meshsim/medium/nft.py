"""The nftables script of the medium: pure rendering, and one ``nft -f`` to apply it.

Layout (a bridge-family table in the medium's netns):

    table bridge msub_medium {
        map links  { type ifname . ifname : verdict; }   # (ingress port, egress port)
        map delays { type ifname . ifname : mark; }      # per-pair delay in µs (NFQUEUE)
        chain loss01 { numgen random mod 100 < 1 drop; accept; }   ... loss99
        chain forward { type filter hook forward priority filter; policy drop;
                        [meta mark set <default µs>]
                        [meta mark set iifname . oifname map @delays]
                        iifname . oifname vmap @links }
    }

A frame from node a to node b enters the bridge on a's port and leaves on b's,
so the key ``"n<a>" . "n<b>"`` is the directed pair: asymmetric links need
nothing special. The bridge floods a broadcast to every port and the forward
hook runs once per egress port, with its own ``numgen`` draw: each receiver
loses a broadcast independently, as on a radio. No entry means no link (the
policy drops), so an empty map is a deaf medium and no intermediate state of an
update can open a pair that neither the old nor the new map opens.

Loss is quantised to ``LOSS_STEP`` (1 %): 99 chains, rounding error <= 0.5
percentage points, below what a test can resolve with fewer than ~10,000
frames (the binomial standard error at p = 0.5 is 0.5 points there).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import TypeVar

from meshsim.host import sh
from meshsim.host.errors import VmeshError
from meshsim.medium.errors import MediumError
from meshsim.radio import LINK_CUTOFF, LOSS_STEP

TABLE = "msub_medium"
CHUNK = 2000
"""Elements per ``add element`` statement: ~2,300 in one statement overflowed
netlink's buffer ("No buffer space available", LESSONS); several statements of
<= 2,000 in one file are still one transaction."""
CLASSES = round(1 / LOSS_STEP)  # 100: loss classes 1..99 drop numgen < k out of 100
MAX_MARK = 2**32 - 1

V = TypeVar("V")

_IFNAME = re.compile(r"[A-Za-z0-9_.-]{1,15}")
_TABLE = re.compile(r"msub[a-z0-9_]{0,28}")


def check_ifname(name: str) -> str:
    """An interface name safe to quote in nft (Linux allows 15 bytes)."""
    if not _IFNAME.fullmatch(name):
        raise MediumError(f"bad interface name {name!r}: 1-15 of [A-Za-z0-9_.-]")
    return name


def check_table(name: str) -> str:
    if not _TABLE.fullmatch(name):
        raise MediumError(f"bad table name {name!r}: 'msub' then up to 28 of [a-z0-9_]")
    return name


def loss_class(loss: float) -> int | None:
    """0 (accept), 1..99 (chain lossNN) or None (no link) for a loss probability."""
    if not (isinstance(loss, int | float) and 0.0 <= loss <= 1.0):
        raise MediumError(f"loss must be a probability in [0, 1], got {loss!r}")
    if loss >= LINK_CUTOFF:
        return None
    return math.floor(loss * CLASSES + 0.5)


def _verdict(cls: int) -> str:
    return "accept" if cls == 0 else f"jump loss{cls:02d}"


def render_install(table: str = TABLE) -> str:
    """The whole table, replacing any previous one atomically; the link map is empty."""
    check_table(table)
    lines = [f"add table bridge {table}", f"delete table bridge {table}",
             f"table bridge {table} {{",
             "  map links { type ifname . ifname : verdict; }",
             "  map delays { type ifname . ifname : mark; }"]
    lines += [f"  chain loss{k:02d} {{ numgen random mod {CLASSES} < {k} drop; accept; }}"
              for k in range(1, CLASSES)]
    lines += ["  chain forward {",
              "    type filter hook forward priority filter; policy drop;",
              "    iifname . oifname vmap @links",
              "  }", "}"]
    return "\n".join(lines) + "\n"


def _port_pairs(values: Mapping[tuple[int, int], V], ports: Mapping[int, str]
                ) -> list[tuple[str, str, V]]:
    for name in set(ports.values()):
        check_ifname(name)
    out = []
    for (a, b), value in sorted(values.items()):
        if a == b:
            raise MediumError(f"a link needs two different nodes, got ({a}, {b})")
        try:
            out.append((ports[a], ports[b], value))
        except KeyError as exc:
            raise MediumError(f"no medium port for node {exc.args[0]}") from None
    return out


def _elements(table: str, name: str, items: Iterable[str]) -> list[str]:
    items = list(items)
    return [f"add element bridge {table} {name} {{ " + ", ".join(items[i:i + CHUNK]) + " }"
            for i in range(0, len(items), CHUNK)]


def render_links(losses: Mapping[tuple[int, int], float], ports: Mapping[int, str],
                 table: str = TABLE) -> tuple[str, int]:
    """Replace the link map by ``{(sender, receiver): loss}``; returns (script, entries).

    Pairs whose loss rounds to 1 are left out (no link); the rest map to accept or
    to their loss class.
    """
    check_table(table)
    entries = []
    for src, dst, loss in _port_pairs(losses, ports):
        cls = loss_class(loss)
        if cls is not None:
            entries.append(f'"{src}" . "{dst}" : {_verdict(cls)}')
    lines = [f"flush map bridge {table} links", *_elements(table, "links", entries)]
    return "\n".join(lines) + "\n", len(entries)


def delay_mark(delay_s: float) -> int:
    """The packet mark that asks the delayer to hold a frame: the delay in µs."""
    if not (isinstance(delay_s, int | float) and math.isfinite(delay_s) and delay_s >= 0):
        raise MediumError(f"delay must be a number of seconds >= 0, got {delay_s!r}")
    mark = round(delay_s * 1e6)
    if mark > MAX_MARK:
        raise MediumError(f"delay {delay_s:g} s is too long (at most {MAX_MARK / 1e6:g} s)")
    return mark


def render_forward(default_s: float = 0.0, pairs: Mapping[tuple[int, int], float] | None = None,
                   ports: Mapping[int, str] | None = None, table: str = TABLE) -> str:
    """The forward chain and the delay map, with or without delay marks, in one go.

    Marks are set before the verdict map (which ends evaluation); a pair missing from
    ``delays`` keeps the default mark (a map miss leaves the mark alone).
    """
    check_table(table)
    pairs = pairs or {}
    default = delay_mark(default_s)
    rules = []
    if default:
        rules.append(f"meta mark set {default}")
    entries = [f'"{src}" . "{dst}" : {delay_mark(d)}'
               for src, dst, d in _port_pairs(pairs, ports or {})]
    if entries:
        rules.append("meta mark set iifname . oifname map @delays")
    rules.append("iifname . oifname vmap @links")
    lines = [f"flush chain bridge {table} forward",
             *(f"add rule bridge {table} forward {rule}" for rule in rules),
             f"flush map bridge {table} delays", *_elements(table, "delays", entries)]
    return "\n".join(lines) + "\n"


def render_remove(table: str = TABLE) -> str:
    return f"delete table bridge {check_table(table)}\n"


def apply(netns: str, script: str) -> None:
    """Run ``script`` as one ``nft -f`` transaction inside ``netns`` (all or nothing)."""
    try:
        sh.run(["ip", "netns", "exec", netns, "nft", "-f", "-"], input_data=script.encode(),
               timeout=120.0)
    except VmeshError as exc:
        raise MediumError(f"nft in {netns}: {exc}") from None


def table_exists(netns: str, table: str = TABLE) -> bool:
    return sh.ok(["ip", "netns", "exec", netns, "nft", "list", "table", "bridge",
                  check_table(table)])
