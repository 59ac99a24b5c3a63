"""Test data for the Spark tests, produced through the lurcher SDK.

``payload(p, i)`` is the i-th payload of partition p; ``produce`` sends ``per_partition``
messages to every partition in batches, with per-batch user headers (``batch`` as a string
header, ``raw`` as a raw one) so every row's expected headers follow from its offset.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from lurcher.core.wire.headers import HeaderKind, HeaderValue
from lurcher.sdk.sync import SyncClient


def payload(partition: int, index: int) -> bytes:
    return f"p{partition}-{index:07d}".encode()


def headers_of(partition: int, batch: int) -> dict:
    return {"batch": str(batch), "raw": HeaderValue.of(HeaderKind.RAW, bytes([partition, batch]))}


def expected_headers(partition: int, offset: int, batch_size: int) -> dict[str, bytes]:
    batch = offset // batch_size
    return {"batch": str(batch).encode(), "raw": bytes([partition, batch])}


def produce(client: SyncClient, stream: str, topic: str, partitions: int, first: int,
            count: int, batch_size: int) -> None:
    """Messages ``first .. first+count-1`` of every partition, ``batch_size`` per send."""
    for begin in range(first, first + count, batch_size):
        stop = min(begin + batch_size, first + count)
        for p in range(partitions):
            client.send_messages(stream, topic, [payload(p, i) for i in range(begin, stop)], p,
                                 headers=headers_of(p, begin // batch_size))


def now_us() -> int:
    return time.time_ns() // 1000


def summaries(rows: Iterator) -> Iterator[tuple]:
    """One summary per Spark partition: (partition, count, first offset, last offset,
    offsets contiguous and ascending, payloads as produced). Runs on executors, so it
    lives in an importable module rather than in a test module."""
    rows = list(rows)
    if not rows:
        return
    offsets = [r.offset for r in rows]
    ordered = offsets == list(range(offsets[0], offsets[0] + len(offsets)))
    good = all(r.payload == payload(r.partition, r.offset) for r in rows)
    parts = {r.partition for r in rows}
    yield (parts.pop() if len(parts) == 1 else -1, len(rows), offsets[0], offsets[-1],
           ordered, good)
