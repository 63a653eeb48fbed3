"""Ansible strategy plugin: Mitogen's linear strategy without its CPU pinning.

Loaded by ansible-playbook from this directory (``meshsim.vmesh.deploy`` puts it on
``ANSIBLE_STRATEGY_PLUGINS``), not imported by meshsim itself. On a host of 2 or 3
cores Mitogen reserves core 0 for its connection multiplexer and pins the
ansible-playbook process, every task worker and every ssh client to core 1
(``ansible_mitogen.affinity``, "small SMP"): the controller's share of a
deployment, about 2 s of CPU per device and task list (docs/benchmarks.md, "The
virtual mesh"), then runs on one core, and a task that never reaches a device (an
``assert``, a skipped task) leaves the other core idle while the controller works
through it host by host. The virtual devices share those two cores with the
controller, so the scheduler, not a fixed mask, places the work here. Everything
else (the connections, the tasks, their order and results) is Mitogen's linear
strategy unchanged.
"""

from __future__ import annotations

import ansible_mitogen.affinity
import ansible_mitogen.loaders
import ansible_mitogen.strategy

# The base Policy's assign_* methods do nothing: no process of the run is pinned.
ansible_mitogen.affinity.policy = ansible_mitogen.affinity.Policy()

Base = ansible_mitogen.loaders.strategy_loader.get("linear", class_only=True)


class StrategyModule(ansible_mitogen.strategy.StrategyMixin, Base):  # type: ignore[misc,valid-type]
    """``mitogen_linear`` with no CPU affinity."""
