"""The shipped example configuration, installed with a fresh private key file.

The example carries no usable key (issue 25 item 7); tests that load it copy it
next to a ``fleet.keys`` made the way docs/deploy.md says (``meshsubctl genkey``).
"""

from __future__ import annotations

import os
from pathlib import Path

from meshsub.wire.keys import new_key

EXAMPLE = Path(__file__).resolve().parents[2] / "deploy" / "meshsub.toml.example"


def install_example(directory: Path) -> Path:
    """``directory/meshsub.toml`` (the example) beside ``directory/fleet.keys`` (0400)."""
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "meshsub.toml"
    config.write_text(EXAMPLE.read_text())
    keys = directory / "fleet.keys"
    fd = os.open(keys, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o400)
    with os.fdopen(fd, "w") as fh:
        fh.write(f"1 {new_key()}\n")
    return config
