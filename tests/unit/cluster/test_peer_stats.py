"""``lurcher.cluster.peer_stats``: counters of partitions other nodes hold, as a node keeps
them between refreshes. The primaries' answers come from ``stats_of_held`` over real
partition counters; only the link to them (``on_primary``) is played by the test, so it can
be slow or fail."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace

import msgspec
import pytest

from lurcher.cluster import peer_stats
from lurcher.cluster.peer_stats import PeerStats, stats_of_held
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError

CREATED = 1_000


def _topic(stream_id: int, topic_id: int, partitions: int, created_at: int = CREATED):
    return SimpleNamespace(stream_id=stream_id, id=topic_id, partitions_count=partitions,
                           partition_created_at=[created_at] * partitions)


def _state(*topics):
    streams: dict = {}
    for t in topics:
        streams.setdefault(t.stream_id, SimpleNamespace(topics={})).topics[t.id] = t
    return SimpleNamespace(streams=streams)


def _partition(pid: int, messages: int, created_at: int = CREATED):
    return SimpleNamespace(partition_id=pid, created_at=created_at, segments_count=1,
                           current_offset=messages - 1, size_bytes=100 * messages,
                           messages_count=messages)


class Primaries:
    """The other nodes: each group's primary answers from its own partitions."""

    def __init__(self, held: dict) -> None:
        self.shard = SimpleNamespace(partitions=held)
        self.asked: list[int] = []
        self.failing: set[int] = set()
        self.delay_s = 0.0

    async def on_primary(self, group: int, kind: str, body: bytes) -> bytes:
        assert kind == "stats"
        self.asked.append(group)
        await asyncio.sleep(self.delay_s)
        if group in self.failing:
            raise IggyError(ErrorCode.TASK_TIMEOUT, "no quorum")
        return stats_of_held(self.shard, body)


def _node(topic, primaries: Primaries, member_of=lambda g: g == 0) -> PeerStats:
    shard = SimpleNamespace(meta=SimpleNamespace(state=_state(topic)))
    return PeerStats(shard, primaries, lambda t, pid: pid, member_of)


async def test_only_groups_this_node_is_not_in_are_asked_and_their_rows_kept() -> None:
    topic = _topic(1, 2, 3)
    primaries = Primaries({(1, 2, 1): _partition(1, 5), (1, 2, 2): _partition(2, 7)})
    node = _node(topic, primaries)
    await node.refresh([topic])
    assert sorted(primaries.asked) == [1, 2]
    assert node.get((1, 2, 1), CREATED).messages_count == 5
    assert node.get((1, 2, 2), CREATED).size_bytes == 700
    assert node.get((1, 2, 0), CREATED) is None  # held here: the node's own counters
    assert set(node.rows()) == {(1, 2, 1), (1, 2, 2)}


async def test_counters_of_another_generation_or_a_deleted_partition_are_not_used() -> None:
    topic = _topic(1, 2, 2)
    node = _node(topic, Primaries({(1, 2, 1): _partition(1, 5)}))
    await node.refresh([topic])
    assert node.get((1, 2, 1), CREATED + 1) is None  # the ids given to a later partition
    node.shard.meta.state = _state(_topic(1, 2, 1))  # partition 1 gone
    assert node.rows() == {}
    await node.refresh([])
    assert node.known == {}  # pruned: memory follows the metadata


async def test_a_group_that_fails_keeps_the_last_counters_and_is_not_asked_at_once(
        caplog) -> None:
    caplog.set_level(logging.INFO, logger="lurcher.cluster.peer_stats")
    topic = _topic(1, 2, 2)
    primaries = Primaries({(1, 2, 1): _partition(1, 5)})
    node = _node(topic, primaries)
    await node.refresh([topic])
    primaries.shard.partitions[(1, 2, 1)] = _partition(1, 9)
    primaries.failing.add(1)
    await node.refresh([topic])
    await node.refresh([topic])
    assert primaries.asked == [1, 1]  # the failed group is left alone for RETRY_AFTER_S
    assert node.get((1, 2, 1), CREATED).messages_count == 5
    assert sum("did not report" in r.message for r in caplog.records) == 1
    primaries.failing.clear()
    node.silent_until[1] = 0.0  # RETRY_AFTER_S has passed
    await node.refresh([topic])
    assert node.get((1, 2, 1), CREATED).messages_count == 9
    assert any("reports its partitions' counters again" in r.message for r in caplog.records)


async def test_a_slow_primary_is_waited_for_at_most_stats_wait_s(monkeypatch) -> None:
    monkeypatch.setattr(peer_stats, "STATS_WAIT_S", 0.05)
    topic = _topic(1, 2, 2)
    primaries = Primaries({(1, 2, 1): _partition(1, 5)})
    primaries.delay_s = 30.0
    node = _node(topic, primaries)
    await asyncio.wait_for(node.refresh([topic]), 10)  # not the 30 s of the primary
    assert node.get((1, 2, 1), CREATED) is None


async def test_concurrent_refreshes_share_one_call_per_group() -> None:
    topic = _topic(1, 2, 2)
    primaries = Primaries({(1, 2, 1): _partition(1, 5)})
    primaries.delay_s = 0.01
    node = _node(topic, primaries)
    await asyncio.gather(node.refresh([topic]), node.refresh([topic]))
    assert primaries.asked == [1]
    assert node.get((1, 2, 1), CREATED).messages_count == 5


def test_a_primary_answers_only_for_the_partitions_it_holds() -> None:
    shard = SimpleNamespace(partitions={(1, 2, 0): _partition(0, 3)})
    rows = msgspec.msgpack.decode(stats_of_held(shard, msgspec.msgpack.encode(
        [(1, 2, 0), (1, 2, 9)])))
    assert rows == [[1, 2, 0, CREATED, 1, 2, 300, 3]]


@pytest.mark.parametrize("body", [b"\xc1", msgspec.msgpack.encode(["x"])])
def test_a_body_that_is_not_a_key_list_is_refused(body: bytes) -> None:
    with pytest.raises((msgspec.DecodeError, msgspec.ValidationError)):
        stats_of_held(SimpleNamespace(partitions={}), body)
