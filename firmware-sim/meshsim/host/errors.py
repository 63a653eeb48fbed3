"""One error type for the whole virtual mesh, so the CLI can print it as one line."""

from __future__ import annotations


class VmeshError(Exception):
    """A vmesh operation failed in a way the user can act on (message is one line)."""
