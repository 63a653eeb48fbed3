"""The virtual mesh: field devices as systemd containers on a bridged medium.

``image`` builds the device image, ``plan`` names and addresses a run, ``net``
makes the namespaces, bridges and veths, ``nodes`` runs the containers, ``runstate``
records what a run created so ``down`` removes exactly that, and ``inventory``
writes the Ansible inventory the playbook in ``deploy/ansible`` is run with.
"""

from meshsim.host.errors import VmeshError

__all__ = ["VmeshError"]
