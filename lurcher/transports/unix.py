"""The Unix-socket front end: Iggy binary frames over a local stream socket (``[unix]``).

The same adapter as TCP (``StreamConnection``: the connection core, sendfile of large poll
replies); sessions report the TCP transport, as the wire protocol has no Unix transport code.
``section.path`` (relative paths under ``system.path``) is replaced at start; the listener
removes it when closed.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lurcher.auth.session import TRANSPORT_TCP
from lurcher.transports.connection import StreamConnection
from lurcher.transports.frontend import ListenContext, Listener, ServerListener

if TYPE_CHECKING:
    from lurcher.runtime.settings import Unix


class UnixListener(ServerListener):
    """Its ``address`` is the socket's path; the file goes away with the listener."""

    def __init__(self, server: Any, path: Path) -> None:
        self.server = server
        self.address = str(path)
        self.path = path

    def close(self) -> None:
        super().close()
        self.path.unlink(missing_ok=True)


async def listen(shard: Any, section: Unix, context: ListenContext) -> Listener:
    """Listen on ``section.path``. Raises OSError."""
    path = Path(section.path)
    path = path if path.is_absolute() else context.data_path / path
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_socket():
        os.unlink(path)  # left by a server that did not stop cleanly (the data dir is locked)
    server = await asyncio.get_running_loop().create_unix_server(
        lambda: StreamConnection(shard, TRANSPORT_TCP, cap=context.connection_cap), str(path),
        backlog=1024)
    return UnixListener(server, path)
