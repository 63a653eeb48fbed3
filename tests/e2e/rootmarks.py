"""The marks of a root end-to-end test on network namespaces with real mosquitto: one
place for what every such test module needs (``pytestmark = namespace_marks()``)."""

from __future__ import annotations

import os
import shutil

import pytest


def namespace_marks(*tools: str) -> list[pytest.MarkDecorator]:
    """``root``, skipped without root or without the mosquitto clients, nft and ``tools``."""
    needed = ("mosquitto_pub", "mosquitto_sub", "nft", *tools)
    return [
        pytest.mark.root,
        pytest.mark.skipif(os.geteuid() != 0,
                           reason="needs root (network namespaces, nftables)"),
        pytest.mark.skipif(not all(shutil.which(t) for t in needed),
                           reason=f"needs {', '.join(needed)}"),
    ]
