"""A poll reply held to ``limits.max_poll_reply_bytes`` (``handlers.messages.messages_within``)
on a partition of many segments: how many messages fit, and that finding it does not read
every segment."""

from __future__ import annotations

from pathlib import Path

import pytest

from lurcher.core.log.config import LogConfig
from lurcher.core.log.partition import Partition
from lurcher.core.log.segment import Segment
from lurcher.core.shard.handlers.messages import messages_within
from lurcher.core.wire.batch import MessageBatch

SEGMENTS = 64
PER_SEGMENT = 4
PAYLOAD = 100


@pytest.fixture
def partition(tmp_path: Path):
    """64 segments of four equal messages each."""
    message = MessageBatch.build([b"x" * PAYLOAD]).blob
    p = Partition.open(str(tmp_path / "p"), 1, LogConfig(
        segment_size_bytes=PER_SEGMENT * len(message), page_cache_window=0))
    for _ in range(SEGMENTS):
        p.append(MessageBatch.build([b"x" * PAYLOAD] * PER_SEGMENT).writable())
    assert p.segments_count == SEGMENTS
    yield p
    p.close()


def test_messages_within_counts_across_segments(partition):
    size = partition.size_bytes // partition.messages_count
    polled = partition.read_offset(10, 50)
    assert messages_within(partition, polled, 7 * size) == 7
    assert messages_within(partition, polled, 7 * size - 1) == 6
    assert messages_within(partition, polled, 1) == 1  # always one
    assert messages_within(partition, polled, 10**9) == 50


def test_messages_within_bisects_the_segments(partition, monkeypatch):
    """The old code listed every segment's start offset (64 here) for each capped poll."""
    looked = []
    start_of = Segment.__dict__["start_offset"]

    def counted(segment):
        looked.append(1)
        return start_of.__get__(segment)

    polled = partition.read_offset(250, 2)
    monkeypatch.setattr(Segment, "start_offset", property(counted))
    assert messages_within(partition, polled, 10**9) == 2
    assert len(looked) <= 20, len(looked)
