"""Running host commands: every failure becomes a one-line ``VmeshError``.

The virtual mesh drives ``ip``, ``podman``, ``debootstrap`` and ``ssh-keygen``;
a failed command must name itself and its stderr, not raise a traceback.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Sequence

from meshsim.host.errors import VmeshError


def _tail(text: str, limit: int = 300) -> str:
    """The last meaningful line(s) of a command's stderr, flattened to one line."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    out = " | ".join(lines[-3:])
    return out if len(out) <= limit else "..." + out[-limit:]


def run(cmd: Sequence[str], *, check: bool = True, input_data: bytes | None = None,
        timeout: float | None = 600.0) -> subprocess.CompletedProcess[bytes]:
    """Run ``cmd``; with ``check`` a non-zero exit raises ``VmeshError``."""
    try:
        proc = subprocess.run(list(cmd), input=input_data, capture_output=True,
                              timeout=timeout, check=False)
    except FileNotFoundError as exc:
        raise VmeshError(f"{cmd[0]}: not installed (see scripts/apt-packages.txt)") from exc
    except subprocess.TimeoutExpired as exc:
        raise VmeshError(f"timed out after {timeout:g} s: {shlex.join(cmd)}") from exc
    if check and proc.returncode != 0:
        err = _tail(proc.stderr.decode(errors="replace") or proc.stdout.decode(errors="replace"))
        raise VmeshError(f"{shlex.join(cmd)}: exit {proc.returncode}: {err}")
    return proc


def out(cmd: Sequence[str], *, check: bool = True, timeout: float | None = 600.0) -> str:
    """Run ``cmd`` and return its stdout as text."""
    return run(cmd, check=check, timeout=timeout).stdout.decode(errors="replace")


def ok(cmd: Sequence[str], *, timeout: float | None = 120.0) -> bool:
    """True if ``cmd`` exits 0 (used for existence probes; never raises on failure)."""
    try:
        return run(cmd, check=False, timeout=timeout).returncode == 0
    except VmeshError:
        return False
