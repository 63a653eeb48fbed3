"""``[scenario] unrecorded``: link changes counted in the manifest instead of written.

A static field of 8000 nodes at TR 100 m writes 1.8 million ``neighbor_up`` records
(99 % of the run, none read by a metric); leaving them out must change nothing else.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import pytest
from simhelpers import SCENARIOS, read_run

from meshsim.des.run import run_scenario
from meshsim.scenario import ScenarioError, load_scenario

LINK_EVENTS = ("neighbor_up", "neighbor_down")


def _run(tmp_path: Path, name: str, overrides: list[str]) -> tuple[dict, list[dict]]:
    # demo.toml: ten walking devices on a lossy ramp radio, so links come and go
    scenario = load_scenario(SCENARIOS / "demo.toml", overrides)
    run_scenario(scenario, tmp_path / name, run_id="unrecorded-test")
    return read_run(tmp_path / name)


def test_link_events_are_counted_not_written_and_nothing_else_changes(tmp_path: Path) -> None:
    _, full = _run(tmp_path, "full", [])
    manifest, lean = _run(tmp_path, "lean", ['scenario.unrecorded=["neighbor_up", '
                                             '"neighbor_down"]'])
    in_full = Counter(r["event"] for r in full if r["event"] in LINK_EVENTS)
    assert in_full["neighbor_up"] > 0 and in_full["neighbor_down"] > 0  # the demo moves
    assert not [r for r in lean if r["event"] in LINK_EVENTS]
    assert manifest["stats"]["unrecorded"] == dict(sorted(in_full.items()))
    # the same records, numbered without gaps (a gap in ``rec`` would read as a lost record)
    assert _unnumbered(r for r in full if r["event"] not in LINK_EVENTS) == _unnumbered(lean)
    for node in {r["node"] for r in lean}:
        assert [r["rec"] for r in lean if r["node"] == node] == list(
            range(sum(r["node"] == node for r in lean)))


def _unnumbered(records: Iterable[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "rec"} for r in records]


def test_a_run_recording_everything_has_no_unrecorded_count(tmp_path: Path) -> None:
    manifest, _ = _run(tmp_path, "full", [])
    assert "unrecorded" not in manifest["stats"]


@pytest.mark.parametrize(("value", "problem"), [
    ('["deliver"]', "'deliver' cannot be left unrecorded (the evaluation reads it)"),
    ('["neighbor_up", "neighbor_up"]', "an event is listed twice"),
    ('"neighbor_up"', "expected an array"),
    ('[1]', "1 cannot be left unrecorded"),
])
def test_what_cannot_be_left_unrecorded_is_one_clear_error(value: str, problem: str) -> None:
    with pytest.raises(ScenarioError, match=r"scenario\.unrecorded") as err:
        load_scenario(SCENARIOS / "demo.toml", [f"scenario.unrecorded={value}"])
    assert problem in str(err.value)
