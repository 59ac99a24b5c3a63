"""Size retention (``maintenance.trim_topic``) over partitions of many small segments: it
deletes exactly the segments that deleting the oldest one at a time across the topic's
partitions would (ties to the first partition, consumer barriers kept), and a run of one
partition's segments goes in one deletion, not one step per segment."""

from __future__ import annotations

import pytest
from log_helpers import ManualClock, batch

from lurcher.core.log import LogConfig, Partition
from lurcher.core.shard import maintenance
from lurcher.core.shard.maintenance import trim_topic


def one_batch_segments(tmp_path, partition_id: int, clock: ManualClock) -> Partition:
    """A partition whose every batch is a segment of its own (segment size 1 byte)."""
    return Partition.open(str(tmp_path / str(partition_id)), partition_id,
                          LogConfig(segment_size_bytes=1, page_cache_window=0), clock=clock)


def send(partition: Partition, clock: ManualClock, now_us: int, messages: int) -> None:
    clock.now_us = now_us
    partition.append(batch(messages))


@pytest.fixture
def topic(tmp_path):
    """Three partitions whose segments interleave in time: runs of one partition's segments
    older than the others' (15 at first on the third), bursts of 1 to 3, equal first
    timestamps on the first two (a tie goes to the earlier partition), sizes of 1 to 3
    messages, and a consumer barrier on the second partition."""
    clock = ManualClock()
    partitions = [one_batch_segments(tmp_path, i, clock) for i in range(3)]
    for b in range(15):
        send(partitions[2], clock, 100 + b, 1 + b % 3)
    for step in range(40):
        for i, p in enumerate(partitions):
            if (step + i) % 3 == 2:
                continue
            for k in range(1 + (step + i) % 3):
                send(p, clock, 1_000 * (step + 1) + 10 * k + (0 if i < 2 else step % 2),
                     1 + (step + i + k) % 3)
    partitions[1].offsets.store("consumers", 7, 50)
    yield partitions
    for p in partitions:
        p.close()


def one_at_a_time(partitions: list[Partition], max_size_bytes: int) -> list[int]:
    """How many segments of each partition deleting the oldest deletable one at a time
    (ties to the first partition) deletes, computed on the segments as they are."""
    queues = [[(s.first_timestamp, s.size_bytes)
               for s in p.segments[:p.deletable_segments(p.min_stored_offset())]]
              for p in partitions]
    share = sum(p.size_bytes for p in partitions) - max_size_bytes * 9 // 10
    deleted, freed = [0] * len(partitions), 0
    while share >= 0 and freed <= share:
        ready = [(q[d][0], i) for i, (q, d) in enumerate(zip(queues, deleted)) if d < len(q)]
        if not ready:
            break
        _, i = min(ready)
        freed += queues[i][deleted[i]][1]
        deleted[i] += 1
    return deleted


@pytest.mark.parametrize("keep_fraction", [0.99, 0.8, 0.5, 0.2, 0.01])
def test_the_same_segments_go_as_one_at_a_time(topic, keep_fraction):
    before = [p.segments_count for p in topic]
    size = sum(p.size_bytes for p in topic)
    max_size = int(size * keep_fraction)
    want = one_at_a_time(topic, max_size)
    got = trim_topic(topic, max_size)
    assert [b - p.segments_count for b, p in zip(before, topic)] == want
    assert got[0] == sum(want)
    assert topic[1].segments[0].start_offset <= 51  # no segment past the barrier goes


def test_a_run_of_one_partition_is_one_deletion(tmp_path, monkeypatch):
    """The old trim deleted one segment per step, each step looking at every segment (199
    deletions here, 39,800 end offsets read)."""
    clock = ManualClock()
    p = one_batch_segments(tmp_path, 0, clock)
    for b in range(200):
        send(p, clock, 1_000 * (b + 1), 1)
    calls: list[int] = []
    delete = Partition.delete_oldest_segments

    def counted(self, n, barrier=None):
        calls.append(n)
        return delete(self, n, barrier)

    monkeypatch.setattr(Partition, "delete_oldest_segments", counted)
    assert trim_topic([p], max_size_bytes=1) == (199, 199)
    assert calls == [199]
    assert p.segments_count == 1
    p.close()


def test_nothing_deletable_deletes_nothing(tmp_path):
    clock = ManualClock()
    p = one_batch_segments(tmp_path, 0, clock)
    for b in range(5):
        send(p, clock, 1_000 * (b + 1), 1)
    p.offsets.store("consumers", 1, 0)  # the first segment holds unconsumed messages
    assert trim_topic([p], max_size_bytes=1) == (1, 1)  # only offset 0's segment
    assert maintenance._oldest_deletable([p], [p.min_stored_offset()]) is None
    p.close()


def test_the_consumer_barriers_are_read_once_per_trim(topic, monkeypatch):
    """Each barrier is the lowest of every offset stored on the partition (a list of them
    all); the old trim asked for it of every partition at every step (here, in
    one trim of three partitions: 375 times)."""
    asked: list[int] = []
    lowest = Partition.min_stored_offset

    def counted(self):
        asked.append(self.partition_id)
        return lowest(self)

    monkeypatch.setattr(Partition, "min_stored_offset", counted)
    size = sum(p.size_bytes for p in topic)
    assert trim_topic(topic, size // 5)[0] > 0
    assert sorted(asked) == [0, 1, 2]
