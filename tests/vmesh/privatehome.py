"""A private virtual-mesh state directory for one root test module, removed after it.

The root tests of scenario runs each bring up their own run name under their own
``MSUB_VMESH_HOME``; whatever the tests leave (devices, the medium, the run's state)
is removed when the module ends, also when a test failed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def private_vmesh_home(tmp_path_factory: pytest.TempPathFactory, run: str,
                       devices: int) -> Iterator[Path]:
    from meshsim.medium import Medium
    from meshsim.vmesh import lifecycle
    from meshsim.vmesh.plan import make_plan
    from meshsim.vmesh.runstate import HOME_ENV

    old = os.environ.get(HOME_ENV)
    home = tmp_path_factory.mktemp("vmesh-home")
    os.environ[HOME_ENV] = str(home)
    try:
        yield home
    finally:
        Medium(make_plan(devices, run).medium_netns, {}).remove()
        lifecycle.teardown(run, purge=True)
        if old is None:
            os.environ.pop(HOME_ENV, None)
        else:
            os.environ[HOME_ENV] = old
