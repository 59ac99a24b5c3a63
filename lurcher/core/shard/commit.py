"""Group commit: with ``enforce_fsync`` a send is acknowledged only after an fsync that
covers it, and one fsync (in a worker thread, off the event loop) covers every batch
written while the previous one ran.

``durable(partition)`` is awaited after the batch was written: the partition's unsynced
descriptors are taken on the event loop (so a write that lands later marks them again for
the next round) and fsynced together with every other partition's in the same round.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError

log = logging.getLogger(__name__)


def _fsync_all(handles: list[Any]) -> None:
    """fsync each ``FileHandle`` (held here, so none is closed meanwhile)."""
    for handle in handles:
        os.fsync(handle.fd)


class GroupCommit:
    def __init__(self) -> None:
        self.pending: set[Any] = set()
        self.waiters: list[asyncio.Future] = []
        self.running: asyncio.Future | None = None
        self.rounds = 0

    async def durable(self, partition: Any) -> None:
        """Return once everything ``partition`` has written so far is fsynced.
        Raises IggyError CANNOT_SAVE_MESSAGES_TO_SEGMENT when fsync fails."""
        self.pending.add(partition)
        waiter = asyncio.get_running_loop().create_future()
        self.waiters.append(waiter)
        if self.running is None:
            self._start_round()
        await waiter

    def _start_round(self) -> None:
        handles = [h for partition in self.pending for h in partition.take_unsynced()]
        waiters, self.pending, self.waiters = self.waiters, set(), []
        self.rounds += 1
        self.running = asyncio.ensure_future(asyncio.to_thread(_fsync_all, handles))
        self.running.add_done_callback(lambda done: self._finish_round(done, waiters))

    def _finish_round(self, done: asyncio.Future, waiters: list[asyncio.Future]) -> None:
        self.running = None
        error = done.exception()
        for waiter in waiters:
            if waiter.done():
                continue
            if error is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(IggyError(ErrorCode.CANNOT_SAVE_MESSAGES_TO_SEGMENT,
                                               f"fsync failed: {error}"))
        if self.waiters:
            self._start_round()
