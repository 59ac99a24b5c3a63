"""Asynchronous, ordered appends of one partition: the event loop never waits for the disk
(a small batch on an idle partition skips this pipeline: ``inline``).

Owns the partition's batches between "accepted" and "acknowledged":

- ``waiting``: batches not stamped yet, in arrival order. A batch waits while the
  partition already has ``max_inflight`` batches submitted (back-pressure: its sender's
  reply waits, and a connection sends its next request only after the reply), while the
  open segment must roll over and earlier batches are still being written to it, with
  ``enforce_fsync`` while that full segment is fsynced before its successor is created
  (``Partition.seal_async``, off the event loop; ``sealing``), or while the partition
  settles after a failed write.
- ``inflight``: batches stamped (offsets and timestamp assigned, in order) and submitted
  to the storage backend (``IoBackend.submit_pair``), oldest first.

Invariants: stamping happens in arrival order; completions are taken in submission order
(a completion that arrives early waits for the ones before it), so the partition's visible
state (``Partition.next_offset``, its segments' indexes) only ever grows by whole written
batches, in order, and a poll never sees a byte that is not written yet. A batch is
acknowledged (its future resolved) only when it and every batch before it are written.

A failed write fails that batch and every batch submitted after it with the same
CANNOT_WRITE_TO_FILE error (their positions assumed it); once the last of them completed,
the partition cuts its files back to the written state (``Partition.settle``) and takes the
waiting batches again. Nothing acknowledged is touched. A submission that raises anything
else (a bug) fails its batch the same way, logged, so the pipeline never keeps a batch that
no completion will take.

Orphans (``abandon``: the partition was closed or purged with batches in flight) no longer
change the partition, but they are still answered in submission order, and once one failed
every later one of the same abandon fails too: its bytes lie past a hole that recovery
stops at, so acknowledging it would lose it at the next start. Their files are not cut
back (the partition is gone); recovery at the next start keeps what is whole up to the
first hole. Batches still waiting at a purge are answered as purged with the rest (they came
before it); at a close they are refused (PARTITION_NOT_FOUND when the partition was
deleted).

Memory: at most ``max_inflight`` batches in flight per partition; each waiting batch is the
request of a connection that awaits its reply (a connection runs one request at a time), so
waiting batches are bounded by the connections times the send frame limit.
"""

from __future__ import annotations

import asyncio
import errno
import logging
from collections import deque
from typing import Any

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError

log = logging.getLogger(__name__)

DEFAULT_MAX_INFLIGHT = 8


class PendingAppend:
    """A stamped, submitted batch: where it goes and what keeps its buffers and files alive."""

    __slots__ = ("segment", "blob", "entries", "count", "log_position", "index_position",
                 "handles", "future", "error", "completed", "orphan")

    def __init__(self, segment: Any, blob: Any, entries: Any, count: int,
                 positions: tuple[int, int], handles: tuple) -> None:
        self.segment, self.blob, self.entries, self.count = segment, blob, entries, count
        self.log_position, self.index_position = positions
        self.handles = handles
        self.future: asyncio.Future | None = None
        self.error: OSError | None = None
        self.completed = False
        self.orphan = False  # the partition was purged or closed meanwhile


class AppendPipeline:
    """The ordered asynchronous appends of one ``Partition`` (see the module docstring)."""

    def __init__(self, max_inflight: int = DEFAULT_MAX_INFLIGHT) -> None:
        """The partition is passed to each call (no reference cycle with it)."""
        if max_inflight < 1:
            raise ValueError("system.partition.max_inflight_batches must be at least 1, "
                             f"got {max_inflight}")
        self.max_inflight = max_inflight
        self.waiting: deque[tuple[Any, asyncio.Future]] = deque()
        self.inflight: deque[PendingAppend] = deque()
        self.failure: OSError | None = None
        self.orphans: list[OrphanChain] = []  # one per ``abandon`` with batches in flight
        self.sealing = False  # the open segment is being fsynced before it rolls over
        self._pumping = False

    @property
    def idle(self) -> bool:
        return not self.inflight

    def submit(self, partition: Any, batch: Any) -> asyncio.Future:
        """Queue a validated batch; the future resolves (None) once it is written, or fails
        with IggyError (see ``Partition.stamp`` and the module docstring)."""
        future = asyncio.get_running_loop().create_future()
        self.waiting.append((batch, future))
        self._pump(partition)
        return future

    def _may_stamp(self, partition: Any, batch: Any) -> bool:
        if self.failure is not None or self.sealing or len(self.inflight) >= self.max_inflight:
            return False
        if self.inflight:
            return not partition.rotation_due(len(batch.blob))
        if partition.seal_due(len(batch.blob)):
            self._seal(partition)
        return not self.sealing

    def _seal(self, partition: Any) -> None:
        """Have the full open segment fsynced off the loop; stamping resumes after it (a
        failed fsync has failed the storage: the batch is then refused by ``stamp``)."""
        self.sealing = True
        try:
            partition.seal_async(lambda: self._sealed(partition))
        except Exception:  # a bug below: stamping goes on (``stamp`` seals synchronously)
            log.exception("sealing a segment of %s failed", getattr(partition, "path", "?"))
            self.sealing = False

    def _sealed(self, partition: Any) -> None:
        self.sealing = False
        self._pump(partition)

    def _pump(self, partition: Any) -> None:
        """Stamp and submit waiting batches while the limits allow (not re-entered: a
        completion reported during a submission leaves the rest to the running loop)."""
        if self._pumping:
            return
        self._pumping = True
        try:
            while self.waiting and self._may_stamp(partition, self.waiting[0][0]):
                self._start(partition, *self.waiting.popleft())
        finally:
            self._pumping = False

    def _start(self, partition: Any, batch: Any, future: asyncio.Future) -> None:
        if future.done():  # the sender went away before its batch was stamped
            return
        try:
            pending = partition.stamp(batch)
        except IggyError as exc:
            future.set_exception(exc)
            return
        pending.future = future
        self.inflight.append(pending)
        try:
            partition.submit(pending, lambda error: self._completed(partition, pending, error))
        except OSError as exc:  # the backend refused the submission: nothing was written
            self._completed(partition, pending, exc)
        except Exception as exc:  # a bug below: fail the batch, keep the partition serving
            log.exception("submitting a batch of %s failed", getattr(partition, "path", "?"))
            self._completed(partition, pending, OSError(errno.EIO, f"internal error: {exc!r}"))

    def _completed(self, partition: Any, pending: PendingAppend, error: OSError | None) -> None:
        """A completion (on the event loop): take every finished batch at the head, in order."""
        pending.error, pending.completed = error, True
        if pending.orphan:
            self.orphans = [chain for chain in self.orphans if not chain.settle()]
            return
        while self.inflight and self.inflight[0].completed:
            self._take(partition, self.inflight.popleft())
        if self.failure is not None and not self.inflight:
            self.failure = None
            partition.settle()
        self._pump(partition)

    def _take(self, partition: Any, head: PendingAppend) -> None:
        refused = partition.storage_failure
        if head.error is None and self.failure is None and refused is None:
            partition.commit(head)
            _settle(head.future, None)
            return
        self.failure = self.failure or head.error or OSError(refused)
        _settle(head.future, _write_failed(self.failure))

    def abandon(self, refuse_with: ErrorCode | None = ErrorCode.CANNOT_WRITE_TO_FILE) -> None:
        """The partition is purged or closed: batches in flight are answered when their
        write completes, in order (``OrphanChain``), but no longer change the partition.
        Waiting ones (not stamped yet) are refused with ``refuse_with`` (a close: the server
        stops, or PARTITION_NOT_FOUND for a deleted partition); at a purge (None) they are
        answered at once as purged with the rest: they came before the purge, as in 0.8,
        whose purge runs between two sends, and as a replicated purge orders them on every
        replica (``cluster.partition_service``)."""
        if self.inflight:
            for pending in self.inflight:
                pending.orphan = True
            chain = OrphanChain(self.inflight, self.failure)
            if not chain.settle():
                self.orphans.append(chain)
        self.inflight = deque()
        self.failure = None
        while self.waiting:
            future = self.waiting.popleft()[1]
            _settle(future, None if refuse_with is None
                    else IggyError(refuse_with, _REFUSALS[refuse_with]))


_REFUSALS = {ErrorCode.CANNOT_WRITE_TO_FILE: "the partition was closed",
             ErrorCode.PARTITION_NOT_FOUND: "the partition was deleted"}


class OrphanChain:
    """The batches one ``abandon`` left in flight, answered in submission order: each once
    it and every one before it completed; after a failure (or one already known at the
    abandon) every later one fails with it."""

    __slots__ = ("pending", "failure")

    def __init__(self, pending: deque[PendingAppend], failure: OSError | None) -> None:
        self.pending = pending
        self.failure = failure

    def settle(self) -> bool:
        """Answer the completed batches at the head; True once none is left."""
        while self.pending and self.pending[0].completed:
            head = self.pending.popleft()
            self.failure = self.failure or head.error
            _settle(head.future, _write_failed(self.failure) if self.failure else None)
        return not self.pending


def _write_failed(error: OSError) -> IggyError:
    return IggyError(ErrorCode.CANNOT_WRITE_TO_FILE, str(error))


def _settle(future: asyncio.Future | None, error: IggyError | None) -> None:
    if future is None or future.done():
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)
