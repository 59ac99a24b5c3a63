"""The optional partition id of poll and consumer-offset requests: always 5 bytes,
``flag u8`` then ``u32``. Only flag 1 means present (the 0.8 server treats any other flag
byte as absent); absent is written as ``00 00000000``."""

from __future__ import annotations

from lurcher.core.wire.buffer import Reader, Writer

OPTIONAL_PARTITION_ID_BYTES = 5


def read_optional_partition_id(r: Reader) -> int | None:
    """Raises WireError when fewer than 5 bytes remain."""
    flag = r.u8("partition flag")
    value = r.u32("partition id")
    return value if flag == 1 else None


def write_optional_partition_id(w: Writer, partition_id: int | None) -> None:
    if partition_id is None:
        w.u8(0).u32(0)
    else:
        w.u8(1).u32(partition_id)
