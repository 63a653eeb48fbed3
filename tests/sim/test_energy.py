"""The simulator's energy model is the protocols' energy input (``[energy]``).

Batteries are charged by the first-order radio model for every transmission and
reception; what they hold is checked against the run's own tx/rx records, and
HESPER with ``energy_source = "external"`` (dead before: nothing fed it) retires
brokers as the simulated batteries run down.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from simhelpers import SCENARIOS, base_doc, read_run

from meshsim.des.engine import Simulation
from meshsim.des.run import run_scenario
from meshsim.scenario import ScenarioError, from_dict, load_scenario
from meshsub.core.energy import RadioEnergy


class Sink:
    def __init__(self) -> None:
        self.records: list[tuple[int, int, str, dict[str, object]]] = []

    def record(self, node: int, ts_ns: int, event: str, attrs: object) -> None:
        self.records.append((node, ts_ns, event, dict(attrs)))  # type: ignore[call-overload]


def test_batteries_hold_what_the_radio_model_charged_for_each_record() -> None:
    doc = base_doc()
    doc["energy"] = {"enabled": True, "initial_j": 0.01, "report_s": 5.0, "mains": [3]}
    doc["workload"]["publications"] = [{"t": float(t), "node": 1, "event": "a/b x=2"}
                                       for t in range(1, 5)]
    scenario = from_dict(doc)
    sink = Sink()
    sim = Simulation(scenario, sink)
    sim.run()
    model = RadioEnergy(scenario.radio.range_m)
    pos = sim.plan.positions
    spent = dict.fromkeys(sim.nodes, 0.0)
    for node, _, event, attrs in sink.records:
        if node == 3:
            continue
        if event == "tx":
            peer = attrs.get("peer")
            d = None if peer is None else math.dist(pos[node], pos[peer])  # type: ignore[index]
            spent[node] += model.tx_joules(attrs["bytes"], d)  # type: ignore[arg-type]
        elif event == "rx":
            spent[node] += model.rx_joules(attrs["bytes"])  # type: ignore[arg-type]
    assert sim.batteries is not None
    assert sim.batteries.spent_j == pytest.approx(spent)
    assert spent[1] > 0 and spent[2] > spent[5]  # the middle relays; the end only listens
    for node, st in sim.nodes.items():  # traffic ended before the last report (t = 10)
        if node == 3:
            assert (st.proto.energy_fraction, st.proto.on_mains) == (None, True)
        else:
            assert st.proto.energy_fraction == pytest.approx(1 - spent[node] / 0.01)
            assert st.proto.on_mains is False


def test_bad_energy_keys_are_one_line() -> None:
    for key, value, problem in [("initial_j", 0, "initial_j"), ("report_s", -1, "report_s"),
                                ("mains", [99], "unknown node 99"), ("joules", 1, "unknown")]:
        doc = base_doc()
        doc["energy"] = {key: value}
        with pytest.raises(ScenarioError, match=problem) as err:
            from_dict(doc)
        assert str(err.value).startswith("energy.")


def test_hesper_external_energy_retires_brokers_as_batteries_run_down(tmp_path: Path) -> None:
    """Fed by the simulator's batteries, HESPER hands broker state over; nothing is lost."""
    scenario = load_scenario(SCENARIOS / "vmesh-hesper-grid.toml", [
        "energy.enabled=true", "energy.initial_j=0.015", "energy.report_s=2.0",
        'protocol.hesper.energy_source="external"', "protocol.hesper.energy_check_s=2.0"])
    run_scenario(scenario, tmp_path / "run")
    _, records = read_run(tmp_path / "run")
    handed = [r for r in records if r["event"] == "broker" and r.get("role") == "handed_over"]
    assert handed, "no broker retired: the energy input did not reach HESPER"
    subs = [r for r in records if r["event"] == "subscribe"]
    assert len(subs) == 13
