"""A simulated network: per-packet drop, duplicate, delay (hence reorder), partitions.

Deterministic given its ``random.Random``. Packets wait in a heap keyed by (due tick,
sequence number). ``blocked`` holds directed (src, dst) pairs: a symmetric partition blocks
both directions, an asymmetric one only one.
"""

from __future__ import annotations

import heapq
import random
from typing import Any


class Network:
    def __init__(self, rng: random.Random, drop: float, duplicate: float, max_delay: int) -> None:
        self.rng, self.drop, self.duplicate, self.max_delay = rng, drop, duplicate, max_delay
        self.heap: list[tuple[int, int, int, int, Any]] = []
        self.seq = 0
        self.blocked: set[tuple[int, int]] = set()

    def send(self, now: int, src: int, dst: int, msg: Any) -> None:
        if (src, dst) in self.blocked:
            return
        rng = self.rng
        if self.drop and rng.random() < self.drop:
            return
        copies = 2 if self.duplicate and rng.random() < self.duplicate else 1
        for _ in range(copies):
            delay = 1 + (rng.randint(0, self.max_delay) if self.max_delay else 0)
            heapq.heappush(self.heap, (now + delay, self.seq, src, dst, msg))
            self.seq += 1

    def redeliver(self, now: int, src: int, dst: int, msg: Any) -> None:
        """Queue a held packet again (no new faults): used when a paused replica resumes."""
        heapq.heappush(self.heap, (now + 1, self.seq, src, dst, msg))
        self.seq += 1

    def due(self, now: int) -> list[tuple[int, int, Any]]:
        out = []
        heap = self.heap
        while heap and heap[0][0] <= now:
            _, _, src, dst, msg = heapq.heappop(heap)
            out.append((src, dst, msg))
        return out

    def partition(self, groups: tuple[set[int], set[int]], symmetric: bool) -> None:
        a, b = groups
        for x in a:
            for y in b:
                self.blocked.add((x, y))
                if symmetric:
                    self.blocked.add((y, x))

    def heal(self) -> None:
        self.blocked.clear()
