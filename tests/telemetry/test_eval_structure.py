"""mesheval's state size, scoped ground truth and cache window, on a hand-built run.

Timeline (seconds; t0 = 0, warm-up 5 s). The manifest's groups: stations {1, 2, 3}
(base_station), clients {4, 5, 6} (client); node 7 is in none. ``member`` records:
1, 4, 5 join ``tg:a`` and 6 joins ``tg:b`` at t=1; 5 leaves ``tg:a`` at 15.
Subscriptions ``temp`` on 1-6 at t=1; node 7 subscribes ``temp x>0`` at t=22.

- E1 t=10 by 1, ``_scope=stations``: interested {2, 3}; delivered 2, 3, and 4 (fp).
- E2 t=12 by 4, ``_scope=@origin:tg:``: 4 is in tg:a = {1, 4, 5}: interested {1, 5};
  delivered 1, 5, and 6 (fp: tg:b).
- E3 t=20 by 4, same scope: tg:a = {1, 4} now: interested {1}; delivered 1, 5 (fp: left).
- E4 t=21 by 6, no scope: interested {1, 2, 3, 4, 5}, and 7 with a cache window of 5 s
  (it subscribes at 22); delivered to all six, 7 at 23 (latency 1 s from its subscription).

State (stores summed per report): node 1 (station) at t=10: subscriptions 1 entry/10
bytes + buffer 3/300, at t=20: 1/10 + 5/500; node 4 (client) at both times 1/10 + 1/100.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

RUN = "r2"
S = 1_000_000_000
E1, E2, E3, E4 = "1-0-1", "4-0-1", "4-0-2", "6-0-1"
MANIFEST = {
    "run": RUN, "tier": "simulation", "seed": 1, "protocol": {"name": "flooding"},
    "scenario": {"meta": {"name": "structure", "seed": 1, "warmup_s": 5.0},
                 "radio": {"range_m": 70.0}},
    "groups": {"stations": {"nodes": [1, 2, 3], "role": "base_station"},
               "clients": {"nodes": [4, 5, 6], "role": "client"}},
}


def records() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def add(node: int, t: float, event: str, **attrs: Any) -> None:
        out.append({"run": RUN, "node": node, "protocol": "flooding", "ts_ns": round(t * S),
                    "event": event, **attrs})

    for node, group in ((1, "tg:a"), (4, "tg:a"), (5, "tg:a"), (6, "tg:b")):
        add(node, 1, "member", group=group, reason="join")
    add(5, 15, "member", group="tg:a", reason="leave")
    for node in range(1, 7):
        add(node, 1, "subscribe", sub_id="s", topic="temp", content="temp")
    add(7, 22, "subscribe", sub_id="late", topic="temp", content="temp x>0")
    for eid, node, t, scope in ((E1, 1, 10, "stations"), (E2, 4, 12, "@origin:tg:"),
                                (E3, 4, 20, "@origin:tg:"), (E4, 6, 21, None)):
        content = "temp x=1" + (f" _scope={scope}" if scope else "")
        add(node, t, "publish", event_id=eid, topic="temp", content=content)
    for eid, node, t in ((E1, 2, 10.5), (E1, 3, 10.6), (E1, 4, 10.7),
                         (E2, 1, 12.5), (E2, 5, 12.4), (E2, 6, 12.6),
                         (E3, 1, 20.5), (E3, 5, 20.6),
                         (E4, 1, 21.5), (E4, 2, 21.5), (E4, 3, 21.5), (E4, 4, 21.5),
                         (E4, 5, 21.5), (E4, 7, 23.0)):
        add(node, t, "deliver", event_id=eid, sub_id="late" if node == 7 else "s", hop=1,
            topic="temp")
    for t, buffered in ((10, (3, 300)), (20, (5, 500))):
        add(1, t, "state", store="subscriptions", entries=1, bytes=10)
        add(1, t, "state", store="buffer", entries=buffered[0], bytes=buffered[1])
        add(4, t, "state", store="subscriptions", entries=1, bytes=10)
        add(4, t + 0.01, "state", store="buffer", entries=1, bytes=100)  # a daemon's clock
    add(4, 2, "state", store="buffer", entries=9, bytes=999)  # in the warm-up: left out
    return out


def write_run(rundir: Path) -> Path:
    rundir.mkdir(parents=True)
    by_node: dict[int, list[str]] = {}
    for r in records():
        by_node.setdefault(r["node"], []).append(json.dumps(r))
    for node, lines in by_node.items():
        (rundir / f"node-{node}.jsonl").write_text("\n".join(lines) + "\n")
    (rundir / "manifest.json").write_text(json.dumps(MANIFEST))
    return rundir


@pytest.fixture(scope="module")
def evaluated(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[float, Any]:
    from mesheval.batch import run_batch

    base = tmp_path_factory.mktemp("structure-eval")
    rundir = write_run(base / "run")
    return {window: run_batch(spark, [rundir], base / f"out{window:g}", cache_window_s=window)
            for window in (0.0, 5.0)}


def test_scoped_events_count_only_the_scope_at_publish_time(evaluated: Any) -> None:
    m = evaluated[0.0].evaluation.runs[RUN]
    # E1 {2,3} + E2 {1,5} + E3 {1} + E4 {1..5}: 10; node 7 is late without a window
    assert (m["interested_pairs"], m["first_deliveries"]) == (10, 10)
    assert m["fp_deliveries"] == 4  # 4 (E1), 6 (E2), 5 (E3), 7 (E4: no window)
    assert m["scoped_events"] == 3 and m["interested_pairs_late"] == 0


def test_the_cache_window_counts_later_subscriptions(evaluated: Any) -> None:
    result = evaluated[5.0]
    m = result.evaluation.runs[RUN]
    assert (m["interested_pairs"], m["first_deliveries"], m["fp_deliveries"]) == (11, 11, 3)
    assert m["interested_pairs_late"] == 1
    assert m["latency_max_s"] == pytest.approx(1.0)  # 23.0 - 22.0, not 23.0 - 21.0
    assert result.document["cache_window_s"] == 5.0


def test_state_size_per_run_store_and_role(evaluated: Any) -> None:
    result = evaluated[0.0]
    m = result.evaluation.runs[RUN]
    assert m["state_nodes"] == 2
    assert m["state_entries_mean"] == pytest.approx((5 + 2) / 2)
    assert m["state_bytes_mean"] == pytest.approx((410 + 110) / 2)
    assert m["state_bytes_max"] == 510
    assert m["state_buffer_bytes_mean"] == pytest.approx((400 + 100) / 2)
    assert m["state_subscriptions_bytes_mean"] == pytest.approx(10)
    assert m["state_bytes_mean_role_base_station"] == pytest.approx(410)
    assert m["state_bytes_mean_role_client"] == pytest.approx(110)
    nodes = {n["node"]: n for n in result.document["nodes"]}
    assert nodes[1]["role"] == "base_station" and nodes[1]["state_bytes_max"] == 510
    assert nodes[2]["state_bytes_mean"] is None  # no reports: n/a, not 0
    timeline = result.document["state_timeline"]  # since t0, the run's first record (t=1)
    assert {(r["role"], r["t_s"], r["bytes_mean"]) for r in timeline} == {
        ("base_station", 9.0, 310), ("base_station", 19.0, 510),
        ("client", 9.0, 110), ("client", 19.0, 110)}
    group = result.groups[0]["metrics"]["state_bytes_mean"]
    assert group["mean"] == pytest.approx(260)


def test_the_report_has_the_state_plot(evaluated: Any, tmp_path: Path) -> None:
    from mesheval.report import write_report

    files = write_report(evaluated[0.0].document, tmp_path)
    assert "state_size.png" in files and files["state_size.png"].stat().st_size > 5000
    assert "State: entries and bytes" in (tmp_path / "report.md").read_text()
