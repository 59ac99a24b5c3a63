"""Consumer groups over raw frames on a real server: commands and their errors, round-robin
assignment, the cooperative hand-over when a member joins, rebalancing on leave and on
disconnect, group polls (Next, no partition id, auto-commit), the heartbeat verifier,
reading a group's stored offsets without joining it (one and two shards), and hand-overs of
purged partitions."""

from __future__ import annotations

import struct
import time

import pytest

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.requests.consumer_groups.create_consumer_group import (
    CreateConsumerGroup,
)
from lurcher.core.wire.requests.consumer_groups.delete_consumer_group import (
    DeleteConsumerGroup,
)
from lurcher.core.wire.requests.consumer_groups.get_consumer_group import GetConsumerGroup
from lurcher.core.wire.requests.consumer_groups.get_consumer_groups import GetConsumerGroups
from lurcher.core.wire.requests.consumer_groups.join_consumer_group import JoinConsumerGroup
from lurcher.core.wire.requests.consumer_groups.leave_consumer_group import LeaveConsumerGroup
from lurcher.core.wire.requests.consumer_offsets.delete_consumer_offset import (
    DeleteConsumerOffset,
)
from lurcher.core.wire.requests.consumer_offsets.get_consumer_offset import GetConsumerOffset
from lurcher.core.wire.requests.consumer_offsets.store_consumer_offset import (
    StoreConsumerOffset,
)
from lurcher.core.wire.requests.partitions.create_partitions import CreatePartitions
from lurcher.core.wire.requests.streams.purge_stream import PurgeStream
from lurcher.core.wire.requests.topics.purge_topic import PurgeTopic
from lurcher.core.wire.responses.consumer_groups import GroupDetails, GroupHeader
from lurcher.core.wire.responses.consumer_offsets import ConsumerOffsetInfo
from lurcher.core.wire.values.consumer import Consumer
from tests.support import raw

S, T, G = Identifier.parse("s"), Identifier.parse("t"), Identifier.parse("g")
GROUP_CONSUMER = b"\x02" + raw.ident("g")


def call(c: raw.RawClient, request) -> bytes:
    return c.call(type(request).CODE, request.encode())


def status(c: raw.RawClient, request) -> int:
    return c.request(type(request).CODE, request.encode()).status


def details(c: raw.RawClient) -> GroupDetails:
    return GroupDetails.decode_exact(call(c, GetConsumerGroup(S, T, G)))


def assignment(c: raw.RawClient) -> list[list[int]]:
    return [sorted(m.partitions) for m in details(c).members]


def client(server) -> raw.RawClient:
    c = raw.RawClient(server.tcp_address)
    c.login()
    return c


def setup(server, partitions: int = 3, per_partition: int = 10) -> raw.RawClient:
    c = client(server)
    c.create_stream("s")
    c.create_topic("s", "t", partitions)
    for p in range(partitions):
        c.send("s", "t", raw.partition_id(p),
               [raw.message(f"{p}:{i}".encode()) for i in range(per_partition)])
    call(c, CreateConsumerGroup(S, T, "g"))
    return c


def group_poll(c: raw.RawClient, count: int = 4, auto_commit: bool = True,
               partition: int | None = None) -> raw.PollResult:
    return c.poll("s", "t", partition, raw.STRATEGY_NEXT, 0, count, auto_commit,
                  consumer=GROUP_CONSUMER)


def test_commands_and_errors(server):
    c = setup(server)
    assert c.request(600, raw.ident("s") + raw.ident("t") + raw.ident("nope")).length == 0
    assert status(c, CreateConsumerGroup(S, T, "g")) == ErrorCode.CONSUMER_GROUP_NAME_ALREADY_EXISTS
    assert status(c, JoinConsumerGroup(S, T, Identifier.parse("x"))) == ErrorCode.CONSUMER_GROUP_ID_NOT_FOUND
    assert status(c, LeaveConsumerGroup(S, T, G)) == ErrorCode.CONSUMER_GROUP_MEMBER_NOT_FOUND
    assert c.request(100, raw.poll_payload("s", "t", None, 5, 0, 1, True, GROUP_CONSUMER)).status \
        == ErrorCode.CONSUMER_GROUP_MEMBER_NOT_FOUND
    call(c, JoinConsumerGroup(S, T, G))
    call(c, JoinConsumerGroup(S, T, G))                   # joining twice is a no-op
    d = details(c)
    assert (d.header.id, d.header.partitions_count, d.header.members_count) == (0, 3, 1)
    assert [(m.id, m.partitions) for m in d.members] == [(0, [0, 1, 2])]
    headers = GroupHeader.decode_list(call(c, GetConsumerGroups(S, T)))
    assert [(h.id, h.name, h.members_count) for h in headers] == [(0, "g", 1)]
    call(c, LeaveConsumerGroup(S, T, G))
    assert details(c).members == []
    call(c, DeleteConsumerGroup(S, T, G))
    assert status(c, DeleteConsumerGroup(S, T, G)) == ErrorCode.CONSUMER_GROUP_ID_NOT_FOUND


def test_group_poll_round_robin_with_auto_commit(server):
    c = setup(server)
    call(c, JoinConsumerGroup(S, T, G))
    seen = []
    for _ in range(9):                                    # 3 polls per partition of 4 msgs
        got = group_poll(c)
        seen += [(got.partition_id, m.offset) for m in got.messages]
    assert sorted(seen) == [(p, o) for p in range(3) for o in range(10)]
    empty = group_poll(c)
    assert (empty.count, empty.current_offset) == (0, 9) and empty.partition_id in (0, 1, 2)


def test_cooperative_hand_over_on_join(server):
    a = setup(server)
    call(a, JoinConsumerGroup(S, T, G))
    polled = {group_poll(a, auto_commit=False).partition_id for _ in range(3)}
    assert polled == {0, 1, 2}
    b = client(server)
    call(b, JoinConsumerGroup(S, T, G))
    assert assignment(a) == [[0, 1, 2], []]               # partition 2 waits for a's commit
    assert {group_poll(a, auto_commit=False).partition_id for _ in range(4)} == {0, 1}
    assert group_poll(b).count == 0
    call(a, StoreConsumerOffset(Consumer.of("g", group=True), S, T, 2, 3))
    assert assignment(a) == [[0, 1], [2]]
    got = group_poll(b)
    assert (got.partition_id, [m.offset for m in got.messages]) == (2, [4, 5, 6, 7])
    assert a.request(121, StoreConsumerOffset(Consumer.of("g", group=True), S, T, 2, 9)
                     .encode()).status == ErrorCode.NOT_RESOLVED_CONSUMER  # no longer a's


def test_unpolled_partitions_move_at_once_and_disconnect_rebalances(server):
    a = setup(server)
    call(a, JoinConsumerGroup(S, T, G))
    b = client(server)
    call(b, JoinConsumerGroup(S, T, G))
    assert assignment(a) == [[0, 1], [2]]
    call(a, CreatePartitions(S, T, 1))
    assert assignment(a) == [[0, 2], [1, 3]]
    b.close()
    deadline = time.monotonic() + 5
    while len(details(a).members) != 1:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert assignment(a) == [[0, 1, 2, 3]]


# A client silent for 1.2 heartbeat intervals is dropped at the next check (one interval
# apart): by 2.2 s at 1 s, so PAST_STALE_S of pings every 0.1 s shows they keep it, and a
# late answer of up to a second does not make a pinging client look silent.
HEARTBEAT_INTERVAL = "1 s"
PAST_STALE_S = 3.0
DROPPED_WITHIN_S = 10.0  # a bound on waiting for the close, not a performance figure


@pytest.mark.parametrize("pinging", [False, True])
def test_heartbeat_disconnects_silent_clients(server_factory, pinging):
    server = server_factory({"LURCHER_HEARTBEAT_ENABLED": "true",
                             "LURCHER_HEARTBEAT_INTERVAL": HEARTBEAT_INTERVAL})
    a = setup(server)
    call(a, JoinConsumerGroup(S, T, G))
    deadline = time.monotonic() + PAST_STALE_S
    while time.monotonic() < deadline:
        if pinging:
            a.ping()
        time.sleep(0.1)
    if pinging:
        assert len(details(a).members) == 1
    else:
        assert a.closed_by_peer(DROPPED_WITHIN_S)
        with client(server) as other:
            assert details(other).members == []


def test_offsets_of_partitions_not_assigned_are_not_resolved(server):
    """Iggy 0.8 answers NotResolvedConsumer (3022) to a member storing or deleting the
    offset of a partition it is not assigned, or storing without one when it has none."""
    a = setup(server, partitions=1)
    call(a, JoinConsumerGroup(S, T, G))
    b = client(server)
    call(b, JoinConsumerGroup(S, T, G))
    group = Consumer.of("g", group=True)
    call(a, StoreConsumerOffset(group, S, T, 0, 4))
    for request in (StoreConsumerOffset(group, S, T, 0, 5),
                    StoreConsumerOffset(group, S, T, None, 5),
                    StoreConsumerOffset(group, S, T, 3, 5),
                    DeleteConsumerOffset(group, S, T, 0)):
        assert status(b, request) == ErrorCode.NOT_RESOLVED_CONSUMER, request
    assert stored_offset(b, group, 0) == (0, 4)


def test_member_without_partitions_polls_empty(server):
    a = setup(server, partitions=1)
    call(a, JoinConsumerGroup(S, T, G))
    b = client(server)
    call(b, JoinConsumerGroup(S, T, G))
    empty = group_poll(b)
    assert (empty.partition_id, empty.current_offset, empty.count) == (0, 0, 0)
    reply = b.call(100, raw.poll_payload("s", "t", None, 5, 0, 1, True, GROUP_CONSUMER))
    assert reply == struct.pack("<IQI", 0, 0, 0)


def stored_offset(c: raw.RawClient, consumer: Consumer, partition: int | None,
                  stream: Identifier = S, topic: Identifier = T) -> tuple[int, int] | None:
    """(partition id, stored offset) of a GetConsumerOffset, None for an empty answer."""
    reply = call(c, GetConsumerOffset(consumer, stream, topic, partition))
    if not reply:
        return None
    info = ConsumerOffsetInfo.decode_exact(reply)
    return info.partition_id, info.stored_offset


@pytest.mark.parametrize("shards", [1, 2])
def test_a_groups_offset_is_read_without_joining(server_factory, shards):
    """Iggy 0.8 reads a group's offset for any client, on the partition given or else 0,
    and answers empty for what does not exist; reading joins nobody."""
    server = server_factory({"LURCHER_SYSTEM_SHARDING_SHARDS": str(shards)})
    member = setup(server, partitions=4)
    call(member, JoinConsumerGroup(S, T, G))
    group = Consumer.of("g", group=True)
    for partition, offset in ((0, 2), (1, 3), (3, 9)):
        call(member, StoreConsumerOffset(group, S, T, partition, offset))
    assert group_poll(member, auto_commit=False).partition_id == 0   # its next one is 1
    assert stored_offset(member, group, None) == (0, 2)
    outsider = client(server)
    assert [stored_offset(outsider, group, p) for p in range(4)] == [
        (0, 2), (1, 3), None, (3, 9)]
    assert stored_offset(outsider, Consumer.of(0, group=True), None) == (0, 2)
    nowhere = Identifier.parse("nowhere")
    for missing in (stored_offset(outsider, Consumer.of("nope", group=True), 0),
                    stored_offset(outsider, group, 7),
                    stored_offset(outsider, group, 0, stream=nowhere),
                    stored_offset(outsider, group, 0, topic=nowhere)):
        assert missing is None
    assert details(outsider).header.members_count == 1


@pytest.mark.parametrize("purge", ["topic", "stream"])
def test_a_purged_partition_is_handed_over_at_once(server_factory, purge):
    """A purge empties the partition and drops the group's offset there, so nothing its
    member was delivered is left to commit: a hand-over waiting for that commit completes
    at the purge, and a member joining after it gets the partition at once (the old code
    kept the last delivered offset and waited for the rebalancing timeout, here 1 h)."""
    server = server_factory({"LURCHER_CONSUMER_GROUP_REBALANCING_TIMEOUT": "1 h"})
    a = setup(server)
    call(a, JoinConsumerGroup(S, T, G))
    assert {group_poll(a, auto_commit=False).partition_id for _ in range(3)} == {0, 1, 2}
    b = client(server)
    call(b, JoinConsumerGroup(S, T, G))
    assert assignment(a) == [[0, 1, 2], []]               # partition 2 waits for a's commit
    call(a, PurgeTopic(S, T) if purge == "topic" else PurgeStream(S))
    assert assignment(a) == [[0, 1], [2]]
    call(b, LeaveConsumerGroup(S, T, G))
    for p in range(3):
        a.send("s", "t", raw.partition_id(p), [raw.message(b"again")])
    assert [group_poll(a).count for _ in range(3)] == [1, 1, 1]   # committed: nothing pending
    call(a, PurgeTopic(S, T) if purge == "topic" else PurgeStream(S))
    c = client(server)
    call(c, JoinConsumerGroup(S, T, G))
    assert assignment(a) == [[0, 1], [2]]
