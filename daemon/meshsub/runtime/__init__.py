"""The daemon's drivers (I/O around the sans-I/O core).

Importing this package defers ``urllib.request`` (see ``defer_import``): paho
imports it at module level for one purpose, reading proxy settings, and only
when PySocks is installed; loaded, it pulls in ``http.client`` and ``email``,
3.3 MiB of the idle daemon's resident memory that nothing uses.
"""

from __future__ import annotations

import importlib.util
import sys


def defer_import(name: str) -> None:
    """Make ``import name`` cheap: the module is executed at its first attribute access
    (``importlib.util.LazyLoader``), not at import. Nothing if it is already imported or
    cannot be found; behaviour is unchanged for any code that uses it."""
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        return
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)


defer_import("urllib.request")
