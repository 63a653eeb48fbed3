"""Every ``# example:`` block of docs/scenarios.md is a valid part of a scenario.

A block is completed with the least it needs (the scenario's header, and nodes:
the groups example's groups, or plain random nodes for a top-level
``[mobility]``), loaded and planned; so the documentation cannot drift from what
the loader accepts.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from meshsim.scenario import loads_scenario, make_plan

DOC = (Path(__file__).resolve().parents[2] / "docs" / "scenarios.md").read_text()
BLOCKS = dict(re.findall(r"```toml\n# example: ([^\n]+)\n(.*?)```", DOC, flags=re.S))
HEADER = '''
[scenario]
name = "docs"
duration_s = 700.0
[area]
width_m = 200.0
height_m = 200.0
[protocol]
name = "epidemic"
'''
PLAIN_NODES = '''
[nodes]
count = 4
placement = "random"
'''


def test_the_examples_are_there() -> None:
    assert {"groups", "lattice_walk", "faults", "energy", "role parameters", "arrivals",
            "generators"} <= set(BLOCKS)


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_each_example_loads_and_plans(name: str) -> None:
    block = BLOCKS[name]
    if "[[nodes.groups]]" in block:
        nodes = ""
    elif re.search(r"^\[mobility\]", block, flags=re.M):
        nodes = PLAIN_NODES
    else:
        nodes = BLOCKS["groups"]
    scenario = loads_scenario(HEADER + nodes + block)
    plan = make_plan(scenario)
    assert plan.positions
    if name == "generators":
        assert plan.subscriptions and all(s.node in plan.positions for s in plan.subscriptions)
    if name == "faults":
        assert [f.action for f in plan.faults] == ["join", "crash", "recover"]
        assert 27 in plan.absent
