"""Simulated GPS figures: CPU of the feeder per node-second, for 200 nodes at 1 Hz.

Run: ``.venv/bin/python bench/bench_gps.py [--nodes 200] [--seconds 20]`` (about
``seconds`` + 10 s). Prints a table; not a test.

Two measurements: ``compose`` alone (receiver model, sky, WGS84, NMEA; no
I/O) over back-to-back epochs, and a real wall-clock ``run`` at the receiver
rate that also sends every datagram over UDP (to a loopback sink that never
reads: the kernel drops what overflows, as it would for a missing gpsd) and
writes gps.jsonl. CPU is this process's user + system time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import resource
import socket
import tempfile
import time
from pathlib import Path

from meshsim.gps.feeder import GpsFeeder
from meshsim.gps.settings import GpsSettings
from meshsub.core.geo import LocalFrame


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def walker(node: int, t: float) -> tuple[float, float]:
    """Each node circles its own centre at 1.5 m/s (a position function as cheap as a lookup)."""
    angle = t * 1.5 / 50.0 + node
    return 500.0 + 50.0 * math.cos(angle) + node, 500.0 + 50.0 * math.sin(angle)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    settings = GpsSettings(enabled=True, noise_m=3.0, fix_loss_per_s=0.01)
    frame = LocalFrame(48.2082, 16.3738)
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.bind(("127.0.0.1", 0))
    targets = {n: ("127.0.0.1", sink.getsockname()[1]) for n in range(1, args.nodes + 1)}
    print(f"nodes = {args.nodes}, rate = {settings.rate_hz:g} Hz, noise {settings.noise_m:g} m "
          f"(Gauss-Markov {settings.correlation_s:g} s + white), fix loss "
          f"{settings.fix_loss_per_s:g}/s, {os.cpu_count()} CPUs")

    feeder = GpsFeeder(targets, frame, walker, settings, seed=1)
    epochs = 60
    start = cpu_s()
    size = 0
    for k in range(epochs):
        size += sum(len(d.data) for d in feeder.compose(float(k), 1_795_000_000.0 + k))
    compose_us = (cpu_s() - start) / (epochs * args.nodes) * 1e6
    print(f"{'compose only':<14} {compose_us:8.1f} us CPU per node-epoch, "
          f"{size / (epochs * args.nodes):.0f} bytes per datagram")

    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "gps.jsonl"
        feeder = GpsFeeder(targets, frame, walker, settings, seed=1, log_path=log)
        start, wall = cpu_s(), time.monotonic()
        stats = asyncio.run(feeder.run(until=args.seconds))
        used, wall = cpu_s() - start, time.monotonic() - wall
        node_s = stats.epochs * args.nodes / settings.rate_hz
        lines = log.read_text().splitlines()
        errors = [json.loads(ln)["err_m"] for ln in lines if '"fix":true' in ln]
    per_node_s = used / node_s * 1e6
    print(f"{'run (1 Hz)':<14} {per_node_s:8.1f} us CPU per node-second: "
          f"{used / wall * 100:.1f} % of one core for {args.nodes} nodes "
          f"({stats.epochs} epochs in {wall:.1f} s, {stats.late_epochs} late, "
          f"{stats.datagrams} datagrams, {sum(stats.send_errors.values())} send errors)")
    rms = math.sqrt(sum(e * e for e in errors) / len(errors))
    print(f"{'noise':<14} horizontal RMS {rms:.2f} m over {len(errors)} fixes "
          f"(expected sqrt(2) x {settings.noise_m:g} = {math.sqrt(2) * settings.noise_m:.2f}), "
          f"{stats.no_fixes} no-fix epochs of {stats.no_fixes + stats.fixes}")
    sink.close()


if __name__ == "__main__":
    main()
