"""Scenario files (TOML): one description of an experiment for every driver.

``load_scenario`` validates a file (errors name the key path), ``make_plan``
draws the concrete positions and workload from the seed.
"""

from meshsim.scenario.load import from_dict, load_scenario, loads_scenario
from meshsim.scenario.model import Scenario, to_plain
from meshsim.scenario.plan import Plan, make_plan
from meshsim.scenario.reader import ScenarioError

__all__ = ["Plan", "Scenario", "ScenarioError", "from_dict", "load_scenario",
           "loads_scenario", "make_plan", "to_plain"]
