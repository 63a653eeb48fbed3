"""``spark-submit`` entry point: the same sweep as ``meshsim sweep ... --spark MASTER``.

    spark-submit --master spark://HOST:7077 firmware-sim/meshsim/sweep/job.py \\
        SWEEP.toml --out DIR [--only TEXT] [--seeds N]

The master, executor memory and cores come from spark-submit's options; every simulated
point becomes a task of that session (``meshsim.sweep.cluster``). Run as a script from a
checkout, it appends the checkout's ``firmware-sim`` and ``daemon`` folders to
``sys.path`` (an installed or ``--py-files`` copy wins); the driver then ships its
``meshsub`` and ``meshsim`` to the executors itself.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    _here = Path(__file__).resolve().parent
    # the script's own folder must not shadow anything by module name (spec, points, ...)
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    for _root in (_here.parent.parent, _here.parent.parent.parent / "daemon"):
        if _root.is_dir() and str(_root) not in sys.path:
            sys.path.append(str(_root))

from meshsim.cli import main

if __name__ == "__main__":
    sys.exit(main(["sweep", *sys.argv[1:]]))
