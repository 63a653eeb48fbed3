"""``spark-submit`` entry point: the same job as the ``mesheval`` command.

    spark-submit --master spark://HOST:7077 telemetry/mesheval/job.py RUNDIR... --out REPORTDIR

Run as a script from a checkout, it appends the checkout's ``telemetry`` and
``daemon`` folders to ``sys.path`` (an installed or ``--py-files`` copy wins);
the session then ships ``meshsub`` and ``mesheval`` to the executors itself
(``mesheval.session.ship_packages``).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):
    _here = Path(__file__).resolve().parent
    # the script's own folder must not shadow anything by module name
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    for _root in (_here.parent, _here.parent.parent / "daemon"):
        if _root.is_dir() and str(_root) not in sys.path:
            sys.path.append(str(_root))

from mesheval.cli import main

if __name__ == "__main__":
    sys.exit(main())
