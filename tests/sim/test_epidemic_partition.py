"""Epidemic across two partitions joined by one contact (ONE connection events)."""

from __future__ import annotations

from pathlib import Path

from simhelpers import SCENARIOS, read_run

from meshsim.des.run import run_scenario
from meshsim.scenario import load_scenario

CONTACT_UP_NS = 120 * 10**9


def _deliveries(run_dir: Path) -> dict[tuple[str, int], int]:
    _, records = read_run(run_dir)
    publish = {r["event_id"]: r for r in records if r["event"] == "publish"}
    first = min(publish.values(), key=lambda r: r["ts_ns"])  # the t=10 s event of node 1
    assert first["node"] == 1
    return {(r["event_id"], r["node"]): r["ts_ns"] for r in records
            if r["event"] == "deliver" and r["event_id"] == first["event_id"]}


def test_delivery_crosses_the_partition_only_after_the_contact(tmp_path: Path) -> None:
    scenario = load_scenario(SCENARIOS / "epidemic-partition.toml")
    run_scenario(scenario, tmp_path / "run")
    got = _deliveries(tmp_path / "run")
    by_node = {node: ts for (_, node), ts in got.items()}
    assert set(by_node) == {3, 7, 10}  # node 9's subscription (level<3) does not match
    assert by_node[3] < CONTACT_UP_NS  # same partition: right away
    assert by_node[7] >= CONTACT_UP_NS and by_node[10] >= CONTACT_UP_NS
    assert by_node[10] < 150 * 10**9  # carried over while the contact lasted


def test_without_the_contact_nothing_crosses(tmp_path: Path) -> None:
    scenario = load_scenario(SCENARIOS / "epidemic-partition.toml")
    events = [e for e in scenario.source["contacts"]["events"] if "5 6" not in e]
    quoted = ", ".join(f'"{e}"' for e in events)
    scenario = load_scenario(SCENARIOS / "epidemic-partition.toml",
                             [f"contacts.events=[{quoted}]"])
    run_scenario(scenario, tmp_path / "run")
    by_node = {node for (_, node) in _deliveries(tmp_path / "run")}
    assert by_node == {3}
