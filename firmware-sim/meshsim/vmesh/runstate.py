"""What a run created, on disk, so ``down`` removes exactly that and a crash is recoverable.

Every object is recorded *before* it is made: a run that dies halfway leaves a state
file that names at least everything that exists, and tear-down tolerates names
that were never made.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from meshsim.host.errors import VmeshError
from meshsim.vmesh.plan import DEFAULT_RUN, validate_run

HOME_ENV = "MSUB_VMESH_HOME"
DEFAULT_HOME = Path("/var/lib/msub-vmesh")
STATE_FILE = "state.json"


def home() -> Path:
    return Path(os.environ.get(HOME_ENV, str(DEFAULT_HOME)))


def run_dir(run: str = DEFAULT_RUN) -> Path:
    return home() / validate_run(run)


@dataclass
class RunState:
    run: str
    nodes: int
    image: str
    spacing_m: float
    protocol: str
    complete: bool = False
    containers: list[str] = field(default_factory=list)
    netns: list[str] = field(default_factory=list)
    host_links: list[str] = field(default_factory=list)
    arches: list[str] = field(default_factory=list)
    """Each device's Debian architecture, in plan order (empty: all the host's)."""

    def remember(self, kind: str, name: str, directory: Path) -> None:
        """Record ``name`` under ``kind`` and persist before the caller makes it."""
        items: list[str] = getattr(self, kind)
        if name not in items:
            items.append(name)
            self.save(directory)

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = directory / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        os.replace(tmp, directory / STATE_FILE)


def load_state(directory: Path) -> RunState | None:
    """The recorded state of a run, ``None`` if there is none."""
    path = directory / STATE_FILE
    try:
        data: Any = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, json.JSONDecodeError) as exc:
        raise VmeshError(f"unreadable run state {path}: {exc} (remove it to start afresh)") \
            from exc
    try:
        return RunState(
            run=str(data["run"]), nodes=int(data["nodes"]), image=str(data["image"]),
            spacing_m=float(data["spacing_m"]), protocol=str(data["protocol"]),
            complete=bool(data["complete"]),
            containers=[str(x) for x in data["containers"]],
            netns=[str(x) for x in data["netns"]],
            host_links=[str(x) for x in data["host_links"]],
            arches=[str(x) for x in data.get("arches", [])])
    except (KeyError, TypeError, ValueError) as exc:
        raise VmeshError(f"bad run state {path}: {exc} (remove it to start afresh)") from exc


def forget(directory: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        (directory / STATE_FILE).unlink()
