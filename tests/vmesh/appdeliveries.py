"""What the applications got over MQTT in a virtual-mesh run (the workload agents' reports).

Shared by the default run's short per-protocol scenarios, which compare it with the
deliveries their telemetry checks expect.
"""

from __future__ import annotations

from typing import Any

from meshsim.vmesh.devices import scenario_sub_id


def app_deliveries(res: Any) -> set[tuple[int, str, str]]:
    """(node, sub_id, event_id) of every delivery an agent reported; every device that
    ran an agent must have reported."""
    seen: set[tuple[int, str, str]] = set()
    for node, report in res.agents.items():
        assert report is not None, f"no workload report from node {node}"
        seen |= {(node, scenario_sub_id(d["body"]["sub_id"]), d["body"]["event_id"])
                 for d in report["deliveries"]}
    return seen
