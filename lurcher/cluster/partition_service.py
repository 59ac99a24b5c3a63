"""A partition group's replicated object on one node (``PartitionService``).

Executes the group's committed ops in commit order (see ``partitions`` for the rules:
identical bytes on every replica, each batch carrying its op's timestamp (``stamp_us``),
ops held until their metadata is applied, re-executed ops not stored twice) and gives the
primary the local effect of each op (``effect``). Checkpoints and filling a replica up to
one are ``partition_state``'s. Invariant: ``calls`` (the position of the next op) is the
same on every replica at the same op, so positions name ops across replicas.

Offsets: an ``Append`` op's messages belong at offset ``stored[key]`` (the messages the
group handed the partition before it, since its last purge): decided by commit order,
the same on every replica. The service knows how far it has handed each partition
(``end_of``: the partition's next offset when first seen, then counted at each hand-off,
so batches still in the partition's pipeline count). An ``Append`` is executed only when
the partition's end is exactly there (or past it: stored before a restart, not stored
again); a replica that is short refuses to execute it and fills the gap from a peer first
(``drain``). Fills run in one task at a time (``_fill``), driven by per-partition targets
that a later checkpoint raises while a fill is under way, so a second adoption never
starts a second fill beside the first, and ops wait until every target is reached (the
bug this closes: a first fill finishing cleared ``filling`` while a second one was still
fetching, and later ops took the offsets the second fill was copying).

Generations: a deleted stream's or topic's ids go to the next one created, so a key
``(stream, topic, partition)`` may name a later partition than the one its counts were
kept for. ``created`` holds, per key, the creation time of the partition ``stored`` and
``purged`` count; the group's first op of a later one starts them again
(``_count_generation``, in the group's order, alike everywhere), and an adopted
checkpoint's counts are reached (purge, fill) only on the partition they are of
(``_reach_counts``), never on a successor that took its ids.

Failed writes: when a write of a batch handed to a partition fails (EIO, ENOSPC: the
partition rewinds; a failed fsync: it cuts back to the last synced offset), batches handed
after it may be written at the offsets it left free. The partition is then ``broken``:
its later appends wait until every batch handed to it finished, then it is cut back to
where the first failed batch belonged and filled from a peer up to ``stored`` (``_repair``).

Purges: a ``PurgePartition`` op empties the partition (offset 0 again, offsets dropped) on
every replica at the same point of the group's order. ``purged`` counts each partition's
purges (in the checkpoint state); the partition's directory keeps how many it has been
through (``PURGES_FILE``, replaced whole right after the purge, before any later op is
carried out: a crash or a failed write leaves the previous count, never a damaged one).
A purge is two-phase across a crash: the count it will record is written first
(``PENDING_PURGES_FILE``), then the partition emptied (its own marker finishes an emptying
cut short), then the count recorded and the pending one dropped; the first read of a
partition's count after a start (``purges_of``) finishes a purge whose pending count is
above the recorded one. Invariant: a partition's recorded count is never below the purges
it went through, so it never asks its peers for messages the group purged.
When the log is executed again after a restart, an op the partition already purged past
(its file counts more purges than ``purged`` so far) is not stored again, so purged
messages are not resurrected, and a purge it already did is not done again, so messages
sent after it survive. A replica adopting a checkpoint that counts more purges than its
partition went through purges it before copying the messages it lacks; one whose partition
went through more purges than the checkpoint counts copies nothing (the purge after it is
in the log, not done again). A purge the partition's files refuse here (CannotDeleteFile:
a segment file that cannot be set aside) is owed, never counted done: the partition is
``broken`` from offset 0, so it serves no read and every later op of it waits, and
``_repair`` purges it again (every ``PURGE_RETRY_S``) before filling it and letting the
ops run. Each purge executed (or reached from a checkpoint) is told to this node's consumer
groups (``Shard.partition_purged``), whose hand-overs of the partition then complete.
Invariant: a partition whose file counts fewer purges than ``purged`` is in ``broken``
(``_owes_purge``).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import weakref
from collections import Counter, deque
from pathlib import Path
from typing import Any

import msgspec

from lurcher.cluster.host import NOOP, wait_listed
from lurcher.cluster.journal_file import replace_whole
from lurcher.cluster.partition_ops import Append, DeleteOffset, DeleteSegmentsBelow, Op, \
    PurgePartition, StoreOffset, op_decoder
from lurcher.cluster.partition_state import RETRY_S, Filler, decode_state, encode_state, \
    put_offsets, stored_offsets
from lurcher.core.faults import crash_point
from lurcher.core.wire.batch import MessageBatch
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError

log = logging.getLogger(__name__)

REMEMBERED_FAILURES = 1024
PURGE_RETRY_S = 1.0  # a purge the partition's files refused is tried again this often
PURGES_FILE = "cluster-purges"
PENDING_PURGES_FILE = "cluster-purges.pending"  # the count of a purge under way


_purges: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # partition -> its count
_ends: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # partition -> handed so far


def end_of(partition: Any) -> int:
    """The offset after the last message handed to ``partition`` (written, in flight or
    waiting in its pipeline): its next offset when first asked, then counted by ``_append``."""
    end = _ends.get(partition)
    if end is None:
        end = _ends[partition] = partition.next_offset
    return end


def purges_of(partition: Any) -> int:
    """How many replicated purges ``partition``'s directory has been through (read from
    its file once, then kept with the partition object). A purge a crash interrupted (its
    pending count above the recorded one) is finished first (``_finish_pending_purge``)."""
    purges = _purges.get(partition)
    if purges is None:
        purges = _purges[partition] = _read_count(partition, PURGES_FILE)
        pending = _read_count(partition, PENDING_PURGES_FILE)
        if pending > purges:
            purges = _finish_pending_purge(partition, pending)
        elif pending:  # the purge was done and counted: only its pending count was left
            _drop_pending(partition)
    return purges


def _read_count(partition: Any, name: str) -> int:
    try:
        return int((Path(partition.path) / name).read_text())
    except FileNotFoundError:
        return 0


def purge(partition: Any, purges: int) -> None:
    """Empty ``partition`` and record that it went through ``purges`` purges, in two phases
    (see the module doc): the pending count first, so a crash anywhere after it has the
    next start finish the purge with this count. Each file is replaced whole: a crash or a
    failed write leaves the previous content, never a damaged one. A purge is rare: its
    small writes are done in place, before any later op touches the partition. Raises
    IggyError (not purged) or OSError (not purged, or purged and its count not written)."""
    replace_whole(Path(partition.path) / PENDING_PURGES_FILE, str(purges).encode())
    crash_point("cluster-purge:pending")
    _empty_and_count(partition, purges)


def _empty_and_count(partition: Any, purges: int) -> None:
    """The second phase of ``purge``: empty the partition, record ``purges``, drop the
    pending count (one left behind is not above the count: ignored)."""
    partition.purge()
    crash_point("cluster-purge:emptied")
    replace_whole(Path(partition.path) / PURGES_FILE, str(purges).encode())
    crash_point("cluster-purge:counted")
    _purges[partition] = purges
    _ends[partition] = 0
    _drop_pending(partition)


def _drop_pending(partition: Any) -> None:
    """Remove the pending count of a purge done and counted; one that stays is logged (not
    above the count, it is ignored, and removed at the next start)."""
    try:
        (Path(partition.path) / PENDING_PURGES_FILE).unlink(missing_ok=True)
    except OSError as exc:
        log.warning("partition %s: purged, but its pending purge count cannot be removed "
                    "(%s); it is ignored", partition.path, exc)


def _finish_pending_purge(partition: Any, pending: int) -> int:
    """Finish the purge a crash interrupted (``pending``: the count it was recording);
    the partition's count now. When its files refuse, it keeps the recorded count: the
    group's purge op or checkpoint, executed again, owes the purge (``_purge_or_owe``)."""
    log.warning("partition %s: a replicated purge was interrupted (crash); finishing it",
                partition.path)
    try:
        _empty_and_count(partition, pending)
    except (IggyError, OSError) as exc:
        log.error("partition %s: cannot finish the interrupted purge now (%s)",
                  partition.path, exc)
        return _purges[partition]
    return pending


def delete_segments_below(key: tuple[int, int, int], partition: Any, below: int) -> None:
    """The group's DeleteSegments: this replica's sealed segments wholly below offset
    ``below`` go (the same ones everywhere, as every replica stores the same messages; the
    op executed again after a restart finds them gone). Raises IggyError CANNOT_DELETE_FILE
    (10008) when a segment file cannot be set aside: every segment stays here (files set
    aside that cannot be removed are logged and removed at the next start)."""
    try:
        partition.delete_segments_below(below)
    except OSError as exc:
        log.error("partition %s: the group's DeleteSegments failed on this node: %s", key, exc)
        raise IggyError(ErrorCode.CANNOT_DELETE_FILE, f"segment not deleted: {exc}") from exc


class PartitionService:
    """One partition group's replicated object on this node (see the module doc)."""

    def __init__(self, shard: Any, meta: Any) -> None:
        self.shard, self.meta = shard, meta
        self.calls = 0  # requests executed since the replica started: the same everywhere
        self.queue: deque[tuple[int, Op]] = deque()  # executed, waiting for metadata
        self.queued: Counter[tuple[int, int, int]] = Counter()  # ops in ``queue`` per partition
        self.done: dict[int, asyncio.Future] = {}  # position -> its local effect, until done
        self.failed: dict[int, BaseException] = {}  # recent positions whose effect failed
        self.stored: dict[tuple[int, int, int], int] = {}  # messages per partition so far
        self.purged: dict[tuple[int, int, int], int] = {}  # purges per partition so far
        # per partition: the creation time of the generation ``stored`` and ``purged`` count
        self.created: dict[tuple[int, int, int], int] = {}
        self.unreached: set[tuple[int, int, int]] = set()  # an adopted checkpoint's, to reach
        # an adopted checkpoint's stored offsets, per partition, until it is reached
        self.offsets_to: dict[tuple[int, int, int], list[tuple[str, int, int]]] = {}
        self.settling: list[tuple[tuple[int, int, int], asyncio.Future]] = []  # ``settled``
        self.filling = False  # copying messages the group stored and we lack (``Filler``)
        self.fill_to: dict[tuple[int, int, int], int] = {}  # per partition: fill up to
        self.fill_task: asyncio.Future | None = None  # the one fill under way
        self.filler: Filler | None = None  # set once the node's forwarder exists
        self.handed: dict[tuple[int, int, int], int] = {}  # appends handed, not finished
        self.broken: dict[tuple[int, int, int], int] = {}  # lowest offset a write failed at

    def apply(self, body: bytes) -> bytes:
        if body == NOOP:
            return b""  # a new primary's announcement: not an op, not counted
        position = self.calls
        self.calls += 1
        self.done[position] = asyncio.get_running_loop().create_future()
        self._enqueue(position, op_decoder.decode(body))
        self.drain()
        return position.to_bytes(8, "little")

    def drain(self) -> None:
        """Carry out queued ops whose metadata this node has applied, in order."""
        self._drain_queue()
        if self.settling:
            self._wake_settled()

    def metadata_applied(self) -> None:
        """Told after each metadata change this node applies (the only way a partition is
        created, deleted or given another's ids here): fills of partitions deleted since are
        dropped, an adopted checkpoint's counts reached where their partition is now here,
        and the ops that waited for the metadata run. (Not on every op: ``drain``.)"""
        if self.fill_to:
            self._drop_fills_of_deleted()
        if self.unreached:
            self._reach_counts()
        self.drain()

    def _drain_queue(self) -> None:
        while not self.filling and self.queue and self.queue[0][1].meta_base <= self.meta.accepted:
            self._count_generation(self.queue[0][1])
            if self._short_of(self.queue[0][1]):
                return  # filled first; ``_fill`` drains again when done
            position, op = self._dequeue()
            try:
                effect = self._execute(op)
            except Exception as exc:  # noqa: BLE001 - every replica sees the same op
                effect = exc
            self._settle(position, effect)

    def holds(self, key: tuple[int, int, int]) -> bool:
        """Whether ops the group executed may not have reached partition ``key`` here yet:
        one is queued (waiting for metadata or a fill), or the partition is being filled or
        mended. (A new primary may be in this state; what it reads then is not current.)"""
        return key in self.queued or key in self.fill_to or key in self.broken

    def _enqueue(self, position: int, op: Op) -> None:
        self.queue.append((position, op))
        self.queued[op.stream_id, op.topic_id, op.partition_id] += 1

    def _dequeue(self) -> tuple[int, Op]:
        position, op = self.queue.popleft()
        key = (op.stream_id, op.topic_id, op.partition_id)
        self.queued[key] -= 1
        if not self.queued[key]:
            del self.queued[key]
        return position, op

    async def settled(self, key: tuple[int, int, int], timeout_s: float) -> bool:
        """True once partition ``key`` holds every op the group executed before this call
        (``holds`` is false); False after ``timeout_s``."""
        if not self.holds(key):
            return True
        return await wait_listed(self.settling, key, timeout_s)

    def _wake_settled(self) -> None:
        waiting = list(self.settling)
        self.settling.clear()  # in place: ``wait_listed`` takes its entry out of this list
        for waiter in waiting:
            key, future = waiter
            if self.holds(key):
                self.settling.append(waiter)
            elif not future.done():
                future.set_result(None)

    def _drop_fills_of_deleted(self) -> None:
        """Give up filling a partition the metadata no longer has (its stream or topic
        deleted, or its ids given to a later one): no peer serves it any more, and the fill
        holds every later op of the group. Its counts start again with the group's next op
        of a later partition (``_count_generation``). Run at each metadata change."""
        for key in list(self.fill_to):
            counted = self.created.get(key)
            if counted is not None and counted != self.generation(key)[0]:
                del self.fill_to[key]

    def _count_generation(self, op: Op) -> None:
        """Start ``op``'s partition's counts again when ``op`` is the group's first op for
        a partition created after the one they counted: a deleted stream's or topic's ids
        are given to the next one created (0.8's slab), and the new partition starts empty
        at offset 0. Decided in the group's order, from the op's ``created_at``, alike on
        every replica; an op of a partition deleted here since changes nothing
        (``_execute`` refuses it)."""
        key = (op.stream_id, op.topic_id, op.partition_id)
        counted = self.created.get(key)
        if counted == op.created_at or self.generation(key)[0] != op.created_at:
            return
        self.created[key] = op.created_at
        if counted is not None:
            for counts in (self.stored, self.purged, self.fill_to, self.broken):
                counts.pop(key, None)
            self.unreached.discard(key)
        self.offsets_to.pop(key, None)  # an adopted checkpoint's are of an earlier one

    def _short_of(self, op: Op) -> bool:
        """Whether ``op`` appends at an offset this replica's partition has not reached (if
        so a fill up to it is started), or is an op of a partition that owes the group a
        purge: either way it waits (``_repair`` or ``_fill`` drains again)."""
        key = (op.stream_id, op.topic_id, op.partition_id)
        if key in self.broken and (isinstance(op, Append) or self._owes_purge(key)):
            return True  # a write or a purge failed here: ``_repair`` drains once mended
        if not isinstance(op, Append):
            return False
        partition = self.shard.partitions.get(key)
        if partition is None or self.generation(key)[0] != op.created_at or \
                purges_of(partition) != self.purged.get(key, 0):
            return False  # refused by ``_execute``, or purged past (not stored again)
        want = self.stored.get(key, 0)
        if end_of(partition) >= want:
            return False
        self._fill_up_to(key, want)
        return True

    def _settle(self, position: int, effect: Any) -> None:
        future = self.done[position]
        if isinstance(effect, BaseException):
            self._finish(position, future, effect)
        elif inspect.isawaitable(effect):
            task = asyncio.ensure_future(effect)
            task.add_done_callback(lambda t: self._finish(
                position, future, None if t.cancelled() else t.exception()))
        else:
            self._finish(position, future, None)

    def _finish(self, position: int, future: asyncio.Future, error: BaseException | None) -> None:
        del self.done[position]
        if error is not None:
            if not isinstance(error, IggyError):
                log.error("replicated op %d failed on this node: %s", position, error)
            self.failed[position] = error
            while len(self.failed) > REMEMBERED_FAILURES:
                del self.failed[next(iter(self.failed))]
            future.set_exception(error)
            future.exception()  # nobody may wait for it (a backup): not "never retrieved"
        else:
            future.set_result(None)

    async def effect(self, result: bytes) -> None:
        """Wait for the local effect of the op whose result is ``result``. Raises what it
        raised."""
        position = int.from_bytes(result, "little")
        future = self.done.get(position)
        if future is not None:
            await asyncio.shield(future)
        elif position in self.failed:
            raise self.failed[position]

    def _partition(self, op: Any) -> Any:
        key = (op.stream_id, op.topic_id, op.partition_id)
        partition = self.shard.partitions.get(key)
        stream = self.shard.meta.state.streams.get(op.stream_id)
        topic = stream.topics.get(op.topic_id) if stream is not None else None
        if partition is None or topic is None or \
                topic.partition_created_at[op.partition_id] != op.created_at:
            raise IggyError(ErrorCode.PARTITION_NOT_FOUND,
                            f"partition {op.partition_id} of topic {op.topic_id}")
        return partition

    def _execute(self, op: Op) -> Any:
        partition = self._partition(op)
        key = (op.stream_id, op.topic_id, op.partition_id)
        if isinstance(op, (StoreOffset, DeleteOffset)) and \
                purges_of(partition) > self.purged.get(key, 0):
            return None  # the log executed again: the partition purged past it already
        if isinstance(op, StoreOffset):  # a future with enforce_fsync: ``_settle`` waits
            return partition.store_offset(op.kind, op.key, op.offset)
        if isinstance(op, DeleteOffset):
            if partition.get_offset(op.kind, op.key) is not None:
                return partition.delete_offset(op.kind, op.key)
            return None
        if isinstance(op, PurgePartition):
            return self._purge(key, partition)
        if isinstance(op, DeleteSegmentsBelow):
            return delete_segments_below(key, partition, op.below)
        batch = MessageBatch(op.count, memoryview(op.index), memoryview(bytearray(op.blob)))
        return self.shard.dedup.append(
            key, batch, op.timestamp_us,
            lambda kept: self._store(key, partition, kept, op.timestamp_us))

    def _purge(self, key: tuple[int, int, int], partition: Any) -> None:
        """The group's purge: counted in the group's order; done on the partition unless it
        was before this start; if its files refuse, owed (``_purge_or_owe``). The consumer
        groups are told at once (``partition_purged``): the group dropped the partition's
        offsets, and an owed purge serves no read here meanwhile."""
        purges = self.purged[key] = self.purged.get(key, 0) + 1
        self.stored[key] = 0
        self.fill_to.pop(key, None)
        self.broken.pop(key, None)  # what failed is purged: nothing to mend
        if purges_of(partition) < purges:  # else purged before this start
            self._purge_or_owe(key, partition)
        self.shard.partition_purged(*key)

    def _owes_purge(self, key: tuple[int, int, int]) -> bool:
        """Whether partition ``key`` (the one the group's counts are of, not a successor
        that took its ids) went through fewer purges than the group executed."""
        partition, counted = self.shard.partitions.get(key), self.created.get(key)
        return partition is not None and counted in (None, self.generation(key)[0]) and \
            purges_of(partition) < self.purged.get(key, 0)

    def _purge_to_count(self, key: tuple[int, int, int], partition: Any) -> Exception | None:
        """Purge ``partition`` and record the group's purge count; what refused it."""
        try:
            purge(partition, self.purged.get(key, 0))
        except (IggyError, OSError) as exc:  # CannotDeleteFile, or its count not written
            return exc
        return None

    def _purge_or_owe(self, key: tuple[int, int, int], partition: Any) -> bool:
        """Purge ``partition`` up to the group's count; when its files refuse, the purge is
        owed: the partition is broken from offset 0 (no read served, its ops held) and
        ``_repair`` tries again. Whether it is purged."""
        refused = self._purge_to_count(key, partition)
        if refused is None:
            return True
        log.error("partition %s: the group's purge failed on this node (%s); its reads and "
                  "later ops wait until it is purged (tried again every %.0f s)", key,
                  refused, PURGE_RETRY_S)
        self.broken[key] = 0
        if key not in self.handed:  # else ``_handed_back`` repairs once they finished
            asyncio.get_running_loop().call_soon(self._repair, key)
        return False

    def _store(self, key: tuple[int, int, int], partition: Any, batch: MessageBatch,
               timestamp_us: int) -> Any:
        stored = self.stored.get(key, 0)
        self.stored[key] = stored + batch.count
        if stored + batch.count <= end_of(partition) or \
                purges_of(partition) > self.purged.get(key, 0):
            return None  # stored before this start (the log is re-executed), or purged
        return self._append(key, partition, batch, timestamp_us)

    def _append(self, key: tuple[int, int, int], partition: Any, batch: MessageBatch,
                timestamp_us: int) -> Any:
        """Hand ``batch`` to the partition, to be stamped with ``timestamp_us``. A failed
        write is reconciled (``_repair``) before any later append of the partition runs."""
        start = end_of(partition)
        _ends[partition] = start + batch.count
        batch.stamp_us = timestamp_us
        self.handed[key] = self.handed.get(key, 0) + 1
        try:
            written = self.shard.append(partition, batch)
        except BaseException:
            self._handed_back(key, partition, purges_of(partition), start, failed=True)
            raise
        if written is None:
            self._handed_back(key, partition, purges_of(partition), start, failed=False)
            return None
        return asyncio.ensure_future(  # a task: counted back even if nobody awaits it
            self._watch(key, partition, purges_of(partition), start, written))

    async def _watch(self, key: tuple[int, int, int], partition: Any, purges: int,
                     start: int, written: Any) -> None:
        failed = True
        try:
            await written
            failed = False
        finally:
            self._handed_back(key, partition, purges, start, failed)

    def _handed_back(self, key: tuple[int, int, int], partition: Any, purges: int,
                     start: int, failed: bool) -> None:
        """One handed append finished. A failure (not one refused by a purge or deletion
        since) marks the partition broken from ``start``: batches handed after it may
        have been written at offsets the failed one left free."""
        self.handed[key] -= 1
        if failed and self.shard.partitions.get(key) is partition and \
                purges_of(partition) == purges:
            self.broken[key] = min(start, self.broken.get(key, start))
        if not self.handed[key]:
            del self.handed[key]
            if key in self.broken:
                asyncio.get_running_loop().call_soon(self._repair, key)

    def _repair(self, key: tuple[int, int, int]) -> None:
        """Every append handed to a broken partition finished: purge it first if it owes
        the group a purge, cut it back to where the first failed write belonged and copy
        the group's messages from there from a peer, then let the held ops run. (A rare
        repair: the cut is done in place.)"""
        if key in self.handed or key not in self.broken:
            return
        owed_purge = self._owes_purge(key)
        if owed_purge and not self._purge_again(key):
            return
        start, partition = self.broken.pop(key), self.shard.partitions.get(key)
        if partition is None:
            self.offsets_to.pop(key, None)
        else:
            if not owed_purge:
                log.error("partition %s: a replicated write failed at offset %d on this "
                          "node; cutting back to it and copying the group's messages from "
                          "a peer", key, start)
            if partition.next_offset > start:
                try:
                    partition.truncate_to(start)
                except OSError as exc:
                    log.error("partition %s: cannot cut back: %s", key, exc)
            _ends.pop(partition, None)
            want = self.stored.get(key, 0)
            if purges_of(partition) == self.purged.get(key, 0) and want > end_of(partition):
                self._fill_up_to(key, want)
                return
        self.drain()

    def _purge_again(self, key: tuple[int, int, int]) -> bool:
        """Try the purge partition ``key`` owes once more (its ops are held meanwhile);
        when refused again, try later. Whether it is purged now."""
        refused = self._purge_to_count(key, self.shard.partitions[key])
        if refused is not None:
            log.debug("partition %s: purging it again failed (%s)", key, refused)
            asyncio.get_running_loop().call_later(PURGE_RETRY_S, self._repair, key)
            return False
        log.warning("partition %s: purged as the group did; its held ops run now", key)
        self._put_offsets(key, self.shard.partitions[key])
        return True

    def _put_offsets(self, key: tuple[int, int, int], partition: Any) -> None:
        """Put an adopted checkpoint's stored offsets of ``key`` in place, unless the
        partition went through more purges than the checkpoint counts (it purged past them:
        the log after the checkpoint, executed again, stores the offsets that count). Not
        those of consumer groups this node's metadata no longer has: their deletion removed
        them here, as a start does (``Shard._drop_deleted_groups_offsets``)."""
        wanted = self.offsets_to.pop(key, None)
        if wanted is not None and purges_of(partition) == self.purged.get(key, 0):
            stream = self.shard.meta.state.streams.get(key[0])
            topic = stream.topics.get(key[1]) if stream is not None else None
            groups = topic.groups if topic is not None else {}
            put_offsets(partition, [(kind, who, offset) for kind, who, offset in wanted
                                    if kind != "groups" or who in groups])

    # ---- checkpoints (``partition_state``) ---------------------------------------------

    def snapshot(self) -> bytes:
        self._forget_deleted()
        queued = [(position, msgspec.msgpack.encode(op)) for position, op in self.queue]
        keys = {*self.stored, *self.purged, *self.created}
        offsets = {key: got for key in keys if (got := self._offsets_now(key)) is not None}
        return encode_state(self.calls, self.stored, queued, self.shard.dedup, self.purged,
                            self.created, offsets)

    def _offsets_now(self, key: tuple[int, int, int]) -> list[tuple[str, int, int]] | None:
        """``key``'s stored offsets as the group's executed ops left them (None: unknown
        here): an adopted checkpoint's while its partition is not reached yet or owes a
        purge (what the partition holds then is not the group's), else the partition's,
        if it is the generation the counts are of."""
        if key in self.offsets_to:
            return self.offsets_to[key]
        partition = self.shard.partitions.get(key)
        if partition is None or key in self.unreached or \
                self.created.get(key) not in (None, self.generation(key)[0]):
            return None
        return [] if self._owes_purge(key) else stored_offsets(partition)

    def restore(self, state: bytes) -> None:
        """Adopt a checkpoint's state; copy the messages it counts that this replica's
        partitions lack before any later op is carried out."""
        decoded = decode_state(state, self.shard.dedup)
        self.stored = {tuple(k): n for k, n in decoded.stored}
        self.purged = {tuple(k): n for k, n in decoded.purged}
        self.created = {tuple(k): at for k, at in decoded.created}
        self.offsets_to = {tuple(k): offsets for k, offsets in decoded.offsets}
        for position, _ in self.queue:  # covered by the checkpoint (stored or queued)
            self._finish(position, self.done[position], None)
        self.calls = decoded.calls
        self.queue, self.queued = deque(), Counter()
        for position, body in decoded.queued:
            self.done.setdefault(position, asyncio.get_running_loop().create_future())
            self._enqueue(position, op_decoder.decode(body))
        self.unreached = set(self.stored) | set(self.purged) | set(self.offsets_to)
        self._reach_counts()

    def _forget_deleted(self) -> None:
        """Drop the counts of partitions this node's metadata no longer has (deleted, or
        their ids taken by a later one, whose first op would start them again), so the
        state and every checkpoint stay the size of the live partitions however many are
        created and deleted. Not those of an adopted checkpoint still to be reached
        (``unreached``: this node's metadata may not have their partition yet); ops only
        run once their partition is in the metadata, so no other count is of one to come."""
        for key in [k for k in {*self.stored, *self.purged, *self.created}
                    if k not in self.unreached]:
            counted = self.created.get(key)
            current = self.generation(key)[0]
            if current == -1 or (counted is not None and counted != current):
                for counts in (self.stored, self.purged, self.created, self.offsets_to):
                    counts.pop(key, None)

    def _reach_counts(self) -> None:
        """Bring the partitions of ``unreached`` to an adopted checkpoint's counts (purge
        what the others purged while this one was behind, put its stored offsets in place,
        then copy what it lacks), each
        once this node's metadata has the partition those counts are of: not a partition
        deleted since (its ids taken by a later one, which the counts must never purge or
        fill), nor one whose creation this node has not applied yet (done when it has:
        ``metadata_applied``)."""
        for key in list(self.unreached):
            counted = self.created.get(key)
            if counted is not None and counted != self.generation(key)[0]:
                continue
            self.unreached.discard(key)
            partition = self.shard.partitions.get(key)
            if partition is None:
                self.offsets_to.pop(key, None)
                continue
            if purges_of(partition) < self.purged.get(key, 0):
                self.fill_to.pop(key, None)  # purged on the others while this one was behind
                self.shard.partition_purged(*key)
                if not self._purge_or_owe(key, partition):
                    continue  # filled once purged (``_repair``)
            self._put_offsets(key, partition)
            if self.stored.get(key, 0) > end_of(partition) and \
                    purges_of(partition) == self.purged.get(key, 0):  # else purged past it
                self._fill_up_to(key, self.stored[key])

    def _fill_up_to(self, key: tuple[int, int, int], want: int) -> None:
        """Copy ``key``'s messages up to offset ``want`` before any later op is carried out
        (joins the fill under way, if any)."""
        self.fill_to[key] = max(self.fill_to.get(key, 0), want)
        self.filling = True
        if self.fill_task is None or self.fill_task.done():
            self.fill_task = asyncio.ensure_future(self._fill())

    def _start_at(self, key: tuple[int, int, int], partition: Any, offset: int) -> None:
        """Start ``partition`` at ``offset`` (its peers deleted what it lacks below it),
        once no append handed to it is still in flight (else the fill asks again)."""
        if key in self.handed:
            raise RuntimeError(f"partition {key}: appends in flight")
        partition.skip_to(offset)
        _ends[partition] = offset

    def generation(self, key: tuple[int, int, int]) -> tuple[int, int]:
        """(created_at, purges) of partition ``key`` as this replica's group order has it:
        what a fill asks for and what answering one requires (-1: no such topic here)."""
        stream = self.shard.meta.state.streams.get(key[0])
        topic = stream.topics.get(key[1]) if stream is not None else None
        try:
            created_at = topic.partition_created_at[key[2]]
        except (AttributeError, IndexError, KeyError):
            created_at = -1
        return created_at, self.purged.get(key, 0)

    async def _fill(self) -> None:
        """The one fill task: reach every target in ``fill_to`` (targets raised meanwhile
        included), then let the held ops run."""
        failures = 0
        while self.fill_to:
            try:
                await self.filler.fill(self.fill_to, end_of, self._append, self.generation,
                                       self._start_at)
            except Exception:
                failures += 1  # the first with its traceback, the rest quietly (every RETRY_S)
                log.log(logging.ERROR if failures == 1 else logging.DEBUG,
                        "copying messages this replica lacks failed (%d times); retrying "
                        "(the group's later ops wait)", failures, exc_info=failures == 1)
                await asyncio.sleep(RETRY_S)
        self.filling = False
        self.drain()
