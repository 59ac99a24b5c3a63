"""An in-process shard driven through its dispatcher, with no sockets (h11's idea of a
client and a server talking in memory).

``ShardHarness`` owns a real ``Shard`` on a temporary data directory (one shard, root user
iggy/iggy). A client's request is encoded to bytes, dispatched exactly as a front end
dispatches it, and the reply turned into the bytes a front end would write, then decoded as
a client decodes them. Tests of handlers use it instead of a server process.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from lurcher.auth.root import ensure_root
from lurcher.auth.session import TRANSPORT_TCP, Session
from lurcher.runtime.config import load_config
from lurcher.core.shard.reply import RESPONSE_HEADER, ok_frame
from lurcher.core.shard.shard import Shard
from lurcher.core.wire.codec import Request
from lurcher.core.wire.commands import decode_response
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.requests.users.login_user import LoginUser

ROOT = {"LURCHER_ROOT_USERNAME": "iggy", "LURCHER_ROOT_PASSWORD": "iggy"}


class ShardHarness:
    def __init__(self, data_path: Path, environ: dict[str, str] | None = None) -> None:
        config = load_config(environ={"LURCHER_SYSTEM_PATH": str(data_path), **(environ or {})})
        self.shard = Shard(config)
        ensure_root(self.shard.meta, self.shard.passwords.hash, ROOT, True, self.shard.clock())

    def connect(self) -> Session:
        """A new client session, not logged in."""
        return self.shard.open_session("127.0.0.1:50000", TRANSPORT_TCP)

    async def exchange(self, session: Session, request: Request) -> tuple[int, bytes]:
        """(status, payload bytes) for ``request``, as they would go over the wire."""
        payload = memoryview(bytearray(request.encode()))  # writable, as a receive buffer is
        try:
            result = self.shard.dispatcher.dispatch(session, request.CODE, payload)
            if inspect.isawaitable(result):
                result = await result
        except IggyError as exc:
            return exc.status, b""
        frame = ok_frame(result)
        status, length = RESPONSE_HEADER.unpack_from(frame)
        assert len(frame) == RESPONSE_HEADER.size + length
        return status, frame[RESPONSE_HEADER.size:]

    async def call(self, session: Session, request: Request) -> Any:
        """The decoded reply to ``request``. Raises IggyError for an error status."""
        status, payload = await self.exchange(session, request)
        if status:
            raise IggyError(status, type(request).__name__)
        return decode_response(request.CODE, memoryview(payload))

    async def login(self, username: str = "iggy", password: str = "iggy") -> Session:
        """A session logged in as ``username``. Raises IggyError."""
        session = self.connect()
        await self.call(session, LoginUser(username, password))
        return session

    def close(self) -> None:
        self.shard.close()
