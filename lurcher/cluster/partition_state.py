"""Checkpoints of a partition group, and filling a replica's partitions up to one.

A partition group takes a checkpoint every ``cluster.checkpoint_every_ops`` executed ops, so
its replicas keep only the ops since (plus as many below) in memory and in their journal,
and view changes carry a bounded log. The checkpoint's state is small (``GroupState``): the
position count, how many messages each partition of the group has been handed (since its
last purge), how many purges it has been through and the creation time of the partition
those counts are of (a deleted partition's ids go to the next one), the ops still waiting
for metadata, the deduplication windows of the group's partitions, and each partition's
stored consumer and group offsets (a replica adopting the checkpoint puts them in place,
``put_offsets``: it never executes the offset ops the checkpoint covers). The messages
themselves stay in the partition logs, byte-identical on every replica.

A replica that adopts a checkpoint covering ops it never carried out (a lagging backup
given another replica's checkpoint, or a node whose last writes before a crash were lost)
finds its partitions short of the counts: ``Filler`` copies the missing messages from
another member's partition log (``fetch`` calls, any member holding them answers, only
from the same partition generation: its creation time and purge count, see ``Fetch``), in the
original batches: stored batches are told apart by their timestamps (strictly increasing
from batch to batch, equal within one), and each is appended again with its own timestamp,
so offsets, timestamps, ids, checksums and the index come out the same bytes. Until the
fill is done the group's later ops wait (``PartitionService.drain`` holds them). One fill
runs at a time per group; a checkpoint adopted during it raises its targets, and each fetch
asks from the partition's current end, so copied batches land at their own offsets. A fill
of a partition deleted meanwhile (or whose ids a later one took) is given up, so it never
holds the group's later ops for ever: no peer serves it any more. Nor does one whose
messages every other member deleted (retention, DeleteSegments): once none serves them and
each answers that it keeps the partition only from a later offset (``first_kept``), the
replica starts the partition at the lowest of those offsets (``Partition.skip_to``) and
copies from there; nothing any member still holds is skipped.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import msgspec
import numpy as np

from lurcher.core.log.offsets import KINDS
from lurcher.core.shard.dedup import IdWindow
from lurcher.core.wire.batch import HEADER_BYTES, INDEX_DTYPE, MessageBatch, read_timestamps
from lurcher.core.wire.errors import IggyError

log = logging.getLogger(__name__)

FETCH_MESSAGES = 1000
RETRY_S = 0.2
Key = tuple[int, int, int]


class WindowState(msgspec.Struct, array_like=True, frozen=True):
    key: tuple[int, int, int]
    batches: list[tuple[int, list[bytes]]]


class GroupState(msgspec.Struct, array_like=True, frozen=True):
    calls: int
    stored: list[tuple[tuple[int, int, int], int]]
    queued: list[tuple[int, bytes]]  # (position, op) executed, waiting for metadata
    windows: list[WindowState]
    purged: list[tuple[tuple[int, int, int], int]] = []  # purges per partition so far
    # per partition, the creation time of the generation its counts belong to
    created: list[tuple[tuple[int, int, int], int]] = []
    # per partition, its stored consumer and group offsets: (kind, consumer or group, offset)
    offsets: list[tuple[tuple[int, int, int], list[tuple[str, int, int]]]] = []


class Fetch(msgspec.Struct, array_like=True, frozen=True):
    """Messages ``offset``..``offset+count-1`` of partition ``key`` as the group stored
    them in the partition created at ``created_at`` after ``purges`` purges: a replica
    answers only from that same generation (not from messages a purge it has not executed
    yet will drop, nor from a deleted topic's), once it executed the ops storing them."""

    key: tuple[int, int, int]
    offset: int
    count: int
    created_at: int
    purges: int


_state_decoder = msgspec.msgpack.Decoder(GroupState)
fetch_decoder = msgspec.msgpack.Decoder(Fetch)


def encode_state(calls: int, stored: dict[Key, int], queued: list[tuple[int, bytes]],
                 dedup: Any, purged: dict[Key, int], created: dict[Key, int] | None = None,
                 offsets: dict[Key, list[tuple[str, int, int]]] | None = None) -> bytes:
    windows = [WindowState(key, [(stamp, list(keys)) for stamp, keys in dedup.windows[key]
                                 .batches]) for key in stored if key in dedup.windows]
    return msgspec.msgpack.encode(GroupState(calls, sorted(stored.items()), queued, windows,
                                             sorted(purged.items()),
                                             sorted((created or {}).items()),
                                             sorted((offsets or {}).items())))


def stored_offsets(partition: Any) -> list[tuple[str, int, int]]:
    """``partition``'s stored offsets as its executed ops left them: (kind, consumer or
    group id, offset), in a fixed order."""
    return [(kind, key, offset) for kind in KINDS
            for key, offset in sorted(partition.stored_offsets(kind).items())]


def put_offsets(partition: Any, wanted: list[tuple[str, int, int]]) -> None:
    """Make ``partition``'s stored offsets exactly ``wanted`` (an adopted checkpoint's):
    store those missing or different, delete those it does not list. A file that refuses is
    logged (the offset stays as it was here; the next checkpoint adopted tries again)."""
    want = {(kind, key): offset for kind, key, offset in wanted}
    have = {(kind, key): offset for kind, key, offset in stored_offsets(partition)}
    for kind, key in have.keys() - want.keys():
        _offset_call(partition, kind, key, lambda k=kind, c=key: partition.delete_offset(k, c))
    for (kind, key), offset in want.items():
        if have.get((kind, key)) != offset:
            _offset_call(partition, kind, key,
                         lambda k=kind, c=key, o=offset: partition.store_offset(k, c, o))


def _offset_call(partition: Any, kind: str, key: int, call: Any) -> None:
    """``call()``, a store or delete of one offset; its failure (now, or its future's) is
    logged in one line."""
    def failed(exc: BaseException) -> None:
        log.error("partition %s: the %s offset of %d in the adopted checkpoint cannot be "
                  "put in place: %s", partition.path, kind, key, exc)
    try:
        future = call()
    except (IggyError, OSError) as exc:
        failed(exc)
        return
    if future is not None:
        future.add_done_callback(
            lambda done: None if done.cancelled() or done.exception() is None
            else failed(done.exception()))


def decode_state(state: bytes, dedup: Any) -> GroupState:
    """The state, with the deduplication windows of its partitions put in place."""
    decoded = _state_decoder.decode(state)
    for window in decoded.windows:
        restored = IdWindow(dedup.max_entries, dedup.expiry_us)
        for stamp, keys in window.batches:
            restored.ids.update(keys)
            restored.batches.append((stamp, keys))
        dedup.windows[tuple(window.key)] = restored
    return decoded


def stored_batches(blob: bytes) -> list[tuple[int, MessageBatch]]:
    """Stored messages (as a poll returns them) cut into their original batches, each with
    its timestamp. A Python walk over the headers: a repair path, not the hot path."""
    ends, position = [], 0
    view = memoryview(blob)
    while position + HEADER_BYTES <= len(blob):
        user_headers = int.from_bytes(view[position + 48:position + 52], "little")
        payload = int.from_bytes(view[position + 52:position + 56], "little")
        position += HEADER_BYTES + payload + user_headers
        ends.append(position)
    ends_array = np.asarray(ends, dtype=np.int64)
    starts = np.concatenate(([0], ends_array[:-1])).astype(np.int64)
    stamps = read_timestamps(blob, starts)
    cuts = [0, *(np.flatnonzero(np.diff(stamps)) + 1).tolist(), len(ends)]
    batches = []
    for a, b in zip(cuts, cuts[1:]):
        base = int(starts[a])
        index = np.zeros(b - a, dtype=INDEX_DTYPE)
        index["position"] = ends_array[a:b] - base
        batches.append((int(stamps[a]), MessageBatch(
            b - a, memoryview(index.tobytes()),
            memoryview(bytearray(view[base:int(ends_array[b - 1])])))))
    return batches


class Filler:
    """Copies the messages a replica lacks from another member (see the module doc)."""

    def __init__(self, shard: Any, fetch: Any, group: int, first_kept: Any = None) -> None:
        """``fetch(group, body)``: a member's answer to a ``Fetch``; ``first_kept(group,
        body)``: the lowest first offset the other members keep of a ``Fetch``'s partition
        (None when one did not answer)."""
        self.shard, self.fetch, self.group = shard, fetch, group
        self.first_kept = first_kept

    async def fill(self, targets: dict[Key, int], end: Any, append: Any,
                   generation: Any, skip: Any = None) -> None:
        """Copy messages until each partition of ``targets`` (key -> offset to reach; the
        caller may raise or add targets meanwhile) reaches its target; a reached target is
        removed. ``end(partition)`` is the offset the next batch handed goes to;
        ``append(key, partition, batch, timestamp)`` hands one batch (returns an awaitable
        or None); ``generation(key)`` is the (created_at, purges) a fetch asks from. Each
        fetch starts at the partition's end read just before it, and its
        answer is appended only if that end is still the same afterwards. When every
        other member deleted the messages asked for (retention, DeleteSegments), gone
        everywhere, ``skip(key, partition, offset)`` starts the partition at the lowest
        offset any of them keeps, and the fill goes on from there."""
        logged: set[Key] = set()
        while targets:
            key = next(iter(targets))
            want, partition = targets[key], self.shard.partitions.get(key)
            if partition is None or end(partition) >= want:
                if targets.get(key) == want:
                    del targets[key]  # reached (or deleted meanwhile)
                continue
            have = end(partition)
            if key not in logged:
                logged.add(key)
                log.warning("group %d: partition %s lacks offsets %d..%d the group stored; "
                            "copying them from another replica", self.group, key, have,
                            want - 1)
            blob = await self._fetch(Fetch(key, have, min(want - have, FETCH_MESSAGES),
                                           *generation(key)),
                                     lambda: self._wanted(targets, key, partition))
            if blob is None or self.shard.partitions.get(key) is not partition or \
                    end(partition) != have:
                continue  # purged or replaced meanwhile: ask again from where it is now
            if isinstance(blob, int):
                skip(key, partition, blob)  # deleted on every other member below ``blob``
                continue
            batches = stored_batches(blob)
            if int(batches[0][1].offsets()[0]) != have:
                raise ValueError(f"asked for {key} from offset {have}, got another offset")
            pending = [append(key, partition, batch, stamp) for stamp, batch in batches]
            for written in pending:
                if written is not None:
                    await written

    def _wanted(self, targets: dict[Key, int], key: Key, partition: Any) -> bool:
        """Whether a fetch for ``partition`` (``key``) is still wanted: its target was not
        dropped (the partition deleted) and no other partition took the key."""
        return key in targets and self.shard.partitions.get(key) is partition

    async def _fetch(self, ask: Fetch, wanted: Any) -> bytes | int | None:
        """The answer of a member that can serve ``ask``; asks again until one can (the
        first refusal is logged as a warning: the group's later ops wait meanwhile), or
        None once ``wanted()`` is false. When none serves it and every other member keeps
        the partition only from a later offset (``_deleted_everywhere``): that offset."""
        report = log.warning
        while wanted():
            try:
                blob = await self.fetch(self.group, msgspec.msgpack.encode(ask))
                if blob:
                    return blob
            except Exception as exc:  # noqa: BLE001 - no member holds it yet: ask again
                later = await self._deleted_everywhere(ask)
                if later is not None:
                    return later
                report("group %d: no other replica serves the fill of partition %s from "
                       "offset %d yet (%s); retrying, the group's later ops wait",
                       self.group, ask.key, ask.offset, exc)
                report = log.info
            await asyncio.sleep(RETRY_S)
        return None

    async def _deleted_everywhere(self, ask: Fetch) -> int | None:
        """The lowest first offset the other members keep of ``ask``'s partition, when
        it is past ``ask.offset`` on every one of them (each answered): what lies below
        is deleted everywhere, so nothing any replica holds is skipped. Else None."""
        if self.first_kept is None:
            return None
        first = await self.first_kept(self.group, msgspec.msgpack.encode(ask))
        if first is None or first <= ask.offset:
            return None
        log.warning("group %d: partition %s lacks offsets from %d, which its peers deleted "
                    "(retention, DeleteSegments); it starts at offset %d, the first they "
                    "keep", self.group, ask.key, ask.offset, first)
        return first

