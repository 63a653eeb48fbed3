"""Roles on the virtual mesh: what each device's daemon is told it is, by the inventory.

A scenario's node groups give their members a role; on a device that is the
daemon's ``node.roles`` (its protocol's capabilities, advertised in its
beacons), and a role with ``[protocol.NAME.roles.ROLE]`` parameters gets them
as the device's own ``protocol.params``: exactly what a field engineer writes
into a base station's or a ferry's host variables.
"""

from __future__ import annotations

from typing import Any

from meshsim.scenario.model import Scenario
from meshsub.core.params import params_to_dict


def role_host_vars(scenario: Scenario, node_ids: list[int]) -> dict[int, dict[str, Any]]:
    """Host variables per scenario node id: ``meshsub_node_roles`` and, for a role with
    its own parameters, ``meshsub_protocol_params``."""
    own = dict(scenario.protocol.role_params)
    out: dict[int, dict[str, Any]] = {}
    for node in node_ids:
        role = scenario.nodes.role_of(node)
        host: dict[str, Any] = {"meshsub_node_roles": [role] if role else []}
        if role in own:
            host["meshsub_protocol_params"] = {k: v for k, v in params_to_dict(own[role]).items()
                                               if v is not None}
        out[node] = host
    return out
