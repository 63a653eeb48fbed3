"""The daemon's protocol: the whole registry checked in a child, one protocol loaded here.

``core.registry.get_protocol`` loads every installed protocol to check that no
two claim one name or frame id (a collision must stop the daemon, naming
both). For a daemon that runs one protocol that kept all fourteen resident:
8 MiB of its idle memory. Within ``isolated()`` (``meshsubd`` runs in it from before it
reads its configuration) the check runs in a forked child, which loads them
all, answers with the error text or nothing, and exits; this process then
loads only the protocol it runs. The answer and its errors are those of
``get_protocol``: the child's ``RegistryError`` is raised again here.

Fork is safe where it is used: ``meshsubd`` reads its configuration before it
starts a thread or an event loop (``isolated()`` is used nowhere else).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from meshsub.core.protocol import Protocol
from meshsub.core.registry import RegistryError, get_protocol, load_protocol, load_registry

_state = {"isolated": False, "checked": False}


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
