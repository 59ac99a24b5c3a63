"""Raw-socket builders for the metadata commands the crash and disk-full tests drive, and a
look at the data directory's tree (which partition directories and tombstones exist).

Owns: DeleteStream (203), DeleteTopic (303), CreatePartitions (402), DeletePartitions (403)
payloads over ``tests.support.raw``; ``partition_keys`` lists ``(stream, topic, partition)``
of every ``streams/<s>/topics/<t>/partitions/<p>`` directory on disk; ``tombstones`` lists
what is left in ``deleting/`` (deletions the server has not finished).
"""

from __future__ import annotations

import struct
from pathlib import Path

from tests.support.raw import RawClient, ident

DELETE_STREAM = 203
DELETE_TOPIC = 303
CREATE_PARTITIONS = 402
DELETE_PARTITIONS = 403
TOMBSTONE_DIR = "deleting"


def delete_stream(client: RawClient, stream: int | str) -> None:
    client.call(DELETE_STREAM, ident(stream))


def delete_topic(client: RawClient, stream: int | str, topic: int | str) -> None:
    client.call(DELETE_TOPIC, ident(stream) + ident(topic))


def create_partitions(client: RawClient, stream: int | str, topic: int | str, count: int) -> None:
    client.call(CREATE_PARTITIONS, ident(stream) + ident(topic) + struct.pack("<I", count))


def delete_partitions(client: RawClient, stream: int | str, topic: int | str, count: int) -> None:
    client.call(DELETE_PARTITIONS, ident(stream) + ident(topic) + struct.pack("<I", count))


def partition_keys(data_dir: Path) -> set[tuple[int, int, int]]:
    """``(stream, topic, partition)`` of every partition directory under ``data_dir``."""
    found = set()
    for path in (data_dir / "streams").glob("*/topics/*/partitions/*"):
        if path.is_dir():
            found.add((int(path.parts[-5]), int(path.parts[-3]), int(path.parts[-1])))
    return found


def tombstones(data_dir: Path) -> list[str]:
    """Names left in ``<data_dir>/deleting`` (empty when every deletion finished)."""
    path = data_dir / TOMBSTONE_DIR
    return sorted(p.name for p in path.iterdir()) if path.is_dir() else []
