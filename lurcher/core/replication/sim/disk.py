"""A simulated disk holding one replica's journal.

``records`` is what the OS has (written, maybe not synced); ``durable`` counts the prefix
that a completed sync made durable. Completions come back in submission order after a
random latency. A crash keeps the durable prefix plus a random prefix of the unsynced
records and may tear the last kept one (it then fails its checksum); a wipe loses all.
``Discard(below)`` frees the records before ``below`` (positions stay; a read returns the
records from ``start`` on).
"""

from __future__ import annotations

import random
from collections import deque

from lurcher.core.replication.journal import (
    Discard, Read, StorageIntent, Sync, Write, stored_bytes,
)


class Disk:
    def __init__(self, rng: random.Random, max_latency: int, formatted: list[bytes]) -> None:
        self.rng, self.max_latency = rng, max_latency
        self.records: list[bytes] = list(formatted)
        self.durable = len(formatted)
        self.start = 0
        self.queue: deque[tuple[int, str, object]] = deque()
        self.last_due = 0

    def submit(self, now: int, intent: StorageIntent) -> None:
        if isinstance(intent, Write):
            del self.records[intent.pos:]
            self.records.extend(b"" for _ in range(intent.pos - len(self.records)))
            self.records.append(bytes(stored_bytes(intent.data)))
            self.start = min(self.start, intent.pos)
            self.durable = min(self.durable, intent.pos)
            self._complete(now, "written", intent.pos)
        elif isinstance(intent, Sync):
            self._complete(now, "synced", intent.upto)
        elif isinstance(intent, Read):
            self._complete(now, "loaded", None)
        elif isinstance(intent, Discard):
            below = min(intent.below, len(self.records))
            self.records[self.start:below] = [b""] * max(0, below - self.start)
            self.start = max(self.start, below)

    def _complete(self, now: int, kind: str, arg: object) -> None:
        due = now + (self.rng.randint(0, self.max_latency) if self.max_latency else 0)
        self.last_due = max(self.last_due, due)
        self.queue.append((self.last_due, kind, arg))

    def due(self, now: int) -> list[tuple[str, object]]:
        out = []
        while self.queue and self.queue[0][0] <= now:
            _, kind, arg = self.queue.popleft()
            if kind == "synced":
                self.durable = max(self.durable, min(int(arg), len(self.records)))
            elif kind == "loaded":
                arg = (list(self.records[self.start:]), self.start)
            out.append((kind, arg))
        return out

    def crash(self) -> None:
        unsynced = len(self.records) - self.durable
        keep = self.rng.randint(0, unsynced)
        del self.records[self.durable + keep:]
        self.start = min(self.start, len(self.records))
        if keep and self.rng.random() < 0.5:
            last = self.records[-1]
            self.records[-1] = last[: len(last) // 2] + b"\x00" * (len(last) - len(last) // 2)
        self.queue.clear()

    def wipe(self) -> None:
        self.start = 0
        self.records.clear()
        self.durable = 0
        self.queue.clear()
