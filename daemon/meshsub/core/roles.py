"""Roles: what a node is for a protocol (a base station, a ferry, a broker, a reference).

A role is a short name; a node has zero or more. Every tier hands a node its
roles the same way: as the protocol's ``capabilities`` at construction (the
daemon from ``node.roles`` in its configuration, the simulator and the virtual
mesh from the scenario's node group) and in every neighbour's
``NeighborInfo.capabilities`` (the daemon's beacons carry them). A protocol
that gives roles parameters of their own gets those from the driver too
(``[protocol.NAME.roles.ROLE]`` in a scenario). The names are the protocol's
vocabulary; the core only checks their form, so they fit a beacon.
"""

from __future__ import annotations

import re

ROLE_PATTERN = "[a-z][a-z0-9_]{0,31}"
_ROLE = re.compile(ROLE_PATTERN + r"\Z")
MAX_ROLES = 8
"""Roles per node (a beacon carries at most 16 capabilities)."""


class RoleError(ValueError):
    """A bad role name or role list (one-line message)."""


def check_role(name: object) -> str:
    """``name`` if it is a role name (``[a-z][a-z0-9_]{0,31}``); ``RoleError`` otherwise."""
    if not isinstance(name, str) or not _ROLE.match(name):
        raise RoleError(f"role {name!r} must match {ROLE_PATTERN}")
    return name


def check_roles(names: object) -> tuple[str, ...]:
    """A node's roles: distinct role names, at most ``MAX_ROLES``, in the order given."""
    if not isinstance(names, list | tuple):
        raise RoleError(f"roles must be a list of names, not {type(names).__name__}")
    roles = tuple(check_role(n) for n in names)
    if len(set(roles)) != len(roles):
        raise RoleError(f"a role is listed twice in {list(roles)}")
    if len(roles) > MAX_ROLES:
        raise RoleError(f"at most {MAX_ROLES} roles per node")
    return roles
