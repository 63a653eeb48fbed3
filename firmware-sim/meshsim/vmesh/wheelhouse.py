"""The wheelhouse the playbook installs from: the devices have no index to reach.

``pip wheel`` of this checkout (core dependencies only; the ``eval`` extra with Spark
never goes onto a device). Host and image are both bookworm / CPython 3.11, so the
binary wheels match. ``SOURCE_DATE_EPOCH`` keeps the meshsub wheel byte-identical
across rebuilds of unchanged sources, so the playbook's copy stays "ok".
"""

from __future__ import annotations

import sys
from pathlib import Path

from meshsim.host import sh

REPO_ROOT = Path(__file__).resolve().parents[3]
FIXED_EPOCH = "1700000000"


def build_wheelhouse(dest: Path, source: Path = REPO_ROOT) -> list[str]:
    """Build (or refresh) the wheels of ``source`` and its dependencies into ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    sh.run(["env", f"SOURCE_DATE_EPOCH={FIXED_EPOCH}", "PIP_DISABLE_PIP_VERSION_CHECK=1",
            sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", str(dest),
            str(source)], timeout=900)
    return sorted(p.name for p in dest.glob("*.whl"))
