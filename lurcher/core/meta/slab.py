"""0-based id allocation with the 0.8 slab semantics.

The next id is the most recently freed one if any, else one past the highest ever used.
Replaying recorded allocations (``take``) and releases (``free``) in order reproduces the
same state, so the event log only needs to store the ids it was given.
"""

from __future__ import annotations


class IdSlab:
    __slots__ = ("_next", "_free")

    def __init__(self) -> None:
        self._next = 0
        self._free: list[int] = []

    def peek(self) -> int:
        """The id the next ``take()`` without argument returns."""
        return self._free[-1] if self._free else self._next

    def take(self, wanted: int | None = None) -> int:
        """Allocate ``wanted`` (replay) or the next id."""
        wanted = self.peek() if wanted is None else wanted
        if wanted in self._free:
            self._free.remove(wanted)
        elif wanted >= self._next:
            self._free.extend(range(self._next, wanted))
            self._next = wanted + 1
        else:
            raise ValueError(f"id {wanted} is in use")
        return wanted

    def free(self, used: int) -> None:
        self._free.append(used)
