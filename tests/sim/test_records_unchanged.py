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

import hashlib
from pathlib import Path

import pytest
from simhelpers import SCENARIOS

from meshsim.des.run import run_scenario
from meshsim.scenario import load_scenario

GOLDEN = {  # protocol on random50.toml for 20 s: (lines, sha256 of the node files)
    "flooding": (4144, "781092afbb0d1e40c4e6ab9a29446701d00f0f1720c0ae110e106aafd9eeb9bd"),
    "epidemic": (8711, "d74d7be657a4e43125db2d213dbac0f0bbcca06917d228634dbbd069538aa63e"),
}


def digest(rundir: Path) -> tuple[int, str]:
    digest, lines = hashlib.sha256(), 0
    for f in sorted(rundir.glob("node-*.jsonl"), key=lambda p: int(p.stem[5:])):
        data = f.read_bytes()
        lines += data.count(b"\n")
        digest.update(f.name.encode() + b"\0" + data)
    return lines, digest.hexdigest()


@pytest.mark.parametrize("protocol", sorted(GOLDEN))
def test_records_equal_the_engine_before(tmp_path: Path, protocol: str) -> None:
    scenario = load_scenario(SCENARIOS / "random50.toml",
                             [f"protocol.name={protocol}", "scenario.duration_s=20"])
    run_scenario(scenario, tmp_path / "run", run_id="golden", drop_summary_s=0.0)
    assert digest(tmp_path / "run") == GOLDEN[protocol]
