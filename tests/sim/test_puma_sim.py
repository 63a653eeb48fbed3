"""PUMA and its paging baseline in the simulator (Zheng 2008, ch. 5): the puma-grid scenario.

25 base stations on a 5 x 5 lattice of 50 m cells (the scenario's ``stations`` group,
role ``base_station``) and four clients (role ``client``) on a lattice walk, one cell
per 10 s time unit. Each client subscribes through the station of its first cell and
walks away from it; stations publish. Checked from the telemetry of one run per
protocol, as the evaluation reads it. The thesis-scale figures are
bench/puma_experiments.py's.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from simhelpers import SCENARIOS, read_run

from meshsim.des.run import run_scenario
from meshsim.scenario import load_scenario
from meshsub.core.syntax import parse_event, parse_subscription
from meshsub.protocols.puma import messages as m

SCENARIO = SCENARIOS / "puma-grid.toml"
CELL = 50.0
STATIONS = range(1, 26)
CLIENTS = range(26, 30)
Run = tuple[dict[str, Any], list[dict[str, Any]]]


def _run(tmp: pytest.TempPathFactory, protocol: str) -> Run:
    run_dir: Path = tmp.mktemp(protocol) / "run"
    run_scenario(load_scenario(SCENARIO, [f"protocol.name={protocol}"]), run_dir)
    return read_run(run_dir)


@pytest.fixture(scope="module", params=["puma", "paging"])
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Run:
    return _run(tmp_path_factory, request.param)


def _expected(records: list[dict[str, Any]]) -> set[tuple[str, int, str]]:
    subs = {(r["node"], r["sub_id"]): parse_subscription(r["content"])
            for r in records if r["event"] == "subscribe"}
    pubs = {r["event_id"]: parse_event(r["content"]) for r in records if r["event"] == "publish"}
    return {(e, *k) for e, ev in pubs.items() for k, s in subs.items() if s.matches(ev)}


@pytest.mark.slow
def test_groups_make_one_base_station_per_cell_and_walking_clients(run: Run) -> None:
    """The lattice group's 25 members are base stations, each on its own cell; the walking
    group's members are clients (no broker record) that leave their first cell."""
    _manifest, records = run
    brokers = Counter((r["node"], r["role"]) for r in records if r["event"] == "broker")
    assert set(brokers) == {(n, "base") for n in STATIONS}
    first: dict[int, tuple[float, float]] = {}
    cells: dict[int, set[tuple[int, int]]] = {}
    for r in records:
        if r["event"] == "position":
            first.setdefault(r["node"], (r["x"], r["y"]))
            cells.setdefault(r["node"], set()).add((int(r["x"] // CELL), int(r["y"] // CELL)))
    assert len({(int(x // CELL), int(y // CELL)) for n, (x, y) in first.items()
                if n in STATIONS}) == 25
    assert all(len(cells[c]) >= 3 for c in CLIENTS)  # they walk


@pytest.mark.slow
def test_every_matching_event_follows_each_client_exactly_once(run: Run) -> None:
    _manifest, records = run
    got = Counter((r["event_id"], r["node"], r["sub_id"])
                  for r in records if r["event"] == "deliver")
    expected = _expected(records)
    assert len(expected) > 100
    assert set(got) == expected
    assert max(got.values()) == 1


@pytest.mark.slow
def test_client_message_cost(run: Run) -> None:
    """PUMA's client sends exactly one message per delivered event, its reply (§5.3.1,
    §5.4.2), besides its one subscription; paging's client never replies and reports
    its cell as it walks instead."""
    manifest, records = run
    delivered = Counter(r["node"] for r in records if r["event"] == "deliver")
    sent = Counter((r["node"], r["msg_type"]) for r in records
                   if r["event"] == "tx" and r["node"] in CLIENTS)
    for c in CLIENTS:
        own = {t: n for (node, t), n in sent.items() if node == c}
        assert own.pop(m.SUBSCRIBE) == 1
        if manifest["protocol"] == "puma":
            assert own == {m.REPLY: delivered[c]}
        else:
            assert m.REPLY not in own and set(own) <= {m.REPORT}
    if manifest["protocol"] == "paging":
        assert sum(n for (_c, t), n in sent.items() if t == m.REPORT) > 0
    else:  # the walk took clients away from home: delivery trees were used
        trees = [r for r in records if r["event"] == "tx" and r["msg_type"] == m.DELIVER]
        assert trees
