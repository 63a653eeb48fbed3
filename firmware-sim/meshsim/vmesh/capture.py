"""Packet capture on the medium: what one device's radio actually received.

``tcpdump`` runs in the medium's namespace on the device's bridge port, direction
``out`` (bridge to device), so it records only frames the medium let through to
that device, after the verdict map. The pcap can be read back here (frames per
source MAC) or with any tool.
"""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

from meshsim.host.errors import VmeshError

_SRC = re.compile(r"^\S+\s+([0-9a-f]{2}(?::[0-9a-f]{2}){5})\s+>", re.M)


class Capture:
    """``with Capture(netns, port, path):`` records frames delivered out of ``port``."""

    def __init__(self, netns: str, port: str, path: Path) -> None:
        self.netns, self.port, self.path = netns, port, path
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 10.0) -> None:
        self.proc = subprocess.Popen(
            # --immediate-mode: else the kernel hands tcpdump its ring a block at a time
            # (full, or after ~1 s) and the block open at stop() is never written
            ["ip", "netns", "exec", self.netns, "tcpdump", "-i", self.port, "-Q", "out",
             "--immediate-mode", "-U", "-n", "-w", str(self.path)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout_s
        while not self.path.exists():  # tcpdump creates the file once it listens
            if self.proc.poll() is not None or time.monotonic() > deadline:
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr \
                    else ""
                self.stop()
                raise VmeshError(f"tcpdump on {self.netns}/{self.port} did not start: "
                                 f"{err.strip()[-200:]}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # flushes and closes the file
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        with contextlib.suppress(ValueError, OSError):
            if self.proc.stderr is not None:
                self.proc.stderr.close()
        self.proc = None

    def __enter__(self) -> Capture:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def frames_by_source(pcap: Path) -> Counter[str]:
    """Frames in ``pcap`` per source MAC (lower-case)."""
    res = subprocess.run(["tcpdump", "-r", str(pcap), "-e", "-n"], capture_output=True,
                         text=True, check=False, timeout=120)
    if res.returncode != 0:
        raise VmeshError(f"cannot read {pcap}: {res.stderr.strip()[-200:]}")
    return Counter(m.group(1).lower() for m in _SRC.finditer(res.stdout))
