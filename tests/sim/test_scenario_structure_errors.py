"""Bad groups, roles, lattice walks, faults and generators: one line naming the key.

Every case is an override of the shipped ``vmesh-roles-faults.toml``, loaded as
``meshsim validate`` loads it (the plan too, where faults are resolved); the CLI
prints the same error as one line and exits 2 (checked once, end to end).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from simhelpers import SCENARIOS

from meshsim.scenario import ScenarioError, load_scenario, make_plan

SCENARIO = SCENARIOS / "vmesh-roles-faults.toml"
G = "nodes.groups"

CASES = [
    # groups and roles
    ([f'{G}[0].name="Stations"'], f"{G}[0].name: 'Stations': a group name"),
    ([f'{G}[1].name="stations"'], f"{G}[1].name: group 'stations' is defined twice"),
    ([f"{G}[0].count=0"], f"{G}[0].count"),
    ([f'{G}[0].role="Base Station"'], f"{G}[0].role: role 'Base Station' must match"),
    ([f"{G}[1].first_id=3"], f"{G}[1].count: node id 3 is already another node's"),
    ([f"{G}[0].spacing_m=90.0"], f"{G}[0].spacing_m: a 3 x 2 lattice of 90 m cells"),
    ([f"{G}[1].box=[0.0, 0.0, 500.0, 10.0]"], f"{G}[1].box: must be a non-empty rectangle"),
    ([f"{G}[0].box=[0.0, 0.0, 50.0, 50.0]"], f'{G}[0].box: only for placement = "random"'),
    ([f'{G}[2].positions[0].id=1'], f"{G}[2].positions: node id 1 is already another node's"),
    (["nodes.count=3"], "nodes.count: not with groups"),
    (['mobility.model="random_walk"'], "mobility.model: with [[nodes.groups]] each group"),
    (["protocol.epidemic.roles.ferry={buffer_size=5}"],
     "protocol.epidemic.roles.ferry: no node group has role 'ferry'"),
    (["protocol.epidemic.roles.client.buffer_size=0"],
     "protocol.epidemic.roles.client.buffer_size: must be at least 1"),
    # the lattice walk
    ([f"{G}[1].mobility.cell_m=0.0"], f"{G}[1].mobility.cell_m"),
    ([f"{G}[1].mobility.columns=4"], f"{G}[1].mobility.columns: a 4 x 2 lattice"),
    ([f'{G}[1].mobility.motion="hop"'], f"{G}[1].mobility.motion: must be one of glide, "),
    ([f'{G}[1].mobility.border="wrap"'], f"{G}[1].mobility.border: must be one of reflect"),
    ([f"{G}[1].mobility.step_s=-1.0"], f"{G}[1].mobility.step_s"),
    ([f"{G}[0].mobility.speed_min=1.0"], f"{G}[0].mobility.speed_min: only for model = "),
    # faults
    (['faults[1].action="explode"'], "faults[1].action: must be one of crash, recover"),
    (["faults[1].t=500.0"], "faults[1].t: must be before the end of the run (75 s)"),
    (["faults[1].nodes=[99]"], "faults[1].nodes: unknown node 99"),
    (["faults[1].count=2"], "faults[1].nodes: give exactly one of nodes, count and fraction"),
    (['faults[2].group="ferries"'], "faults[2].group: 'ferries' is not a node group"),
    (["faults[2].fraction=1.5"], "faults[2].fraction: must be <= 1"),
    (["faults[3].nodes=[3]"], "faults[3].nodes: node 3 is not crashed at t=40"),
    (["faults[2].count=3"], "faults[2].count: 3 nodes to leave but only 2 are present"),
    # generators
    (["workload.subscribers.templates[0].pick.k=[1, 7]"],
     "workload.subscribers.templates[0].pick.k: cannot pick 7 of 6 names"),
    (['workload.subscribers.templates[0].pick.predicate="maybe"'],
     "workload.subscribers.templates[0].pick.predicate: expected \"exists\""),
    (['workload.subscribers.nodes="ferries"'],
     "workload.subscribers.nodes: 'ferries' is neither \"all\" nor a node group"),
    (["workload.subscribers.per_node=[2, 1]"], "workload.subscribers.per_node"),
    (['workload.arrivals.lifetime="soon"'], "workload.arrivals.lifetime: expected \"forever\""),
    (["workload.arrivals.lifetime={exponential = 0}"], "workload.arrivals.lifetime.exponential"),
    (["workload.arrivals.rate_per_s=0"], "workload.arrivals.rate_per_s"),
    (["workload.arrivals.templates[0].predicates.level.range.width.uniform=[20, 200]"],
     "workload.arrivals.templates[0].predicates.level.range.width: a width above high - low"),
    (["workload.arrivals.templates[0].predicates.level.range.high=0"],
     "workload.arrivals.templates[0].predicates.level.range.high: must be greater than low"),
    (["workload.generator.templates[0].attrs.span.range.width.log_uniform=[0, 10]"],
     "workload.generator.templates[0].attrs.span.range.width: log_uniform widths need min > 0"),
    (['workload.generator.templates[0].scope="everyone"'],
     "workload.generator.templates[0].scope: 'everyone' is neither a node group"),
    (["workload.subscriptions=[{node = 1, expr = \"a\", t = 5.0, until = 2.0}]"],
     "workload.subscriptions[0].until: must be after t (5)"),
    # energy with groups
    (['energy.mains="ferries"'], "energy.mains: 'ferries' is neither \"all\" nor a node group"),
]


@pytest.mark.parametrize(("overrides", "message"), CASES,
                         ids=[c[1].split(":")[0] + f"-{i}" for i, c in enumerate(CASES)])
def test_bad_values_are_one_line_naming_the_key(overrides: list[str], message: str) -> None:
    with pytest.raises(ScenarioError) as err:
        make_plan(load_scenario(SCENARIO, overrides))
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith(message), text


@pytest.mark.parametrize("command", ["validate", "simulate", "run"])
def test_every_tier_answers_with_one_line_and_status_2(command: str, tmp_path: Path) -> None:
    """The simulator and the virtual mesh (``meshsim run``, before any device exists)."""
    out = [] if command == "validate" else ["--out", str(tmp_path / "run")]
    proc = subprocess.run([sys.executable, "-m", "meshsim.cli", command, str(SCENARIO),
                           *out, "--set", "faults[3].nodes=[3]"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "faults[3].nodes: node 3 is not crashed at t=40" in proc.stderr
    assert not (tmp_path / "run").exists()


def test_the_example_validates() -> None:
    proc = subprocess.run([sys.executable, "-m", "meshsim.cli", "validate", str(SCENARIO)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "10 nodes, epidemic" in proc.stdout
