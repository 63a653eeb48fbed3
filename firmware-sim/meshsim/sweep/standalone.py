"""A Spark standalone cluster on this host: one master and N workers on 127.0.0.1.

For tests and benches of the cluster paths (``meshsim sweep --spark``, ``mesheval
--master``): it runs the Spark distribution that ships inside the pyspark wheel
(``pyspark/bin/spark-class``; Java 17), binds every port to loopback, keeps logs, work
and scratch directories under one ``msub-spark-*`` temporary directory, and stops every
process it started (master, workers, their executors and Python workers: each daemon
is the leader of its own process group) when the ``with`` block ends, also on failure.
No root needed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

LOOPBACK = "127.0.0.1"


class ClusterError(RuntimeError):
    pass


@dataclass
class Cluster:
    master: str
    """``spark://127.0.0.1:PORT``"""
    ui: str
    """The master's web UI (its ``/json/`` lists the workers)."""
    directory: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        """Environment for a driver of this cluster (binds to loopback)."""
        return {**os.environ, "SPARK_LOCAL_IP": LOOPBACK,
                "SPARK_LOCAL_DIRS": str(self.directory / "local")}

    def alive_workers(self) -> int:
        with urllib.request.urlopen(f"{self.ui}/json/", timeout=5) as reply:
            doc = json.loads(reply.read())
        return sum(1 for w in doc.get("workers", []) if w.get("state") == "ALIVE")

    def logs(self) -> str:
        """The daemons' logs (for a failed test's report)."""
        parts = []
        for path in sorted((self.directory / "logs").glob("*.log")):
            parts.append(f"== {path.name}\n" + path.read_text(errors="replace")[-4000:])
        return "\n".join(parts)


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def _start(cluster: Cluster, name: str, args: list[str]) -> None:
    log = (cluster.directory / "logs" / f"{name}.log").open("wb")
    env = {**cluster.env(), "SPARK_HOME": str(spark_home()),
           "SPARK_LOG_DIR": str(cluster.directory / "logs"),
           "SPARK_WORKER_DIR": str(cluster.directory / "work"),
           "SPARK_NO_DAEMONIZE": "1"}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    process = subprocess.Popen([str(spark_home() / "bin" / "spark-class"), *args], env=env,
                               stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               start_new_session=True)
    log.close()
    cluster.processes.append(process)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Its whole process group (the JVM, executors it launched, their Python workers)."""
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        with suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            process.wait(timeout=wait)
            if sig == signal.SIGTERM:  # the leader is gone; sweep up the rest of its group
                with suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
            return
        except subprocess.TimeoutExpired:
            continue


def _stop_all(cluster: Cluster) -> None:
    for process in reversed(cluster.processes):
        _stop(process)


@contextmanager
def standalone_cluster(workers: int = 2, cores: int = 1, memory: str = "1g",
                       timeout_s: float = 90.0) -> Iterator[Cluster]:
    """A running cluster of ``workers`` workers of ``cores`` cores each; stopped on exit."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise ClusterError("no java on PATH and no JAVA_HOME (Spark needs Java 17)")
    directory = Path(tempfile.mkdtemp(prefix="msub-spark-"))
    for sub in ("logs", "work", "local"):
        (directory / sub).mkdir()
    port, ui_port = free_port(), free_port()
    cluster = Cluster(f"spark://{LOOPBACK}:{port}", f"http://{LOOPBACK}:{ui_port}", directory)
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, directory, True)
        stack.callback(_stop_all, cluster)
        _start(cluster, "master", ["org.apache.spark.deploy.master.Master", "--host", LOOPBACK,
                                   "--port", str(port), "--webui-port", str(ui_port)])
        for i in range(workers):
            _start(cluster, f"worker-{i + 1}", [
                "org.apache.spark.deploy.worker.Worker", "--host", LOOPBACK,
                "--port", str(free_port()), "--webui-port", str(free_port()),
                "--cores", str(cores), "--memory", memory,
                "--work-dir", str(directory / "work" / f"worker-{i + 1}"), cluster.master])
        deadline = time.monotonic() + timeout_s
        while True:
            dead = [" ".join(map(str, p.args)) for p in cluster.processes  # type: ignore[arg-type]
                    if p.poll() is not None]
            if dead:
                raise ClusterError(f"a Spark daemon exited early: {dead[0]}\n{cluster.logs()}")
            try:
                if cluster.alive_workers() >= workers:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise ClusterError(f"{workers} workers not registered within {timeout_s:.0f} s"
                                   f"\n{cluster.logs()}")
            time.sleep(0.5)
        yield cluster
