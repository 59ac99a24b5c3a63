"""GetSnapshotFile (11): ``compression u8``, ``types_count u8``, that many ``u8`` type codes.

Decode keeps the raw codes (the 0.8 server checks them in the handler); ``validate`` applies
those handler rules. Answered with raw ZIP bytes.
"""

from __future__ import annotations

from typing import ClassVar, Self

from lurcher.core.wire.buffer import Reader, Writer
from lurcher.core.wire.codec import Request
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError

COMPRESSIONS = {1: "stored", 2: "deflated", 3: "bzip2", 4: "zstd", 5: "lzma", 6: "xz"}
SNAPSHOT_TYPES = {1: "filesystem_overview", 2: "process_list", 3: "resource_usage", 4: "test",
                  5: "server_logs", 6: "server_config", 100: "all"}
ALL_TYPES = 100


class GetSnapshotFile(Request, frozen=True):
    CODE: ClassVar[int] = 11
    compression: int
    snapshot_types: list[int]

    def write(self, w: Writer) -> None:
        w.u8(self.compression).u8(len(self.snapshot_types))
        w.raw(bytes(self.snapshot_types))

    @classmethod
    def read(cls, r: Reader) -> Self:
        compression = r.u8("compression")
        count = r.u8("snapshot types count")
        return cls(compression, list(r.view(count, "snapshot types")))

    def validate(self) -> None:
        """Raises IggyError INVALID_COMMAND for unknown codes or 'all' mixed with others."""
        unknown = self.compression not in COMPRESSIONS or any(
            t not in SNAPSHOT_TYPES for t in self.snapshot_types)
        if unknown or (ALL_TYPES in self.snapshot_types and len(self.snapshot_types) > 1):
            raise IggyError(ErrorCode.INVALID_COMMAND, "snapshot request")
