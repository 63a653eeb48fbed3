"""BRVST's traffic over a run, window by window: which messages grow, and why (issue 18).

For each RUNDIR (a brvst-400 run of ``meshsim simulate ... --telemetry-format parquet``;
node files are refused with one line and exit 2) this prints, per ``--window`` seconds
of simulated time:

- transmissions per second, by message type (ACK is the core's per-hop acknowledgement);
- ``old``: the transmissions of PUB_GRID, PUB_ZONE and DELIVER whose publication was
  published more than ``--old`` seconds before (copies a zone manager's cache sent again:
  a fresh publication's legs end within seconds, so these are replays, §IV-D);
- ``gm+``/``zm+``: grid and zone managers that took office (``broker`` records), and
  ``dup``: DELIVERs a subscriber dropped as already delivered (``duplicate_deliver``).

Nothing is simulated here: the runs are read as they are, so two runs of one seed (the
same plan, another code) compare window by window; deliveries and CPU time of the same
set-up come from ``bench/bench_brvst.py``. Reads the run's ``telemetry.parquet`` (only the
columns and events it needs: a run is millions of records).

    python bench/brvst_traffic.py RUNDIR [RUNDIR ...] [--window 30] [--old 30]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from meshsim.telemetry_parquet import PARQUET_FILE
from meshsub.core.api import CoreType
from meshsub.protocols.brvst import messages as m

REPLAYED = (m.PUB_GRID, m.PUB_ZONE, m.DELIVER)
"""Message types that carry a publication downwards (the ones a cache replay sends)."""
SHOWN = ("ACK", "ANNOUNCE", "SUBSCRIBE", "GRSV_UPDATE", "ZRSV_UPDATE", "SUB_HISTORY",
         "PUB_GRID", "PUB_ZONE", "DELIVER")
"""Columns printed by name; every other type is summed into ``other``."""
LABELS = {"from_s": "from s", "ANNOUNCE": "ANN", "SUBSCRIBE": "SUB", "GRSV_UPDATE": "GRSV",
          "ZRSV_UPDATE": "ZRSV", "SUB_HISTORY": "HIST", "PUB_GRID": "P_GRID",
          "PUB_ZONE": "P_ZONE", "DELIVER": "DELIV"}
"""Short column heads (the legend is printed under the table)."""


def type_name(msg_type: int | None) -> str:
    if msg_type == CoreType.ACK:
        return "ACK"
    return m.NAMES.get(msg_type, "?") if msg_type is not None else "?"


def windows(parquet: Path, window: float, old: float) -> list[dict[str, float]]:
    """One row per window: transmissions per second by type, and the counts above."""
    import pyarrow.parquet as pq

    cols = ["ts_ns", "event", "msg_type", "event_id", "role", "reason", "count"]
    table = pq.read_table(parquet, columns=cols, filters=[
        ("event", "in", ["tx", "publish", "broker", "drop"])])
    df = table.to_pandas()
    df["w"] = (df.ts_ns // int(window * 1e9)).astype(int)
    tx = df[df.event == "tx"]
    by_type = tx.groupby(["w", "msg_type"]).size()
    published = df[df.event == "publish"].set_index("event_id").ts_ns
    copies = tx[tx.msg_type.isin(REPLAYED)]
    age_ns = copies.ts_ns - copies.event_id.map(published)
    replays = copies[age_ns > old * 1e9].groupby("w").size()
    brokers = df[df.event == "broker"].groupby(["w", "role"]).size()
    dups = df[(df.event == "drop") & (df.reason == "duplicate_deliver")]
    dup = dups.assign(n=dups["count"].fillna(1)).groupby("w").n.sum()
    rows = []
    for w in sorted(set(df.w)):
        per = {type_name(int(t)): int(n) for (ww, t), n in by_type.items() if ww == w}
        total = sum(per.values())
        row: dict[str, float] = {"from_s": w * window, "all": total / window}
        for name in SHOWN:
            row[name] = per.get(name, 0) / window
        row["other"] = (total - sum(per.get(name, 0) for name in SHOWN)) / window
        row["old"] = int(replays.get(w, 0)) / window
        row["gm+"] = int(brokers.get((w, "grid_manager"), 0))
        row["zm+"] = int(brokers.get((w, "zone_manager"), 0))
        row["dup"] = int(dup.get(w, 0))
        rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("rundirs", nargs="+", type=Path, metavar="RUNDIR")
    ap.add_argument("--window", type=float, default=30.0, help="seconds per row (30)")
    ap.add_argument("--old", type=float, default=30.0,
                    help="a copy of a publication older than this is a replay (30 s)")
    args = ap.parse_args()
    if not args.window > 0 or not args.old >= 0:
        ap.error("needs --window > 0 and --old >= 0")
    head = ["from_s", "all", *SHOWN, "other", "old", "gm+", "zm+", "dup"]
    for rundir in args.rundirs:
        parquet = rundir / PARQUET_FILE
        if not parquet.is_file():
            print(f"brvst_traffic: {rundir}: no {PARQUET_FILE} (run meshsim simulate with "
                  "--telemetry-format parquet)", file=sys.stderr)
            sys.exit(2)
        rows = windows(parquet, args.window, args.old)
        print(f"{rundir}: transmissions per second by {args.window:g} s window; old = "
              f"PUB_GRID, PUB_ZONE and DELIVER copies of publications older than "
              f"{args.old:g} s, per second")
        print(" ".join(f"{LABELS.get(h, h):>7}" for h in head))
        for row in rows:
            print(" ".join(f"{row[h]:>7,.0f}" for h in head))
        print("columns: " + ", ".join(f"{LABELS[h]} = {h}" for h in head if h in LABELS))


if __name__ == "__main__":
    main()
