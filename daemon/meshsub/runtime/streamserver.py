"""Shutting down an asyncio stream server that tracks its connections.

The control socket and the metrics endpoint both keep their open writers and
handler tasks so that a stop ends every connection instead of leaving handlers
blocked on a read until the loop closes. The order matters: stop accepting,
end each connection, give the handlers a short grace to finish on their own,
cancel what is stuck, and only then wait for the server to close (which
otherwise waits for the handlers forever).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

GRACE_S = 2.0
"""How long handlers get to return after their connection ended."""


async def shut_down(server: asyncio.Server, writers: Iterable[asyncio.StreamWriter],
                    handlers: Iterable[asyncio.Task[None]], *, abort: bool) -> None:
    """Close ``server`` and its connections, then wait for it.

    ``abort`` drops each connection at once (a scrape loses nothing); without it
    the transports are closed, so each handler sees EOF and returns normally:
    cancelling them instead makes asyncio's stream callback log a spurious error.
    """
    server.close()
    for writer in list(writers):
        if abort:
            writer.transport.abort()
        else:
            writer.close()
    pending = set(handlers)
    if pending:
        _done, stuck = await asyncio.wait(pending, timeout=GRACE_S)
        for task in stuck:
            task.cancel()
    await server.wait_closed()
