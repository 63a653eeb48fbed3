"""The ns-2 setdest reader on a hand-written script, and its errors."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from simhelpers import base_doc

from meshsim.mobility.setdest import parse_setdest, setdest_tracks
from meshsim.scenario import ScenarioError, from_dict, make_plan
from meshsim.scenario.model import Area

SCRIPT = """\
# nodes: 2, max speed: 4.00 (by hand)
$node_(0) set X_ 10.0
$node_(0) set Y_ 20.0
$node_(0) set Z_ 0.0
$node_(1) set X_ 100.0
$node_(1) set Y_ 100.0
$god_ set-dist 0 1 2
$ns_ at 0.0 "$node_(0) setdest 50.0 20.0 4.0"
$ns_ at 5.0 "$node_(1) setdest 100.0 40.0 2.0"
$ns_ at 20.0 "$node_(1) setdest 130.0 40.0 1.0"
$ns_ at 15.0 "$node_(0) setdest 50.0 60.0 0.0"
$ns_ at 30.0 "$god_ set-dist 0 1 1"
"""
AREA = Area(300.0, 200.0)


def _doc(tmp_path: Path, script: str, **mobility: object) -> dict[str, object]:
    (tmp_path / "moves.ns2").write_text(script)
    doc = base_doc()
    doc["area"] = {"width_m": 300.0, "height_m": 200.0}
    doc["mobility"] = {"model": "setdest", "file": "moves.ns2", **mobility}
    return doc


def test_hand_computed_positions(tmp_path: Path) -> None:
    scenario = from_dict(_doc(tmp_path, SCRIPT), base_dir=tmp_path)
    plan = make_plan(scenario)
    traj = plan.trajectories
    # ns-2 node 0 is node id 1, node 1 is id 2 (the scenario's ids in order).
    expect_1 = {0.0: (10.0, 20.0), 5.0: (30.0, 20.0), 10.0: (50.0, 20.0), 15.0: (50.0, 20.0),
                100.0: (50.0, 20.0)}  # arrives at t = 10; speed 0 at t = 15 keeps it there
    # Node 2 leaves (100, 100) at t = 5 at 2 m/s south; at t = 20 it is at (100, 70) and
    # turns towards (130, 40): 30 sqrt 2 m at 1 m/s, arriving at t = 20 + 42.43.
    d = 10 / math.sqrt(2)
    expect_2 = {0.0: (100.0, 100.0), 5.0: (100.0, 100.0), 10.0: (100.0, 90.0),
                20.0: (100.0, 70.0), 30.0: (100.0 + d, 70.0 - d),
                20.0 + 30 * math.sqrt(2): (130.0, 40.0), 500.0: (130.0, 40.0)}
    for node, expect in ((1, expect_1), (2, expect_2)):
        for t, (x, y) in expect.items():
            got = traj.position(node, t)
            assert got == pytest.approx((x, y), abs=1e-9), (node, t)
    placed = plan.positions[3]  # not in the script: stays where the line placement put it
    assert traj.position(3, 400.0) == placed and plan.positions[1] == (10.0, 20.0)


def test_first_ns2_node_shifts_the_mapping(tmp_path: Path) -> None:
    script = '$node_(1) set X_ 1.0\n$node_(1) set Y_ 2.0\n$ns_ at 1 "$node_(3) setdest 3 4 1"\n'
    scenario = from_dict(_doc(tmp_path, script, first_ns2_node=1), base_dir=tmp_path)
    traj = make_plan(scenario).trajectories
    assert traj.position(1, 0.0) == (1.0, 2.0)   # ns-2 node 1 is the first id
    assert traj.position(3, 1000.0) == (3.0, 4.0)


def test_a_later_setdest_at_the_same_time_wins() -> None:
    lines = ['$ns_ at 2 "$node_(0) setdest 10 0 1"', '$ns_ at 2 "$node_(0) setdest 0 10 1"']
    script = parse_setdest(lines, "s", [7], AREA)
    track = setdest_tracks(script, {7: (0.0, 0.0)})[7]
    assert track.position(12.0) == pytest.approx((0.0, 10.0))


@pytest.mark.parametrize(("line", "problem"), [
    ("$node_(0) set X_ abc", "bad number 'abc'"),
    ("$node_(0) set X_ nan", "bad number 'nan'"),
    ('$ns_ at 1.0 "$node_(0) setdest 1 2"', "expected '$node_(i) set X_|Y_|Z_ v' or"),
    ("set opt(nn) 5", "expected '$node_(i) set"),
    ('$ns_ at 1.0 "$node_(0) set X_ 3"', "expected '$node_(i) set"),
    ("$node_(9) set X_ 1", "$node_(9) has no scenario node (ns-2 nodes 0..4 map to the 5"),
    ('$ns_ at -1 "$node_(0) setdest 1 2 3"', "negative time -1"),
    ('$ns_ at 1 "$node_(0) setdest 1 2 -3"', "negative speed -3"),
    ('$ns_ at 1 "$node_(0) setdest 301 2 3"', "x = 301 is outside the area (0..300)"),
    ("$node_(0) set Y_ 250", "Y_ = 250 is outside the area (0..200)"),
])
def test_malformed_lines_are_one_line_errors_naming_file_and_line(
        tmp_path: Path, line: str, problem: str) -> None:
    script = "# header\n$node_(1) set X_ 5\n$node_(1) set Y_ 5\n" + line + "\n"
    with pytest.raises(ScenarioError) as err:
        from_dict(_doc(tmp_path, script), base_dir=tmp_path)
    message = str(err.value)
    assert message.startswith("mobility.file moves.ns2:4: ") and problem in message
    assert "\n" not in message


def test_x_without_y_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"moves.ns2:2: node 1 gets X_ but never Y_"):
        from_dict(_doc(tmp_path, "\n$node_(0) set X_ 5\n"), base_dir=tmp_path)


def test_the_file_is_required_and_must_exist(tmp_path: Path) -> None:
    doc = base_doc()
    doc["mobility"] = {"model": "setdest"}
    with pytest.raises(ScenarioError, match=r"^mobility.file: required key is missing"):
        from_dict(doc, base_dir=tmp_path)
    doc["mobility"] = {"model": "setdest", "file": "nope.ns2"}
    with pytest.raises(ScenarioError, match=r"^mobility.file: cannot read"):
        from_dict(doc, base_dir=tmp_path)
