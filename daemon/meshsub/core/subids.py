"""Subscription ids: the rule every tier applies before an id reaches a protocol.

An id names one local subscription on one node and is one or two MQTT topic
levels on the device (``<prefix>/sub/<id>``): ``<name>``, or ``<app>/<name>``
where the broker's ACL lets each application write only below its own name
(docs/mqtt.md), so the daemon's MQTT bridge, the virtual mesh's workload (which
subscribes over MQTT) and the simulator's scenario validation must agree on it;
they all call ``check_sub_id``. Ids starting ``ctl-`` belong to ``meshsubctl
sub`` streams and are refused to applications.
"""

from __future__ import annotations

import re

CONTROL_SUB_PREFIX = "ctl-"
"""Subscription ids the control socket uses; MQTT applications may not take them."""

SUB_ID_LEVEL = "[A-Za-z0-9_.-]{1,64}"
SUB_ID_PATTERN = f"{SUB_ID_LEVEL}(/{SUB_ID_LEVEL})?"
_SUB_ID = re.compile(SUB_ID_PATTERN + r"\Z")


class SubIdError(ValueError):
    """An id that is not a valid application subscription id (one-line message)."""


def check_sub_id(sub_id: str) -> str:
    """``sub_id`` if it is ``<name>`` or ``<app>/<name>``, each 1-64 of
    ``[A-Za-z0-9_.-]``, not starting ``ctl-``; ``SubIdError`` otherwise."""
    if not isinstance(sub_id, str) or not _SUB_ID.match(sub_id):
        raise SubIdError(f"subscription id {sub_id!r} must match {SUB_ID_PATTERN}")
    if sub_id.startswith(CONTROL_SUB_PREFIX):
        raise SubIdError(f"subscription ids starting {CONTROL_SUB_PREFIX!r} are reserved")
    return sub_id
