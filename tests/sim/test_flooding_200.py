"""Flooding on a static connected 200-node unit disk: exactly once to every match, no other.

Everything is asserted from the telemetry files alone, with the exact matcher
applied to the recorded subscription and event texts, as the evaluation does.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

from simhelpers import SCENARIOS, read_run

from meshsim.des.graph import summarize
from meshsim.des.run import run_scenario
from meshsim.radio import compute_links, make_model
from meshsim.scenario import load_scenario, make_plan
from meshsub.core.syntax import parse_event, parse_subscription


def test_flooding_delivers_exactly_once_to_every_matching_subscriber(tmp_path: Path) -> None:
    scenario = load_scenario(SCENARIOS / "flooding-200.toml")
    plan = make_plan(scenario)
    graph = summarize(compute_links(plan.positions, make_model(scenario.radio)))
    assert graph.nodes == 200 and graph.components == 1
    assert scenario.radio.loss == 0.0

    run_scenario(scenario, tmp_path / "run", plan=plan)
    manifest, records = read_run(tmp_path / "run")
    assert manifest["nodes"] == 200 and manifest["tier"] == "simulation"
    assert manifest["protocol"] == "flooding" and manifest["seed"] == scenario.meta.seed
    assert len(records) > 50_000  # more than one flush of the writer's buffer
    recs: dict[int, list[int]] = defaultdict(list)
    for r in records:
        recs[r["node"]].append(r["rec"])
    assert all(seq == list(range(len(seq))) for seq in recs.values())

    subs: dict[tuple[int, str], tuple[int, object]] = {}
    pubs: dict[str, tuple[int, object]] = {}
    delivered: Counter[tuple[str, int, str]] = Counter()
    for r in records:
        if r["event"] == "subscribe":
            subs[(r["node"], r["sub_id"])] = (r["ts_ns"], parse_subscription(r["content"]))
        elif r["event"] == "publish":
            pubs[r["event_id"]] = (r["ts_ns"], parse_event(r["content"]))
        elif r["event"] == "deliver":
            delivered[(r["event_id"], r["node"], r["sub_id"])] += 1

    assert len(pubs) >= 10
    assert len({s.topic for _, s in subs.values()}) >= 3  # several expressions
    expected: set[tuple[str, int, str]] = set()
    for event_id, (ts, event) in pubs.items():
        for (node, sub_id), (sub_ts, sub) in subs.items():
            if sub_ts <= ts and sub.matches(event):  # type: ignore[attr-defined]
                expected.add((event_id, node, sub_id))
    assert len(expected) > 100
    assert len(pubs) * len(subs) - len(expected) > 100  # plenty of non-matching pairs too
    assert set(delivered) == expected  # every match reached, nothing else
    assert max(delivered.values()) == 1  # exactly once


def test_every_record_has_a_contiguous_sequence(tmp_path: Path) -> None:
    scenario = load_scenario(SCENARIOS / "flooding-200.toml",
                             ["nodes.count=30", "area.width_m=400.0", "area.height_m=400.0",
                              "workload.generator.count=3",
                              "workload.subscriptions[0].node=30"])
    run_scenario(scenario, tmp_path / "run")
    _, records = read_run(tmp_path / "run")
    by_node: dict[int, list[int]] = defaultdict(list)
    for r in records:
        by_node[r["node"]].append(r["rec"])
        assert r["epoch"] == 1
    assert len(by_node) == 30
    for recs in by_node.values():
        assert recs == list(range(len(recs)))
    kinds = Counter(r["event"] for r in records)
    assert kinds["tx"] and kinds["rx"] and kinds["position"] == 30 and kinds["neighbor_up"]
    for r in records:
        if r["event"] == "tx":
            assert r["msg_kind"] == "data" and r["bytes"] > 0 and "peer" not in r
        if r["event"] == "rx":
            assert isinstance(r["peer"], int)
