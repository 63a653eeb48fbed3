"""The medium's error type: a one-line message, printable by the vmesh CLI as it is."""

from __future__ import annotations

from meshsim.host.errors import VmeshError


class MediumError(VmeshError):
    """A medium operation failed, or was asked for something it cannot do."""
