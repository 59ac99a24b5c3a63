"""GetSnapshotFile's answer: the raw ZIP bytes, the whole payload."""

from __future__ import annotations

from typing import Self

from lurcher.core.wire.buffer import Reader, Writer
from lurcher.core.wire.codec import WireStruct


class SnapshotFile(WireStruct, frozen=True):
    data: bytes

    def write(self, w: Writer) -> None:
        w.raw(self.data)

    @classmethod
    def read(cls, r: Reader) -> Self:
        return cls(bytes(r.rest()))
