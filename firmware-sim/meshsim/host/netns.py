"""Network namespaces by name: the one fact both the medium and the devices ask about."""

from __future__ import annotations

from pathlib import Path

NETNS_DIR = Path("/run/netns")


def netns_exists(name: str) -> bool:
    return (NETNS_DIR / name).exists()
