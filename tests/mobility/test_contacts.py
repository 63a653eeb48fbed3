"""ONE connection traces as read from real files, and the contact timeline for drivers."""

from __future__ import annotations

from pathlib import Path

from simhelpers import base_doc, read_run

from meshsim.des.run import run_scenario
from meshsim.mobility.contacts import contact_timeline
from meshsim.scenario import from_dict
from meshsim.scenario.model import Contact
from meshsim.traces.one import read_one


def test_the_simulator_sees_the_same_links_as_the_contact_timeline(tmp_path: Path) -> None:
    # A real-world-looking ONE trace: header comments, tabs, host names with a prefix, an
    # interface column, both sides logging the same contact, upper-case UP.
    (tmp_path / "t.one").write_text(
        "# converted from a CRAWDAD trace\n# time CONN host1 host2 up|down\n"
        "0\tCONN\tn1\tn2\tup\n"
        "1.5 CONN 2 1 up bt0\n"          # the other side of the same contact
        "2 CONN 2 3 UP\n"
        "4 CONN 1 2 down\n"
        "4 CONN 2 1 down\n"              # both sides again
        "5 CONN 3 2 down\n"
        "6 CONN 1 3 up\n"
        "6 CONN 1 3 down\n")
    contacts = read_one(tmp_path / "t.one")
    timeline = contact_timeline(contacts)
    assert [(c.t, c.a, c.b, c.up) for c in timeline] == [
        (0.0, 1, 2, True), (2.0, 2, 3, True), (4.0, 1, 2, False), (5.0, 3, 2, False),
        (6.0, 1, 3, True), (6.0, 1, 3, False)]
    doc = base_doc()
    doc["contacts"] = {"file": "t.one"}
    run_scenario(from_dict(doc, base_dir=tmp_path), tmp_path / "run", run_id="r")
    _, records = read_run(tmp_path / "run")
    changes = sorted((r["ts_ns"] / 1e9, r["rec"], r["node"], r["peer"], r["event"])
                     for r in records if r["event"] in ("neighbor_up", "neighbor_down"))
    for t in (0.5, 1.7, 2.5, 4.5, 5.5, 7.0):
        directed: set[tuple[int, int]] = set()
        for when, _, node, peer, event in changes:
            if when <= t:
                (directed.add if event == "neighbor_up" else directed.discard)((node, peer))
        expect: set[tuple[int, int]] = set()
        for c in timeline:
            if c.t <= t:
                pair = (min(c.a, c.b), max(c.a, c.b))
                (expect.add if c.up else expect.discard)(pair)
        assert {(a, b) for a, b in directed if a < b} == expect, t
        assert {(b, a) for a, b in directed if a > b} == expect, t


def test_timeline_drops_only_redundant_events() -> None:
    events = [Contact(3.0, 1, 2, False), Contact(1.0, 2, 1, True), Contact(1.0, 1, 2, True),
              Contact(2.0, 5, 6, False)]
    assert contact_timeline(events) == [Contact(1.0, 2, 1, True), Contact(3.0, 1, 2, False)]
