"""The host side shared by the virtual mesh and its radio medium: commands, errors, netns.

``sh`` runs host commands and turns every failure into one ``VmeshError`` line;
``netns`` answers what exists. Both ``meshsim.medium`` (the nftables/HTB/NFQUEUE
medium) and ``meshsim.vmesh`` (devices and runs) build on this package, and it
imports neither of them, so the medium does not depend on the virtual mesh that
uses it (docs/architecture.md, "Layers").
"""

from meshsim.host.errors import VmeshError

__all__ = ["VmeshError"]
