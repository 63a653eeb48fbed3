"""The simulator's records are byte for byte those of the engine before its speed-up.

The digests below are of every node file of small runs written by the simulator at
main 402687e (before drop summaries, the batched ``rx`` records and the writer's
line patterns), with ``--run-id golden``. With ``drop_summary_s = 0`` (one record per
drop, as then) the runs must give the same bytes; with summaries, the same records
apart from the summarised drops (tests/telemetry/test_drop_summaries.py). A protocol
change that changes its records on purpose regenerates them: run ``digest`` on the
new code and say why in the commit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from simhelpers import SCENARIOS, base_doc

from meshsim.des.run import run_scenario
from meshsim.scenario import load_scenario
from meshsim.scenario.load import from_dict
from meshsim.telemetry_files import node_files_digest

GOLDEN = {  # protocol on random50.toml for 20 s: (lines, sha256 of the node files)
    "flooding": (4144, "781092afbb0d1e40c4e6ab9a29446701d00f0f1720c0ae110e106aafd9eeb9bd"),
    "epidemic": (8711, "d74d7be657a4e43125db2d213dbac0f0bbcca06917d228634dbbd069538aa63e"),
}


digest = node_files_digest


@pytest.mark.parametrize("protocol", sorted(GOLDEN))
def test_records_equal_the_engine_before(tmp_path: Path, protocol: str) -> None:
    scenario = load_scenario(SCENARIOS / "random50.toml",
                             [f"protocol.name={protocol}", "scenario.duration_s=20"])
    run_scenario(scenario, tmp_path / "run", run_id="golden", drop_summary_s=0.0)
    assert digest(tmp_path / "run") == GOLDEN[protocol]


def _pairs_energy_doc() -> dict[str, Any]:
    """Five nodes in a line, per-pair delays, batteries, a link flapping mid-flight."""
    doc = base_doc()
    doc["scenario"]["duration_s"] = 20.0
    doc["radio"].update(delay_s=0.002, links=[
        {"a": 1, "b": 2, "delay_s": 0.01}, {"a": 2, "b": 3, "delay_s": 0.0005, "loss": 0.1}])
    doc["energy"] = {"enabled": True, "initial_j": 0.01, "report_s": 3.0, "mains": [3]}
    doc["workload"]["publications"] = [
        {"t": 1.0 + 0.5 * i, "node": 1 + i % 5, "event": f"a/b x={i}"} for i in range(20)]
    doc["faults"] = [{"t": 4.0, "action": "leave", "nodes": [4]},
                     {"t": 4.001, "action": "join", "nodes": [4]}]
    return doc


CURRENT = {  # scenario (and overrides): (lines, sha256 of the node files), drop summaries on
    # Written by main 53aa005, before the simulator's own clock replaced SimPy's, the
    # frame path skipped link checks while no link changed and the writer wrote with
    # descriptor calls: the paths the small runs above do not take (GPS, mobility and
    # progress slices, faults, contacts with a bitrate, beacons, per-pair delays, energy).
    "demo.toml": (1644, "2111b58180347bea9fdecc698dc1ab8ccedfdfa332f40f3a0d82294ac3de8af1"),
    "vmesh-roles-faults.toml":
        (6376, "b4f247d1891e1e6a2d574c545124b3f2f9b7e4e930d0fc6288f5da295f7125fa"),
    "vmesh-bsub-cut.toml":
        (742, "9d1fd6133a7e1acca3a708237532d47719fa4d5cb6398f17e660b12156bcfe42"),
    "vmesh-hesper-grid.toml":
        (9843, "7548892d10b5d8e5af80a702e234e8468e571a7618c618edcd0f2118751e7829"),
    "vmesh-tg-meet.toml":
        (1481, "69295ab02c97151be318ae56995260c694ab815b1d96d0ecb04c8527a1b7a5db"),
    "pairs-energy": (314, "c0e15734b6d0e5ede056b7967844894f81980d33507665b7a7cb28155307f658"),
}


@pytest.mark.parametrize("name", sorted(CURRENT))
def test_records_equal_the_engine_before_its_own_clock(tmp_path: Path, name: str) -> None:
    if name == "pairs-energy":
        scenario = from_dict(_pairs_energy_doc())
    else:
        scenario = load_scenario(SCENARIOS / name)
    progress = None if name != "demo.toml" else (lambda _t: None)  # run in slices
    run_scenario(scenario, tmp_path / "run", run_id="golden", progress=progress)
    assert digest(tmp_path / "run") == CURRENT[name]


TG_SMALL = ["nodes.count=60", "area.width_m=700", "area.height_m=700", "scenario.warmup_s=5",
            "scenario.duration_s=15", "scenario.drain_s=0", "workload.generator.rate_per_s=3"]
"""tg-500.toml at Table 2's density, shrunk to 60 nodes and 15 s."""
SHARED = {  # scenario (and protocol): (lines, sha256 of the node files), drop summaries on
    # Written by main 0995520, before receivers of one frame shared its decoded body
    # (core.bodies.shared_decode) and TG's key masks, ST's decoded subscriptions and the
    # covering shapes were cached for the whole process: what nodes share must not
    # change what any of them does.
    "vmesh-st-line.toml": (276, "84bf3b40dfb43f5dccc378cf379361763e6c8d61f918e50c000dd786b6eb210a"),
    "tg-500.toml:tg": (22701, "5520f67dc77cdd78e3fe0c1474552d361eeef12d5a4a4c235f5d8d2bce9d77d1"),
    "tg-500.toml:st": (26701, "7390c319963630eb672c1d8c73231780562f42268b570aade6c175077915200c"),
    "tg-500.toml:flooding":
        (17325, "629a1cd83190606c226651d93c8c29839841f24f191a5326a754a32610f814b0"),
}


@pytest.mark.parametrize("name", sorted(SHARED))
def test_records_equal_before_the_shared_caches(tmp_path: Path, name: str) -> None:
    file, _, protocol = name.partition(":")
    overrides = [*TG_SMALL, f"protocol.name={protocol}"] if protocol else []
    run_scenario(load_scenario(SCENARIOS / file, overrides), tmp_path / "run", run_id="golden")
    assert digest(tmp_path / "run") == SHARED[name]
