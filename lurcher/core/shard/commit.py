"""Group commit: with ``enforce_fsync`` a send is acknowledged only after an fsync that
covers it, and one round of fsyncs (in a worker thread, off the event loop) covers every
batch written while the previous round ran.

``durable(partition)`` (a future) is awaited after the batch was written: the partition's
unsynced descriptors and its next offset are taken on the event loop (so a write that lands
later marks them again for the next round) and fsynced together with every other partition's
in the same round, each partition on its own: one partition's failure fails only its
waiters. A partition that created a segment since its last round has its directory fsynced
in the round too (``Partition.take_unsynced_directory``): the new files' names must be on the
device before a batch in them is acknowledged. Rounds run one at a time on the group commit's
own thread (``WriterThread``), whose completion wakes the event loop once: no executor, no task,
no coroutine per send.

A failed fsync answers CANNOT_SYNC_FILE to every batch of that partition not yet
acknowledged (those of the round and those written while it ran) and calls
``partition.fail_storage``, which cuts them out of the log and refuses later writes: a
batch is never left half-acknowledged (answered as failed but still in the log). A
partition whose files cannot even be opened for the round (no descriptor left) fails the
same way. A round begun before a partition was purged reports nothing about its new files
(``Partition.synced_to`` takes the purge epoch the round began in).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from lurcher.core.log.io import FSYNC_THREAD
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError

log = logging.getLogger(__name__)


def _fsync_each(items: list[tuple[Any, list[Any], str | None]]) -> list[OSError | None]:
    """fsync each partition's ``FileHandle``s (held here, so none is closed meanwhile)
    through its storage backend, after starting the writeback of them all (the device gets
    every file's pages at once; measured: 0.73-0.90 against 0.84-0.98 ms for a 1 MiB log
    write and its index), then its directory when given; per partition, the error or
    None."""
    for partition, handles, _ in items:
        for handle in handles:
            partition.io.start_writeback(handle.fd)
    errors: list[OSError | None] = []
    for partition, handles, directory in items:
        try:
            for handle in handles:
                partition.io.fsync_in_worker(handle.fd)
            if directory is not None:
                partition.io.sync_directory(directory)
        except OSError as exc:
            errors.append(exc)
        else:
            errors.append(None)
    return errors


def _sync_failed(partition: Any) -> IggyError:
    return IggyError(ErrorCode.CANNOT_SYNC_FILE,
                     f"fsync failed, messages not stored: {partition.storage_failure}")


class GroupCommit:
    def __init__(self) -> None:
        self.pending: dict[Any, list[asyncio.Future]] = {}
        self.running = False
        self.rounds = 0
        self._thread = FSYNC_THREAD  # shared with segment seals (see ``FSYNC_THREAD``)

    def durable(self, partition: Any, waiter: asyncio.Future | None = None) -> asyncio.Future:
        """A future (``waiter`` if given) that resolves once everything ``partition`` has
        written so far is fsynced, or fails with IggyError CANNOT_SYNC_FILE when fsync fails
        (the batch is then cut off)."""
        if waiter is None:
            waiter = asyncio.get_running_loop().create_future()
        self.pending.setdefault(partition, []).append(waiter)
        if not self.running:
            self._start_round()
        return waiter

    def _start_round(self) -> None:
        work = []
        for partition, waiters in self.pending.items():
            try:
                handles = partition.take_unsynced()
            except OSError as exc:  # its files cannot be opened to fsync: not durable
                partition.fail_storage(exc)
                _settle(waiters, _sync_failed(partition))
                continue
            work.append((partition, handles, partition.take_unsynced_directory(),
                         (partition.next_offset, partition.epoch), waiters))
        self.pending = {}
        self.rounds += 1
        self.running = True
        errors: list[OSError | None] = []
        items = [(p, handles, directory) for p, handles, directory, _, _ in work]
        self._thread.run(lambda: errors.extend(_fsync_each(items)),
                         lambda failure: self._finish_round(failure, errors, work))

    def _finish_round(self, failure: OSError | None, errors: list[OSError | None],
                      work: list[tuple]) -> None:
        self.running = False
        if failure is not None:
            errors = [failure] * len(work)
        for (partition, _, _, sync_point, waiters), error in zip(work, errors):
            if error is None and partition.storage_failure is None:
                partition.synced_to(*sync_point)
                _settle(waiters, None)
                continue
            if error is not None:
                partition.fail_storage(error)
            _settle(waiters, _sync_failed(partition))
        for partition in [p for p in self.pending if p.storage_failure is not None]:
            _settle(self.pending.pop(partition), _sync_failed(partition))
        if self.pending:
            self._start_round()


def _settle(waiters: list[asyncio.Future], error: IggyError | None) -> None:
    for waiter in waiters:
        if waiter.done():
            continue
        if error is None:
            waiter.set_result(None)
        else:
            waiter.set_exception(error)
