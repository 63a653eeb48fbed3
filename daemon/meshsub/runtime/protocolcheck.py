"""The daemon's protocol: the whole registry checked once per installation, one loaded here.

``core.registry.get_protocol`` loads every installed protocol to check that no
two claim one name or frame id (a collision must stop the daemon, naming
both). For a daemon that runs one protocol that kept all fourteen resident:
8 MiB of its idle memory. Within ``isolated()`` (``meshsubd`` runs in it from before it
reads its configuration) the check runs in a forked child, which loads them
all, answers with the error text or nothing, and exits; this process then
loads only the protocol it runs. The answer and its errors are those of
``get_protocol``: the child's ``RegistryError`` is raised again here.

The child cost about 0.37 s of a device's CPU at every start, half of the daemon's
start (docs/benchmarks.md, "The virtual mesh"), for an answer that only changes when
the installation does. ``meshsubd --check-registry``, which the deployment runs as
root after every install (deploy/ansible, role meshsub), checks the registry and
records the installation it checked (``fingerprint``) in the venv, where the daemon
cannot write. A start whose installation has that fingerprint skips the child; any
other start (a package added or upgraded by hand, a rebuilt wheel of the same
version, no record at all) checks in the child as before. An installation whose
protocols' distributions carry no RECORD of their files, or are installed editable
(a development checkout, whose sources change without pip knowing), has no
fingerprint and is checked at every start.

Fork is safe where it is used: ``meshsubd`` reads its configuration before it
starts a thread or an event loop (``isolated()`` is used nowhere else).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from collections.abc import Iterator
from importlib.metadata import Distribution, entry_points
from pathlib import Path

from meshsub.core.protocol import Protocol
from meshsub.core.registry import GROUP, RegistryError, get_protocol, load_protocol, load_registry

_state = {"isolated": False, "checked": False}
RECORD_NAME = "meshsub-registry-checked"
"""The record of the checked installation, in the venv's ``share/meshsub``."""


def record_path() -> Path:
    """Where ``--check-registry`` records the installation it checked (this venv's)."""
    return Path(sys.prefix) / "share" / "meshsub" / RECORD_NAME


def _editable(dist: Distribution) -> bool:
    text = dist.read_text("direct_url.json")
    if not text:
        return False
    try:
        info = json.loads(text)
    except ValueError:
        return True  # unreadable: not to be trusted as a fixed installation
    return bool(isinstance(info, dict) and info.get("dir_info", {}).get("editable"))


def fingerprint() -> str | None:
    """sha256 of the protocols' entry points and their distributions' RECORDs, or None.

    A distribution's RECORD lists every file pip installed with its sha256, so a
    rebuilt wheel of the same version changes it too. None when a protocol's
    distribution has no RECORD or is installed editable (module docstring).
    """
    h = hashlib.sha256()
    records: dict[str, str] = {}
    for ep in sorted(entry_points(group=GROUP), key=lambda e: (e.name, e.value)):
        dist = ep.dist
        if dist is None:
            return None
        key = f"{dist.name}\0{dist.version}"
        if key not in records:
            record = dist.read_text("RECORD")
            if not record or _editable(dist):
                return None
            records[key] = hashlib.sha256(record.encode()).hexdigest()
        h.update(f"{ep.name}\0{ep.value}\0{key}\0{records[key]}\n".encode())
    return h.hexdigest()


def recorded() -> bool:
    """Whether this installation is the one ``--check-registry`` last found consistent."""
    try:
        text = record_path().read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return False
    return bool(text) and text == fingerprint()


def check_and_record() -> tuple[int, str]:
    """``load_registry()`` here, then the record written (atomically) if it changed.

    Returns the number of protocols checked and what became of the record:
    ``recorded`` (written), ``unchanged`` (it named this installation already) or
    ``none`` (an installation without a fingerprint: none kept, every start checks). Raises
    ``RegistryError`` (nothing recorded, a previous record removed: the daemon's start
    checks again) or ``OSError`` (the record cannot be written).
    """
    path = record_path()
    try:
        count = len(load_registry())
    except RegistryError:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        raise
    mark = fingerprint()
    try:
        old = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        old = ""
    if mark is None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return count, "none"
    if old == mark:
        return count, "unchanged"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{RECORD_NAME}.{os.getpid()}")
    tmp.write_text(mark + "\n", encoding="ascii")
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    return count, "recorded"


@contextlib.contextmanager
def isolated() -> Iterator[None]:
    """Within the block, ``lookup`` checks the registry in a child (once); the state
    before it comes back after (``meshsubd_main`` also runs inside test processes)."""
    saved = dict(_state)
    _state.update(isolated=True, checked=False)
    try:
        yield
    finally:
        _state.update(saved)


def lookup(name: str) -> type[Protocol]:
    """The protocol class registered as ``name``, with ``get_protocol``'s checks."""
    if not _state["isolated"] or not hasattr(os, "fork"):
        return get_protocol(name)
    if not _state["checked"]:
        if not recorded():
            check_in_child()
        _state["checked"] = True
    return load_protocol(name)


def check_in_child() -> None:
    """``load_registry()`` in a forked child; its ``RegistryError`` raised here."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 0
        try:
            os.close(read)
            load_registry()
        except RegistryError as exc:
            os.write(write, str(exc).encode(errors="replace"))
            code = 1
        except BaseException as exc:  # anything else: one line, as the parent would say
            os.write(write, f"{type(exc).__name__}: {exc}".encode(errors="replace"))
            code = 2
        os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as answer:
        message = answer.read().decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    if message or status != 0:
        raise RegistryError(message or f"the protocol registry check failed (status {status})")
