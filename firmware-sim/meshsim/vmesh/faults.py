"""``[[faults]]`` on the virtual mesh: the devices' daemons stopped, their links cut.

The plan resolved every fault to exact nodes (``meshsim.scenario.faults``); here
each becomes what it is on a device, at ``t0 + t`` on the shared clock:

- ``crash``: ``systemctl kill --signal=SIGKILL meshsubd``, then ``systemctl stop``
  (so systemd's ``Restart=on-failure`` does not bring it back): no draining,
  what was not written is lost, what the daemon persisted stays; systemctl runs in
  the device's namespaces by ``nsenter`` (``nodes.systemctl_in``), not through
  ``podman exec``, which a busy host made seconds late;
- ``recover``: ``systemctl start meshsubd`` (a new epoch, its store, the retained
  MQTT subscriptions, and what the broker queued for its session meanwhile);
- ``leave`` / ``join``: the medium gives the node no links / its links again
  (the timeline's ``absent`` set), while its daemon runs on.

Each fault is one timeline hook, so the medium is updated right after it in
the same thread as the mobility ticks. What was done, and when, is kept for
the manifest: ``at_s`` when the fault began, ``effective_s`` when it had taken
effect on every device (the SIGKILL sent, the daemon started, the links changed)
and ``took_s`` for all of it. A crash's ``systemctl stop`` after the kill can take
seconds on a busy host; a check of what happened after a crash reads
``effective_s``, not the end of the stop.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from meshsim.host.errors import VmeshError
from meshsim.scenario.faults import FaultEvent
from meshsim.vmesh import nodes
from meshsim.vmesh.plan import NodePlan
from meshsim.vmesh.timeline import Timeline

UNIT = "meshsubd"
CRASH = (["kill", "--signal=SIGKILL", UNIT], ["stop", UNIT])
"""systemctl's arguments, in turn: the stop must follow the kill within the unit's
``RestartSec`` (3 s), or systemd starts the daemon again in between."""
RECOVER = (["start", UNIT],)


@dataclass
class VmeshFaults:
    """The plan's faults as timeline hooks on the devices ``devmap`` (scenario id -> device)."""

    devmap: dict[int, NodePlan]
    timeline: Timeline
    t0: Callable[[], float | None]
    """The run's ``t0`` once fixed (for the record of when each fault happened)."""
    done: list[dict[str, Any]] = field(default_factory=list)

    def install(self, faults: Sequence[FaultEvent], absent: frozenset[int]) -> None:
        self.timeline.absent.update(absent)
        for fault in faults:
            self.timeline.hooks.append((fault.t, functools.partial(self.apply, fault)))

    def apply(self, fault: FaultEvent) -> None:
        started = time.time()
        effective = started
        error = None
        try:
            if fault.action == "crash":
                effective = self._on_devices(fault.nodes, CRASH)
            elif fault.action == "recover":
                effective = self._on_devices(fault.nodes, RECOVER)
            elif fault.action == "leave":
                self.timeline.absent.update(fault.nodes)
            else:
                self.timeline.absent.difference_update(fault.nodes)
        except VmeshError as exc:  # recorded; the run goes on and the manifest says so
            error = str(exc)
        t0 = self.t0()
        self.done.append({"t": fault.t, "action": fault.action, "nodes": list(fault.nodes),
                          "at_s": None if t0 is None else round(started - t0, 3),
                          "effective_s": None if t0 is None else round(effective - t0, 3),
                          "took_s": round(time.time() - started, 3), "error": error})

    def _on_devices(self, ids: Sequence[int], commands: Sequence[list[str]]) -> float:
        """systemctl with each of ``commands`` in turn on every device, the devices at
        once (``nodes.systemctl_in``); returns when the first had returned on every
        device (the fault in effect)."""
        first, *rest = commands

        def run(node: int) -> float:
            nodes.systemctl_in(self.devmap[node].container, first, timeout=60)
            effective = time.time()
            for cmd in rest:
                nodes.systemctl_in(self.devmap[node].container, cmd, timeout=60)
            return effective

        with ThreadPoolExecutor(max_workers=max(1, len(ids))) as pool:
            return max(pool.map(run, ids))
