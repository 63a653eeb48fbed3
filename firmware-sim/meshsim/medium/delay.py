"""Per-pair delay on the virtual mesh: NFQUEUE plus a userspace delayer.

This kernel has no ``tc netem``, and nftables' ``queue`` statement is not built
in (no CONFIG_NFT_QUEUE), so delay takes the measured LESSONS route: with
``net.bridge.bridge-nf-call-iptables`` on in the medium's netns, bridged IP
frames traverse iptables' FORWARD chain, where one rule queues every frame
carrying a mark to the delayer (``meshsim.medium.delayer``). The nftables medium
sets that mark per directed pair to the pair's delay in µs (``render_forward``).
Only IP/IPv6 frames are delayed: br_netfilter passes nothing else to iptables,
so ARP is not delayed (documented in docs/medium.md).

Everything here lives in the medium's own netns: the chain ``MSUB-DELAY``, the
jump to it, the sysctls and the process; ``stop`` undoes exactly those.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from meshsim.host import sh
from meshsim.host.errors import VmeshError
from meshsim.medium.errors import MediumError
from meshsim.radio import pair_delays
from meshsim.scenario.model import Radio

QUEUE = 0x4D53  # "MS"; queue numbers are per netns, so one per medium is enough
CHAIN = "MSUB-DELAY"
SYSCTLS = ("net.bridge.bridge-nf-call-iptables", "net.bridge.bridge-nf-call-ip6tables")
MAX_DELAY_S = 60.0
"""Longer holds would need a queue longer than any test traffic justifies."""


@dataclass(frozen=True)
class DelayConfig:
    """Hop delay of every directed pair: ``default_s`` unless ``pairs`` says otherwise."""

    default_s: float = 0.0
    pairs: Mapping[tuple[int, int], float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for where, value in [("default", self.default_s), *self.pairs.items()]:
            if not (isinstance(value, int | float) and math.isfinite(value)
                    and 0.0 <= value <= MAX_DELAY_S):
                raise MediumError(f"delay of {where} must be 0..{MAX_DELAY_S:g} s, "
                                  f"got {value!r}")

    @property
    def active(self) -> bool:
        return self.default_s > 0 or any(d > 0 for d in self.pairs.values())


def delay_config(radio: Radio) -> DelayConfig | None:
    """What a scenario asks the virtual mesh for: None unless ``radio.vmesh_delay``."""
    if not radio.vmesh_delay:
        return None
    return DelayConfig(radio.delay_s, pair_delays(radio.links))


@dataclass
class DelayStats:
    """The delayer's counts over its life; ``by_mark``: packets per delay in µs."""

    held: int
    released: int
    max_held: int
    by_mark: dict[int, int]


class Delayer:
    """The delayer process and the iptables rules that feed it, in one netns."""

    def __init__(self, netns: str, queue: int = QUEUE, max_len: int = 16384,
                 python: str = sys.executable) -> None:
        if not 0 <= queue <= 65535 or max_len < 1:
            raise MediumError(f"bad NFQUEUE {queue} / length {max_len}: 0..65535 and >= 1")
        self.netns = netns
        self.python = python
        self.queue = queue
        self.max_len = max_len
        self._proc: subprocess.Popen[str] | None = None
        self._sysctl_before: dict[str, str] = {}
        self._stderr: list[str] = []

    # ----------------------------------------------------------------- commands

    def _ns(self, *cmd: str, check: bool = True) -> str:
        try:
            return sh.out(["ip", "netns", "exec", self.netns, *cmd], check=check)
        except VmeshError as exc:
            raise MediumError(f"delay in {self.netns}: {exc}") from None

    def _rules(self, add: bool) -> None:
        for tool in ("iptables", "ip6tables"):
            has_jump = sh.ok(["ip", "netns", "exec", self.netns, tool, "-w", "-C", "FORWARD",
                              "-j", CHAIN])
            has_chain = sh.ok(["ip", "netns", "exec", self.netns, tool, "-w", "-n", "-L",
                               CHAIN])
            if add:
                if not has_chain:
                    self._ns(tool, "-w", "-N", CHAIN)
                self._ns(tool, "-w", "-F", CHAIN)
                self._ns(tool, "-w", "-A", CHAIN, "-m", "mark", "!", "--mark", "0",
                         "-j", "NFQUEUE", "--queue-num", str(self.queue))
                if not has_jump:
                    self._ns(tool, "-w", "-I", "FORWARD", "1", "-j", CHAIN)
            else:
                if has_jump:
                    self._ns(tool, "-w", "-D", "FORWARD", "-j", CHAIN)
                if has_chain:
                    self._ns(tool, "-w", "-F", CHAIN)
                    self._ns(tool, "-w", "-X", CHAIN)

    # ---------------------------------------------------------------- lifecycle

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def check(self) -> None:
        """Raise if the delayer died: queued frames would be dropped, not delayed."""
        if self._proc is not None and self._proc.poll() is not None:
            why = " | ".join(self._stderr[-3:]) or "no message"
            raise MediumError(f"the NFQUEUE delayer in {self.netns} exited with status "
                              f"{self._proc.returncode}: {why}")

    def start(self) -> None:
        """Start the process, then queue marked frames to it (never to an unbound queue)."""
        if self.running:
            return
        for key in SYSCTLS:
            self._sysctl_before[key] = self._ns("sysctl", "-n", key).strip()
        cmd = ["ip", "netns", "exec", self.netns, self.python, "-m",
               "meshsim.medium.delayer", "--queue", str(self.queue),
               "--max-len", str(self.max_len)]
        self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True)
        reader = threading.Thread(target=self._read_stderr, daemon=True)
        reader.start()
        assert self._proc.stdout is not None
        first = self._proc.stdout.readline().strip()  # "ready", or EOF if it failed
        if first != "ready":
            self._proc.wait(timeout=10)
            self._proc.stdout.close()
            reader.join(timeout=5)  # its last words are the error message
            try:
                self.check()
                raise MediumError(f"the NFQUEUE delayer in {self.netns} did not start: "
                                  f"{first!r}")
            finally:
                self._proc = None  # nothing left to stop
                self._sysctl_before.clear()
        try:
            for key in SYSCTLS:
                self._ns("sysctl", "-qw", f"{key}=1")
            self._rules(add=True)
        except MediumError:
            self.stop()  # no half-started delay: rules, sysctls and process go again
            raise

    def _read_stderr(self) -> None:
        proc = self._proc
        if proc is None or proc.stderr is None:
            return
        with proc.stderr:
            for line in proc.stderr:
                self._stderr.append(line.strip())

    def stop(self) -> DelayStats | None:
        """Stop queueing, then the process (it releases what it holds); its counts."""
        self._rules(add=False)
        for key, value in self._sysctl_before.items():
            self._ns("sysctl", "-qw", f"{key}={value}", check=False)
        self._sysctl_before.clear()
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise MediumError(f"the NFQUEUE delayer in {self.netns} did not stop; "
                              "killed") from None
        assert proc.stdout is not None
        out = proc.stdout.read()
        proc.stdout.close()
        try:
            counts = json.loads(out.strip().splitlines()[-1])
            return DelayStats(counts["held"], counts["released"], counts["max_held"],
                              {int(k): v for k, v in counts["by_mark"].items()})
        except (ValueError, IndexError, KeyError, AttributeError):
            return None
