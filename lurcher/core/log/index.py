"""The in-memory form of a segment's ``.index`` file.

On disk (wire-protocol §17) the index is 16-byte entries, one per message: relative offset
u32 (offset - segment start offset), END position u32 of the message in the ``.log``,
timestamp u64. In memory it is one growable structured numpy array (``INDEX_DTYPE``);
``rel``/``ends``/``timestamps`` are zero-copy views of the filled prefix. Appends amortise
to O(batch) by doubling the capacity; a sealed segment's index of up to 65,536 entries
gives the capacity past them back (``compact``), so a partition of many small segments
holds about 16 bytes per message, not 16 KiB (the first capacity) per segment.
"""

from __future__ import annotations

import numpy as np

from lurcher.core.wire.batch import INDEX_DTYPE, INDEX_ENTRY_BYTES

_INITIAL_CAPACITY = 1024
COMPACT_MAX_ENTRIES = 65_536  # 1 MiB: its copy takes about 0.1 ms


class SegmentIndex:
    """Entries of one segment, in order; offsets are dense (entry i = start offset + i).
    Entries past ``count`` are capacity, never read."""

    __slots__ = ("_entries", "_bytes", "count")

    def __init__(self, entries: np.ndarray | None = None) -> None:
        n = 0 if entries is None else len(entries)
        self._entries = np.zeros(max(_INITIAL_CAPACITY, n), dtype=INDEX_DTYPE)
        self._bytes = self._entries.view(np.uint8)  # the same memory, for plain copies
        if n:
            self._entries[:n] = entries
        self.count = n

    @classmethod
    def from_bytes(cls, raw: bytes) -> SegmentIndex:
        """Parse whole entries of ``raw``; a trailing partial entry is ignored."""
        n = len(raw) // INDEX_ENTRY_BYTES
        return cls(np.frombuffer(raw, dtype=INDEX_DTYPE, count=n))

    def append(self, raw: bytes | np.ndarray) -> None:
        """Add whole entries (their bytes, or an ``INDEX_DTYPE`` array): byte copies, since
        numpy assigns structured arrays field by field, several times slower."""
        new = (raw.view(np.uint8).reshape(-1) if isinstance(raw, np.ndarray)
               else np.frombuffer(raw, dtype=np.uint8))
        need = self.count + len(new) // INDEX_ENTRY_BYTES
        if need > len(self._entries):
            self._grow(need)
        self._bytes[self.count * INDEX_ENTRY_BYTES:need * INDEX_ENTRY_BYTES] = new
        self.count = need

    def _grow(self, need: int) -> None:
        grown = np.empty(max(need, 2 * len(self._entries)), dtype=INDEX_DTYPE)
        grown_bytes = grown.view(np.uint8)
        used = self.count * INDEX_ENTRY_BYTES
        grown_bytes[:used] = self._bytes[:used]
        self._entries, self._bytes = grown, grown_bytes

    def compact(self) -> None:
        """Keep no capacity past the entries (a sealed segment's index does not grow; one
        that does again, after a cut, grows as any). Only up to ``COMPACT_MAX_ENTRIES``: the
        copy runs on the event loop at a roll-over, and a bigger index wastes at most as
        much again as it holds, never the 16 KiB per small segment this is for."""
        if self.count < len(self._entries) and self.count <= COMPACT_MAX_ENTRIES:
            self._entries = self._entries[:self.count].copy()
            self._bytes = self._entries.view(np.uint8)

    def truncate(self, count: int) -> None:
        self.count = min(self.count, count)

    @property
    def entries(self) -> np.ndarray:
        return self._entries[:self.count]

    @property
    def rel(self) -> np.ndarray:
        return self._entries["offset"][:self.count]

    @property
    def ends(self) -> np.ndarray:
        return self._entries["position"][:self.count]

    @property
    def timestamps(self) -> np.ndarray:
        return self._entries["timestamp"][:self.count]

    def start_of(self, i: int) -> int:
        """Byte position where entry ``i`` starts in the log."""
        return 0 if i == 0 else int(self._entries["position"][i - 1])

    def end_of(self, i: int) -> int:
        return int(self._entries["position"][i])

    def to_bytes(self) -> bytes:
        return self.entries.tobytes()
