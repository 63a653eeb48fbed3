"""mesheval on a Spark standalone cluster, submitted as docs/evaluation.md tells a user.

The cluster is real (``spark_cluster``: a master and two one-core workers on loopback);
the command is the ``spark-submit`` line of docs/evaluation.md's "On a cluster" section,
read from the page, with its HOST:PORT, RUNDIR... and REPORTDIR filled in. Its
metrics.json must equal a local run's on the same run directories: the local run's is
``data/compare/metrics-before.json``, which test_eval_compare.py checks today's local
job against (not run again here: each evaluation costs tens of seconds of fixed cost).
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from evalcompare import DATA, differences, unpack_runs, without_node_count

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "evaluation.md"


def documented_command() -> list[str]:
    """The page's standalone ``spark-submit`` command (continuation lines joined)."""
    text = PAGE.read_text(encoding="utf-8").replace("\\\n", " ")
    found = re.search(r"^spark-submit --master spark://HOST:7077 .*$", text, re.MULTILINE)
    assert found, f"{PAGE} has no 'spark-submit --master spark://HOST:7077' command"
    return shlex.split(found.group(0))


def test_the_documented_spark_submit_on_a_standalone_cluster_gives_the_local_metrics(
        spark_cluster: Any, tmp_path: Path) -> None:
    rundirs = unpack_runs(tmp_path / "runs")
    local = json.loads((DATA / "metrics-before.json").read_text(encoding="utf-8").replace(
        "@RUNS@", str(tmp_path / "runs")))

    args: list[str] = []
    for word in documented_command():
        if word == "RUNDIR...":
            args += [str(p) for p in rundirs]
        elif word == "REPORTDIR":
            args.append(str(tmp_path / "cluster"))
        else:
            args.append(word.replace("spark://HOST:7077", spark_cluster.master))
    # the checkout's job.py and the venv's spark-submit (the pyspark wheel's launcher)
    args[0] = str(Path(sys.executable).parent / "spark-submit")
    args = [str(ROOT / a) if a == "telemetry/mesheval/job.py" else a for a in args]
    proc = subprocess.run([*args, "--no-report"], env=spark_cluster.env(), cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:] + spark_cluster.logs()
    remote = without_node_count(json.loads((tmp_path / "cluster" / "metrics.json").read_text(
        encoding="utf-8")))
    found = differences(local, remote)
    assert not found, "\n".join(found[:20])
    assert remote["runs"] and remote["inputs"] == [str(p) for p in rundirs]
