"""bench/puma_table51.py: Table 5.1 in the simulator and its cost counting from telemetry.

The counting is checked against hand counts of short scripted walks on the
scenario's 25 x 25 backbone (centre station 313 at cell (12, 12), client 626),
and the sharing of one simulation by several clients against the same client
run alone. docs/results/puma.md is made from these counts.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from simhelpers import read_run

from meshsim.des.engine import Simulation
from meshsim.des.run import run_scenario
from meshsim.scenario import load_scenario
from meshsub.protocols.puma import messages as m

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import puma_table51 as t51

CLIENT = 626


def scripted(columns: list[int]) -> str:
    """Client 626 on row 12, in column ``columns[u - 1]`` from unit u on (a jump per unit)."""
    points = ["[0.0, 626, 625.0, 625.0]"]
    prev = 12
    for unit, col in enumerate(columns, 1):
        points.append(f"[{unit - 1e-6}, 626, {prev * 50 + 25}.0, 625.0]")
        points.append(f"[{unit}.0, 626, {col * 50 + 25}.0, 625.0]")
        prev = col
    return f'nodes.groups[1].mobility={{model = "scripted", waypoints = [{", ".join(points)}]}}'


def run_walk(batch: t51.Batch, columns: list[int]) -> t51.ClientCounts:
    scenario = load_scenario(t51.SCENARIO, [*t51.overrides(batch), scripted(columns)])
    counter = t51.CostCounter([CLIENT])
    Simulation(scenario, counter).run()
    assert not counter.unattributed and not counter.drops
    return counter.clients[CLIENT]


def test_puma_costs_of_a_back_and_forth_walk_are_the_hand_count() -> None:
    """th = 100 %, an event every unit; the client steps east and back, 6 times.

    Odd units, client in (13, 12), last heard at the centre one unit ago: the
    prediction is the centre's four neighbours, a star of 4 DELIVERs from the
    previous broker; LOCAL from (13, 12); the REPLY and its one relay hop: 7.
    Even units, client back at its previous broker: LOCAL and REPLY: 2.
    """
    batch = t51.Batch("puma", 1, 1, 1, (("th", 1.0),))
    got = run_walk(batch, [13, 12] * 6)
    assert got.by_type == {m.DELIVER: 6 * 4, m.LOCAL: 12, m.REPLY: 6 * 2 + 6}
    assert (got.system, got.client, got.events, got.delivered) == (6 * 7 + 6 * 2, 12, 12, 12)


def test_paging_costs_of_a_two_cell_swing_are_the_hand_count() -> None:
    """dist 2, an event every 2 units; the client goes east, east, west, west, 3 times.

    Units 2, 6, 10 (client in (14, 12), 2 cells from its last report): REPORT and
    2 relay hops; the event: 2 PAGE hops to (14, 12), 4 DELIVERs over its paging
    area (radius 1), LOCAL: 3 + 7. Units 4, 8, 12 (back at the previous broker, 2
    cells from the last report): REPORT straight to it; the event handed over: 1 + 1.
    """
    batch = t51.Batch("paging", 2, 1, 1, (("dist", 2),))
    got = run_walk(batch, [13, 14, 13, 12] * 3)
    assert got.by_type == {m.REPORT: 3 * 3 + 3, m.PAGE: 3 * 2, m.DELIVER: 3 * 4, m.LOCAL: 6}
    assert (got.system, got.client, got.events, got.delivered) == (3 * 10 + 3 * 2, 6, 6, 6)


@pytest.mark.parametrize("protocol, params", [("puma", (("th", 0.6),)),
                                              ("paging", (("dist", 2),))])
def test_a_client_is_counted_alike_alone_and_among_others(
        protocol: str, params: tuple[tuple[str, float], ...]) -> None:
    """Sharing a simulation changes nothing a client is charged (fixed seed, lattice walk)."""
    alone = t51.simulate(t51.Batch(protocol, 3, 1, 7, params)).clients
    company = t51.simulate(t51.Batch(protocol, 3, 6, 7, params)).clients
    assert alone[CLIENT] == company[CLIENT]
    assert alone[CLIENT].system > 0 and alone[CLIENT].delivered == 4  # 12 / 3 events
    assert len({c.system for c in company.values()}) > 1  # the others walked elsewhere


def test_counting_the_written_telemetry_gives_the_same_counts(tmp_path: Path) -> None:
    """The scenario file as written (4 clients, I_event 2) through ``meshsim simulate``'s
    path into a run directory, counted from its files, equals the in-memory sink's count."""
    run_scenario(load_scenario(t51.SCENARIO), tmp_path / "run")
    _manifest, records = read_run(tmp_path / "run")
    clients = range(t51.FIRST_CLIENT, t51.FIRST_CLIENT + 4)
    from_files = t51.CostCounter(clients)
    for r in sorted(records, key=lambda r: (r["ts_ns"], r["node"], r["rec"])):
        from_files.add(r["node"], r["event"], r)
    live = t51.simulate(t51.Batch("puma", 2, 4, 1, (("th", 0.6),)))
    assert from_files.clients == live.clients
    assert all(c.events == c.delivered == 6 for c in live.clients.values())
    assert all(c.client == 6 for c in live.clients.values())  # one reply per event


def test_a_topic_of_two_clients_or_a_message_of_none_is_refused() -> None:
    counter = t51.CostCounter([626, 627])
    counter.add(626, "subscribe", {"topic": "c626"})
    with pytest.raises(t51.AttributionError, match="c626"):
        counter.add(627, "subscribe", {"topic": "c626"})
    counter.add(5, "tx", {"msg_type": m.DELIVER, "event_id": "1-1-9"})  # no publish seen
    counter.add(5, "tx", {"msg_type": m.REPLY, "event_id": "3e8-1-1"})  # origin 1000
    counter.add(5, "tx", {"msg_type": m.SUB_PROPAGATE, "event_id": "1-1-2"})  # not last mile
    assert counter.unattributed == {m.DELIVER: 1, m.REPLY: 1}
    assert counter.clients[626] == counter.clients[627] == t51.ClientCounts()


def test_a_batch_without_clients_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one client"):
        t51.overrides(t51.Batch("puma", 2, 0, 1))
