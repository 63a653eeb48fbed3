"""Per-node bandwidth: an HTB rate limit on what a node transmits.

Shaping sits on the egress of the node's own ``mesh0`` (inside the node's netns),
not on its medium port: a radio serialises at the transmitter, and a broadcast
is one transmission however many neighbours hear it. Shaping the medium port
instead would limit what a node *receives* and would charge a broadcast once per
receiver. This is a per-node rate, not shared airtime: neighbours do not slow
each other down (docs/medium.md).

Only the root qdisc with this module's handle is ever replaced or removed. Once
that root exists, a new rate changes its class only: ``tc qdisc replace ... root
handle 4d53: htb`` over an existing HTB root of that handle asks the kernel to
*change* the qdisc, which HTB does not implement ("Change operation not supported
by specified qdisc", measured on this machine's kernel), so a second ``set_rate``
on a device, as when a later scenario reuses an earlier one's devices, must not
repeat it.
"""

from __future__ import annotations

import math
import re

from meshsim.host import sh
from meshsim.host.errors import VmeshError
from meshsim.medium.errors import MediumError
from meshsim.medium.nft import check_ifname

HANDLE = "4d53"  # "MS"
CLASS = f"{HANDLE}:1"
_UNITS = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_RATE = re.compile(r"\brate (\d+(?:\.\d+)?)([KMGT]?)bit\b")


def _tc(netns: str, *args: str, check: bool = True) -> str:
    try:
        return sh.out(["tc", "-n", netns, *args], check=check)
    except VmeshError as exc:
        raise MediumError(f"tc in {netns}: {exc}") from None


def set_rate(netns: str, dev: str, rate_bps: float) -> None:
    """Limit ``dev``'s egress to ``rate_bps`` (replaces our own earlier limit)."""
    check_ifname(dev)
    if not (isinstance(rate_bps, int | float) and math.isfinite(rate_bps) and rate_bps >= 8):
        raise MediumError(f"rate must be a number of bits per second >= 8, got {rate_bps!r}")
    rate = f"{round(rate_bps)}bit"
    if not _ours(netns, dev):  # a foreign root (or none) is replaced; ours is kept
        _tc(netns, "qdisc", "replace", "dev", dev, "root", "handle", f"{HANDLE}:", "htb",
            "default", "1")
    _tc(netns, "class", "replace", "dev", dev, "parent", f"{HANDLE}:", "classid", CLASS,
        "htb", "rate", rate, "ceil", rate)


def _ours(netns: str, dev: str) -> bool:
    out = _tc(netns, "qdisc", "show", "dev", dev)
    return any(line.startswith(f"qdisc htb {HANDLE}: root") for line in out.splitlines())


def clear_rate(netns: str, dev: str) -> bool:
    """Remove our limit from ``dev``; False if there was none (or not ours)."""
    check_ifname(dev)
    if not _ours(netns, dev):
        return False
    _tc(netns, "qdisc", "del", "dev", dev, "root", "handle", f"{HANDLE}:")
    return True


def read_rate(netns: str, dev: str) -> float | None:
    """The rate our limit on ``dev`` enforces, in bit/s; None without one."""
    check_ifname(dev)
    if not _ours(netns, dev):
        return None
    out = _tc(netns, "class", "show", "dev", dev, "classid", CLASS)
    match = _RATE.search(out)
    if match is None:
        raise MediumError(f"cannot read the HTB rate of {dev} in {netns}: {out.strip()!r}")
    return float(match.group(1)) * _UNITS[match.group(2)]


def overlimits(netns: str, dev: str) -> int:
    """How often our class had to hold a packet back (tc's ``overlimits``)."""
    out = _tc(netns, "-s", "class", "show", "dev", dev, "classid", CLASS)
    match = re.search(r"overlimits (\d+)", out)
    return int(match.group(1)) if match else 0
