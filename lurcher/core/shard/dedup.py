"""Server-side message deduplication by message id (``system.message_deduplication``).

Owns one ``IdWindow`` per partition: the ids stored there recently, each remembered for
``expiry_us`` after it was stored and at most ``max_entries`` of them (the oldest are
forgotten first; 0 = no limit). A message whose id is in the window, or repeats an earlier
message of the same batch, is dropped before the batch is stamped; the rest of the batch is
compacted (index block and blob rebuilt) and appended as usual, so offsets stay dense. A
batch of duplicates only stores nothing and is answered OK (the 0.8 server crashes the
request in that case). Id 0 means "assign a random id" (done when stamping), so those
messages are never duplicates and are not remembered.

Ids are the 16 id bytes of each header, gathered from the blob with numpy and used as
``bytes`` keys of a Python set: the common case (no duplicate) is one C-level
``isdisjoint`` plus one ``update``; only a batch with duplicates computes a per-message mask,
and compaction copies one slice per run of kept messages. Ids are remembered when the batch
is handed to the log (so a copy sent while it is still being written is a duplicate too) and
forgotten again if that append fails, so a failed send can be retried. ``now_us`` is
passed in.
"""

from __future__ import annotations

import inspect
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from lurcher.core.wire.batch import ID_AT, INDEX_DTYPE, MessageBatch

if TYPE_CHECKING:
    from lurcher.runtime import settings

ID_BYTES = 16
_ID_SPAN = np.arange(ID_BYTES, dtype=np.int64)

PartitionKey = tuple[int, int, int]


def message_ids(batch: MessageBatch) -> np.ndarray:
    """The 16-byte ids of every message as a ``V16`` array (a copy)."""
    starts = batch.starts()
    raw = np.frombuffer(batch.blob, dtype=np.uint8)[(starts + ID_AT)[:, None] + _ID_SPAN]
    return np.ascontiguousarray(raw).view("V16").reshape(-1)


def compact(batch: MessageBatch, keep: np.ndarray) -> MessageBatch:
    """A new writable batch of the messages where ``keep`` is True, in order."""
    ends = batch.ends().astype(np.int64)
    starts = batch.starts()
    sizes = (ends - starts)[keep]
    index = np.zeros(len(sizes), dtype=INDEX_DTYPE)
    index["position"] = np.cumsum(sizes)
    edges = np.flatnonzero(np.diff(np.concatenate(([0], keep.view(np.int8), [0]))))
    blob = memoryview(batch.blob)
    runs = [blob[int(starts[a]):int(ends[b - 1])] for a, b in zip(edges[0::2], edges[1::2])]
    return MessageBatch(len(sizes), memoryview(index.tobytes()),
                        memoryview(bytearray(b"".join(runs))))


@dataclass
class IdWindow:
    """The recently stored ids of one partition."""

    max_entries: int
    expiry_us: int
    ids: set[bytes] = field(default_factory=set)
    batches: deque[tuple[int, list[bytes]]] = field(default_factory=deque)

    def expire(self, now_us: int) -> None:
        while self.batches and self.batches[0][0] + self.expiry_us <= now_us:
            self.ids.difference_update(self.batches.popleft()[1])

    def remember(self, keys: list[bytes], now_us: int) -> None:
        if not keys:
            return
        self.ids.update(keys)
        self.batches.append((now_us, keys))
        excess = len(self.ids) - self.max_entries if self.max_entries else 0
        while excess > 0:
            stamp, oldest = self.batches[0]
            drop = oldest[:excess]
            self.ids.difference_update(drop)
            excess -= len(drop)
            if len(drop) == len(oldest):
                self.batches.popleft()
            else:
                self.batches[0] = (stamp, oldest[len(drop):])

    def forget(self, keys: list[bytes]) -> None:
        """Drop ids remembered for a batch whose append then failed (so it can be retried)."""
        self.ids.difference_update(keys)
        for i, (stamp, remembered) in enumerate(self.batches):
            if remembered is keys:
                del self.batches[i]
                return

    def duplicates(self, ids: np.ndarray, keys: list[bytes], nonzero: np.ndarray) -> np.ndarray:
        """Mask of messages to drop: a remembered id, or an id seen earlier in the batch."""
        dup = np.zeros(len(ids), dtype=bool)
        known = np.fromiter(map(self.ids.__contains__, keys), dtype=bool, count=len(keys))
        dup[np.flatnonzero(nonzero)[known]] = True
        first = np.zeros(len(ids), dtype=bool)
        _, at = np.unique(ids, return_index=True)
        first[at] = True
        return dup | (nonzero & ~first)


class Deduplication:
    """The deduplication windows of a shard's partitions (inactive when disabled)."""

    def __init__(self, enabled: bool, max_entries: int, expiry_us: int) -> None:
        self.enabled = enabled
        self.max_entries = max_entries
        self.expiry_us = expiry_us
        self.windows: dict[PartitionKey, IdWindow] = {}

    @classmethod
    def from_config(cls, section: settings.Deduplication) -> Deduplication:
        """From ``[system.message_deduplication]``."""
        return cls(section.enabled, section.max_entries, section.expiry)

    def window(self, key: PartitionKey) -> IdWindow:
        found = self.windows.get(key)
        if found is None:
            found = self.windows[key] = IdWindow(self.max_entries, self.expiry_us)
        return found

    def drop(self, key: PartitionKey) -> None:
        """Forget a partition's window (the partition was deleted)."""
        self.windows.pop(key, None)

    def append(self, key: PartitionKey, batch: MessageBatch, now_us: int,
               store: Callable[[MessageBatch], Any]) -> Any:
        """``store`` the batch without its duplicates; remember its ids once stored.

        Returns what ``store`` returns (awaited first when it is awaitable), or None when
        every message was a duplicate (nothing stored). Raises what ``store`` raises.
        """
        if not self.enabled:
            return store(batch)
        window = self.window(key)
        window.expire(now_us)
        ids = message_ids(batch)
        nonzero = ids != np.zeros(1, dtype="V16")
        keys = (ids if nonzero.all() else ids[nonzero]).tolist()
        if not window.ids.isdisjoint(keys) or len(set(keys)) != len(keys):
            keep = ~window.duplicates(ids, keys, nonzero)
            if not keep.any():
                return None
            batch = compact(batch, keep)
            keys = ids[keep & nonzero].tolist()
        result = store(batch)
        window.remember(keys, now_us)  # at once: a copy sent while this one is in flight
        if inspect.isawaitable(result):  # is a duplicate too
            return _forget_if_failed(result, window, keys)
        return result


async def _forget_if_failed(pending: Any, window: IdWindow, keys: list[bytes]) -> Any:
    try:
        return await pending
    except Exception:  # not on cancellation: the write goes on and may well succeed
        window.forget(keys)
        raise
