"""Benchmark: the Spark batch job (local[2]) against a single-process pandas computation.

Generates synthetic telemetry with a realistic mix (publish, subscribe/unsubscribe,
tx/rx per relay, deliver with late and duplicate copies, beacons, positions) at
several sizes, then times on the same records, in one run:

- before: the job of ``--before`` (default ``main``; its ``telemetry/mesheval`` taken
  with ``git archive``) on the JSON Lines, cold, in a child process (the job's own time,
  without the JVM's start);
- JSON Lines: today's job, cold (JSON Lines -> Parquet cache -> every metric): what a
  daemon-written run costs;
- Parquet: today's job on the same records as the simulator's columnar telemetry
  (``meshsim simulate --telemetry-format parquet``; converted with its writer's
  function, not timed), cold: what a simulated run costs;
- pandas: pyarrow reads the JSON Lines, pandas computes the delivery ratio only
  (ground truth with the same ``Subscription.matches``).

The delivery ratios of all four are printed, as a cross-check. Usage (one command):

    .venv/bin/python bench/bench_eval.py [--sizes 1e6,1e7] [--dir /tmp/bench_eval] [--repeat N]

``--repeat N`` times each cold job N times, in rounds, and takes the medians.

Issue 16's targets, printed with a verdict: 10 million records of a run cold in <= 60 s
(simulated: Parquet) and <= 180 s (daemon-written JSON Lines), on local[2].
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

NODES = 100
TOPICS = 20
AREA_M = 1000.0
FILES_PER_RUN = 8
S = 1_000_000_000
REPO = Path(__file__).resolve().parent.parent
TARGET_RECORDS = 10_000_000
TARGETS_S = {"simulated run": 60.0, "daemon JSON Lines": 180.0}


def load() -> str:
    return "load average " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def generate(out: Path, n_records: int, seed: int = 1, *, run: str = "bench",
             protocol: str = "flooding", p_deliver: float = 0.9, tx_per_event: float = 8.0,
             manifest: dict[str, Any] | None = None) -> int:
    """Write one run of about ``n_records`` records under ``out``; return the exact count."""
    rng = np.random.default_rng(seed)
    out.mkdir(parents=True, exist_ok=True)
    if manifest is not None:
        (out / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    per_event = 27.0  # publish + ~4.5 deliver + ~8 tx + ~12 rx + beacons, measured below
    n_events = max(10, int(n_records / per_event))
    duration = max(60.0, n_events / 50.0)  # 50 events/s over the whole mesh
    lines: list[str] = []
    head = f'{{"run":"{run}","protocol":"{protocol}","node":'

    def rec(node: int, ts: float, body: str) -> None:
        lines.append(f'{head}{node},"ts_ns":{int(ts * S)},"event":{body}}}')

    xs, ys = rng.uniform(0, AREA_M, NODES), rng.uniform(0, AREA_M, NODES)
    for n in range(NODES):
        rec(n + 1, 0.0, f'"position","x":{xs[n]:.1f},"y":{ys[n]:.1f}')
    # two subscriptions per node, 30% topic-only, else "v<th"; 10% unsubscribe mid-run
    sub_node = np.repeat(np.arange(1, NODES + 1), 2)
    sub_topic = rng.integers(0, TOPICS, sub_node.size)
    sub_th = np.where(rng.random(sub_node.size) < 0.3, -1, rng.integers(10, 100, sub_node.size))
    sub_start = rng.uniform(0, 5.0, sub_node.size)
    sub_end = np.where(rng.random(sub_node.size) < 0.1,
                       rng.uniform(duration * 0.3, duration, sub_node.size), np.inf)
    for i in range(sub_node.size):
        name = f"t{sub_topic[i]:02d}"
        content = name if sub_th[i] < 0 else f"{name} v<{sub_th[i]}"
        rec(int(sub_node[i]), sub_start[i],
            f'"subscribe","sub_id":"s{i}","topic":"{name}","content":"{content}"')
        if np.isfinite(sub_end[i]):
            rec(int(sub_node[i]), sub_end[i], f'"unsubscribe","sub_id":"s{i}"')
    # events
    pub_t = np.sort(rng.uniform(5.0, duration, n_events))
    pub_node = rng.integers(1, NODES + 1, n_events)
    ev_topic = rng.integers(0, TOPICS, n_events)
    value = rng.integers(0, 100, n_events)
    for e in range(n_events):
        eid = f"{pub_node[e]:x}-0-{e:x}"
        name = f"t{ev_topic[e]:02d}"
        rec(int(pub_node[e]), pub_t[e], f'"publish","event_id":"{eid}","topic":"{name}",'
            f'"content":"{name} v={value[e]}"')
    # interested pairs per topic (vectorised), delivered with p=0.9, 5% duplicated
    for t in range(TOPICS):
        ev = np.nonzero(ev_topic == t)[0]
        sb = np.nonzero(sub_topic == t)[0]
        if ev.size == 0 or sb.size == 0:
            continue
        active = ((pub_t[ev, None] >= sub_start[None, sb]) & (pub_t[ev, None] < sub_end[None, sb])
                  & ((sub_th[None, sb] < 0) | (value[ev, None] < sub_th[None, sb]))
                  & (pub_node[ev, None] != sub_node[None, sb]))
        ei, si = np.nonzero(active)
        got = rng.random(ei.size) < p_deliver
        lat = rng.exponential(0.3, ei.size) + 0.01
        for k in np.nonzero(got)[0]:
            e, s = ev[ei[k]], sb[si[k]]
            eid = f"{pub_node[e]:x}-0-{e:x}"
            rec(int(sub_node[s]), pub_t[e] + lat[k],
                f'"deliver","event_id":"{eid}","sub_id":"s{s}","hop":2')
            if rng.random() < 0.05:
                rec(int(sub_node[s]), pub_t[e] + lat[k] + 0.5,
                    f'"deliver","event_id":"{eid}","sub_id":"s{s}","hop":3')
    # radio traffic per event: ~8 data tx (60% unicast) and ~12 rx
    n_tx = rng.poisson(tx_per_event, n_events)
    n_rx = rng.poisson(12, n_events)
    for e in range(n_events):
        eid = f"{pub_node[e]:x}-0-{e:x}"
        nodes = rng.integers(1, NODES + 1, n_tx[e] + n_rx[e])
        peers = rng.integers(1, NODES + 1, n_tx[e] + n_rx[e])
        offs = rng.uniform(0, 1.0, n_tx[e] + n_rx[e])
        size = 120 + value[e]
        for j in range(n_tx[e]):
            peer = f',"peer":{peers[j]}' if offs[j] < 0.6 else ""
            rec(int(nodes[j]), pub_t[e] + offs[j],
                f'"tx","msg_kind":"data","bytes":{size},"event_id":"{eid}","hop":1{peer}')
        for j in range(n_tx[e], n_tx[e] + n_rx[e]):
            rec(int(nodes[j]), pub_t[e] + offs[j],
                f'"rx","msg_kind":"data","bytes":{size},"event_id":"{eid}","peer":{peers[j]}')
    # beacons fill the rest
    missing = int(n_records - len(lines))
    if missing > 0:
        bn = rng.integers(1, NODES + 1, missing)
        bt = rng.uniform(0, duration, missing)
        for j in range(missing):
            rec(int(bn[j]), bt[j], '"tx","msg_kind":"beacon","bytes":40')
    order = rng.permutation(len(lines))
    chunks = np.array_split(order, FILES_PER_RUN)
    for part, chunk in enumerate(chunks):
        with (out / f"part-{part}.jsonl").open("w", encoding="utf-8") as fh:
            fh.write("\n".join(lines[i] for i in chunk))
            fh.write("\n")
    return len(lines)


def pandas_delivery_ratio(rundir: Path) -> tuple[float, int]:
    """Delivery ratio computed in one process: pyarrow JSON reader + pandas + the core matcher."""
    import pyarrow as pa
    import pyarrow.json as pj

    from meshsub.core.syntax import parse_event, parse_subscription

    wanted = ["node", "ts_ns", "event", "event_id", "sub_id", "topic", "content"]
    tables = []
    for path in sorted(rundir.glob("*.jsonl")):
        table = pj.read_json(path, parse_options=pj.ParseOptions(
            explicit_schema=pa.schema([("node", pa.int64()), ("ts_ns", pa.int64()),
                                       ("event", pa.string()), ("event_id", pa.string()),
                                       ("sub_id", pa.string()), ("topic", pa.string()),
                                       ("content", pa.string())]),
            unexpected_field_behavior="ignore"))
        tables.append(table.select(wanted))
    df = pa.concat_tables(tables).to_pandas()
    n = len(df)
    pubs = (df[df.event == "publish"].sort_values("ts_ns")
            .drop_duplicates("event_id")[["event_id", "node", "ts_ns", "topic", "content"]]
            .rename(columns={"node": "pub_node", "ts_ns": "pub_ts", "content": "ev"}))
    ops = df[df.event.isin(["subscribe", "unsubscribe"])].sort_values("ts_ns")
    ops = ops.assign(end=ops.groupby(["node", "sub_id"]).ts_ns.shift(-1))
    subs = ops[ops.event == "subscribe"][["node", "sub_id", "topic", "content", "ts_ns", "end"]]
    cand = pubs.merge(subs, on="topic")
    cand = cand[(cand.node != cand.pub_node) & (cand.pub_ts >= cand.ts_ns)
                & (cand.end.isna() | (cand.pub_ts < cand.end))]
    ev_cache: dict[str, Any] = {}
    sub_cache: dict[str, Any] = {}
    keep = []
    for ev, sub in zip(cand.ev, cand.content, strict=True):
        e = ev_cache.get(ev) or ev_cache.setdefault(ev, parse_event(ev))
        s = sub_cache.get(sub) or sub_cache.setdefault(sub, parse_subscription(sub))
        keep.append(s.matches(e))
    interested = cand[keep][["event_id", "node"]].drop_duplicates()
    first = df[df.event == "deliver"].groupby(["event_id", "node"]).ts_ns.min().reset_index()
    hits = interested.merge(first, on=["event_id", "node"])
    return len(hits) / len(interested), n


def pandas_in_child(rundir: Path) -> tuple[float, float, float]:
    """(ratio, seconds, peak RSS in MB) of the pandas computation in a fresh process."""
    out = subprocess.run([sys.executable, __file__, "--pandas-only", str(rundir)],
                         check=True, capture_output=True, text=True).stdout
    ratio, seconds, rss = (float(x) for x in out.split())
    return ratio, seconds, rss


def before_job(rev: str, into: Path) -> Path:
    """``telemetry/mesheval`` of ``rev`` under ``into`` (the folder to put on sys.path)."""
    shutil.rmtree(into, ignore_errors=True)
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "telemetry/mesheval"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "telemetry"


def job_in_child(path: Path, rundir: Path, out: Path) -> tuple[float, float]:
    """(seconds, delivery ratio) of ``run_batch`` imported from ``path``, cold, in a fresh
    process (a fresh JVM: nothing cached from the other measurements) and a fresh ``out``
    (the job keeps its Parquet cache of JSON Lines there: a second run into the same
    folder would skip the conversion)."""
    shutil.rmtree(out, ignore_errors=True)
    got = subprocess.run([sys.executable, __file__, "--job-only", str(path), str(rundir),
                          str(out)], check=True, capture_output=True, text=True).stdout
    seconds, ratio = (float(x) for x in got.split()[-2:])
    return seconds, ratio


def to_parquet(rundir: Path, out: Path) -> None:
    """The run's records as the simulator writes them with ``--telemetry-format parquet``."""
    import pyarrow.parquet as pq

    from meshsim.telemetry_parquet import (
        PARQUET_FILE,
        PARQUET_FLUSH_ROWS,
        arrow_schema,
        lines_to_table,
        write_by_event,
    )

    out.mkdir(parents=True, exist_ok=True)
    schema = arrow_schema()
    with pq.ParquetWriter(out / PARQUET_FILE, schema, compression="snappy") as writer:
        for path in sorted(rundir.glob("*.jsonl")):
            lines = path.read_bytes().splitlines()
            step = PARQUET_FLUSH_ROWS  # the writer's batch, a row group per event type
            for i in range(0, len(lines), step):
                write_by_event(writer, lines_to_table(b"\n".join(lines[i:i + step]) + b"\n",
                                                      schema))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1e6,1e7")
    parser.add_argument("--dir", type=Path, default=Path("/tmp/bench_eval"))
    parser.add_argument("--before", default="main", metavar="REV",
                        help="the git revision whose job is the baseline (default main)")
    parser.add_argument("--before-max", type=float, metavar="N",
                        help="run the baseline only at sizes up to N records (the job of "
                        "before takes about half an hour at 10^7); n/a above")
    parser.add_argument("--keep", action="store_true", help="keep the generated data")
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="time each cold job N times, in rounds of before, JSON Lines "
                        "and Parquet; the figures and verdicts take each one's median (the "
                        "same job's cold time moved by 10-25 %% between runs on the 2-core "
                        "machine, docs/benchmarks.md)")
    parser.add_argument("--pandas-only", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--job-only", type=Path, nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.pandas_only is not None:
        t = time.perf_counter()
        ratio, _ = pandas_delivery_ratio(args.pandas_only)
        seconds = time.perf_counter() - t
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(ratio, seconds, rss_mb)
        return 0
    if args.job_only is not None:
        path, rundir, out = (p.resolve() for p in args.job_only)  # the check below compares
        sys.path.insert(0, str(path))                              # absolute paths
        import mesheval
        from mesheval.batch import run_batch as job
        from mesheval.session import get_session as session

        if not Path(mesheval.__file__ or "").is_relative_to(path):
            print(f"bench_eval: {path} holds no mesheval package (imported "
                  f"{mesheval.__file__} instead)", file=sys.stderr)
            return 2

        spark = session("local[2]")
        t = time.perf_counter()
        result = job(spark, [rundir], out)
        seconds = time.perf_counter() - t
        print(seconds, result.evaluation.runs["bench"]["delivery_ratio"])
        spark.stop()
        return 0
    if args.repeat < 1:
        print(f"bench_eval: bad --repeat {args.repeat} (at least 1)", file=sys.stderr)
        return 2
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", args.before],
                         check=True, capture_output=True, text=True).stdout.strip()
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                          check=True, capture_output=True, text=True).stdout.strip()
    old_job = before_job(rev, args.dir / "before-job")
    now_job = REPO / "telemetry"
    print(f"before: the job of {args.before} ({rev}); now: the job of this tree (HEAD {head}); "
          "each cold, in a fresh process with a fresh local[2] JVM", flush=True)
    rows = []
    for size in sizes:
        base = args.dir / f"n{size}"
        shutil.rmtree(base, ignore_errors=True)
        t = time.perf_counter()
        count = generate(base / "run", size)
        gen_s = time.perf_counter() - t
        mb = sum(p.stat().st_size for p in (base / "run").glob("*.jsonl")) / 1e6
        to_parquet(base / "run", base / "run-parquet")
        pq_mb = (base / "run-parquet" / "telemetry.parquet").stat().st_size / 1e6
        print(f"\n{count} records ({mb:.0f} MB JSONL, {pq_mb:.0f} MB Parquet) generated in "
              f"{gen_s:.1f} s", flush=True)
        jobs = {  # what is timed: the job's folder, its input, its output folder
            "jsonl": ("now, JSON Lines (daemon), cold:", now_job, base / "run"),
            "parquet": ("now, Parquet (simulator), cold:", now_job, base / "run-parquet"),
        }
        if args.before_max is None or size <= args.before_max:
            jobs = {"before": (f"before ({rev}), JSON Lines, cold:", old_job, base / "run"),
                    **jobs}
        else:
            print(f"  before ({rev}), JSON Lines, cold:      n/a (size above --before-max "
                  f"{args.before_max:.0e})", flush=True)
        times: dict[str, list[float]] = {key: [] for key in jobs}
        delivery: dict[str, float] = {}
        for i in range(args.repeat):  # rounds of the three, so drifts reach each alike
            tag = f" [{i + 1}/{args.repeat}]" if args.repeat > 1 else ""
            for key, (label, job_dir, rundir) in jobs.items():
                seconds, delivery[key] = job_in_child(job_dir, rundir, base / f"out-{key}")
                times[key].append(seconds)
                print(f"  {label:<36s}{seconds:7.1f} s ({load()}){tag}", flush=True)
        median = {key: float(np.median(t)) for key, t in times.items()}
        before = median.get("before")
        jsonl, parquet = median["jsonl"], median["parquet"]
        if args.repeat > 1:
            print(f"  medians of {args.repeat}: before "
                  + ("n/a" if before is None else f"{before:.1f} s")
                  + f", JSON Lines {jsonl:.1f} s, Parquet {parquet:.1f} s", flush=True)
        pd_ratio, pd_s, rss = pandas_in_child(base / "run")
        print(f"  pandas (delivery ratio only):       {pd_s:7.1f} s, peak RSS {rss:.0f} MB "
              f"({load()})", flush=True)
        rows.append((count, mb, pq_mb, before, jsonl, parquet, pd_s,
                     (delivery.get("before"), delivery["jsonl"], delivery["parquet"],
                      pd_ratio)))
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    print(f"\n{load()}")
    print("records     JSONL MB  Parquet MB  before s  JSONL s  Parquet s  Parquet rec/s  "
          "pandas s  delivery ratio before / JSONL / Parquet / pandas")
    for count, mb, pq_mb, before, jsonl, parquet, pd_s, ratios in rows:
        shown = f"{before:8.1f}" if before is not None else f"{'n/a':>8s}"
        print(f"{count:<10d}  {mb:8.0f}  {pq_mb:10.0f}  {shown}  {jsonl:7.1f}  "
              f"{parquet:9.1f}  {count / parquet:13.0f}  {pd_s:8.1f}  "
              + " / ".join("n/a" if r is None else f"{r:.4f}" for r in ratios))
    print("spark computes every metric; pandas only the delivery ratio (same ground truth)")
    big = [r for r in rows if r[0] >= TARGET_RECORDS * 0.95]
    for name, limit in TARGETS_S.items():
        if not big:
            print(f"target {name}: 10^7 records cold <= {limit:.0f} s: n/a "
                  f"(no size >= 9.5e6 measured; --sizes 1e7)")
            continue
        count = big[0][0]
        cold = big[0][5] if name == "simulated run" else big[0][4]
        scaled = cold * TARGET_RECORDS / count
        verdict = "met" if scaled <= limit else "NOT met"
        measured = ("measured cold time" if args.repeat == 1
                    else f"median of {args.repeat} cold times")
        print(f"target {name}: 10^7 records cold <= {limit:.0f} s (rule: {measured} "
              f"scaled to 10^7 records, at the load printed): {scaled:.0f} s, {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
