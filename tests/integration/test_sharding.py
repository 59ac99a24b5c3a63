"""Several shard processes: partition ownership, forwarding, socket migration, metadata
replication, pipelining across a migration, and a shard restarted after SIGKILL.

Which shard accepted a connection is read from its client id (ids are numbered so that
``client_id % shards`` is the accepting shard; a migrated connection keeps its id, and the
move is logged); which shard owns a partition comes from the server's ownership function.
"""

from __future__ import annotations

import os
import signal
import struct
import threading
import time
from pathlib import Path

import pytest

from lurcher.core.shard.shard import owner_of
from tests.support import raw
from tests.support.server import LurcherServer, ServerFactory

SHARDS = 2
GET_ME = 20
GET_STREAM = 200
STREAM, TOPIC, PARTITIONS = "sharded", "t", 4


def sharded(server_factory: ServerFactory, shards: int = SHARDS) -> LurcherServer:
    return server_factory({"LURCHER_SYSTEM_SHARDING_SHARDS": str(shards)})


def shard_of(client: raw.RawClient, shards: int = SHARDS) -> int:
    client_id = struct.unpack_from("<I", client.call(GET_ME))[0]
    return client_id % shards


def client_on(server: LurcherServer, shard: int, shards: int = SHARDS) -> raw.RawClient:
    """A logged-in raw client whose connection landed on ``shard``."""
    for _ in range(200):
        client = raw.RawClient(server.tcp_address)
        client.login()
        if shard_of(client, shards) == shard:
            return client
        client.close()
    pytest.fail(f"no connection landed on shard {shard} in 200 attempts")


def partition_owned_by(shard: int, stream_id: int = 0, topic_id: int = 0) -> int:
    return next(p for p in range(PARTITIONS) if owner_of(stream_id, topic_id, p, SHARDS) == shard)


def setup_topic(client: raw.RawClient) -> None:
    client.create_stream(STREAM)
    client.create_topic(STREAM, TOPIC, PARTITIONS)


def payloads(tag: str, n: int) -> list[bytes]:
    return [raw.message(f"{tag}-{i}".encode()) for i in range(n)]


def test_metadata_created_on_one_shard_is_visible_at_once_on_the_other(server_factory):
    server = sharded(server_factory)
    a, b = client_on(server, 0), client_on(server, 1)
    for creator, reader, name in ((b, a, "made-on-1"), (a, b, "made-on-0")):
        creator.create_stream(name)
        assert reader.call(GET_STREAM, raw.ident(name)), f"{name} not visible on the other shard"
        creator.create_topic(name, "t", 3)
        reader.send(name, "t", raw.partition_id(2), payloads("x", 1))


def test_partitions_of_the_other_shard_are_served_and_the_connection_migrates(server_factory):
    server = sharded(server_factory)
    client = client_on(server, 0)
    setup_topic(client)
    foreign = partition_owned_by(1)
    before = struct.unpack_from("<I", client.call(GET_ME))[0]
    for batch in range(3):
        client.send(STREAM, TOPIC, raw.partition_id(foreign), payloads(f"b{batch}", 10))
    polled = client.poll_all(STREAM, TOPIC, foreign)
    assert [m.payload for m in polled] == [f"b{b}-{i}".encode() for b in range(3) for i in range(10)]
    after = struct.unpack_from("<I", client.call(GET_ME))[0]
    assert after == before, "the session did not survive the move"
    assert f"client {before} migrated to shard 1" in server.log_tail(200_000)
    local = partition_owned_by(0)
    client.send(STREAM, TOPIC, raw.partition_id(local), payloads("local", 2))
    assert len(client.poll_all(STREAM, TOPIC, local)) == 2


def test_pipelined_requests_are_answered_in_order_across_a_migration(server_factory):
    server = sharded(server_factory)
    client = client_on(server, 0)
    client_id = struct.unpack_from("<I", client.call(GET_ME))[0]
    setup_topic(client)
    foreign = partition_owned_by(1)
    frames, expected = b"", []
    for i in range(12):
        send = raw.send_messages_payload(STREAM, TOPIC, raw.partition_id(foreign),
                                         payloads(f"p{i}", 5))
        frames += struct.pack("<II", len(send) + 4, 101) + send
        poll = raw.poll_payload(STREAM, TOPIC, foreign, raw.STRATEGY_OFFSET, 0, 1000)
        frames += struct.pack("<II", len(poll) + 4, 100) + poll
        expected.append(5 * (i + 1))
    client.send_bytes(frames)
    for count in expected:
        assert client.read_response().status == 0
        poll = client.read_response()
        assert poll.status == 0
        assert len(raw.parse_poll(poll.payload).messages) == count
    assert f"client {client_id} migrated to shard 1" in server.log_tail(200_000)


def shard_pid(server: LurcherServer, shard: int) -> int:
    return int((Path(server.data_dir) / "runtime" / f"shard-{shard}.pid").read_text())


class Writer(threading.Thread):
    """Sends acknowledged batches to one partition, reconnecting after errors."""

    def __init__(self, address: str, partition: int, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.address, self.partition, self.stop = address, partition, stop
        self.acked: list[bytes] = []
        self.errors = 0

    def run(self) -> None:
        client, seq = None, 0
        while not self.stop.is_set():
            try:
                if client is None:
                    client = raw.RawClient(self.address, timeout_s=5)
                    client.login()
                batch = [f"w{self.partition}-{seq}-{i}".encode() for i in range(5)]
                client.send(STREAM, TOPIC, raw.partition_id(self.partition),
                            [raw.message(p) for p in batch])
                self.acked.extend(batch)
                seq += 1
            except (OSError, raw.PeerClosed, raw.StatusError):
                self.errors += 1
                if client is not None:
                    client.close()
                client = None
                seq += 1
                time.sleep(0.05)
        if client is not None:
            client.close()


def test_killed_shard_is_restarted_and_nothing_acknowledged_is_lost(server_factory):
    server = sharded(server_factory)
    admin = client_on(server, 0)
    setup_topic(admin)
    stop = threading.Event()
    writers = [Writer(server.tcp_address, partition_owned_by(s), stop) for s in (0, 1)]
    for w in writers:
        w.start()
    time.sleep(1.0)
    victim = shard_pid(server, 1)
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        pid_file = Path(server.data_dir) / "runtime" / "shard-1.pid"
        if pid_file.exists() and int(pid_file.read_text()) != victim:
            break
        admin.ping()  # shard 0 keeps serving meanwhile
        time.sleep(0.1)
    else:
        pytest.fail("the supervisor did not restart shard 1")
    time.sleep(1.5)
    stop.set()
    for w in writers:
        w.join(15)
    assert server.running
    checker = client_on(server, 0)
    for w in writers:
        stored = [m.payload for m in checker.poll_all(STREAM, TOPIC, w.partition)]
        missing = set(w.acked) - set(stored)
        assert not missing, f"partition {w.partition}: {len(missing)} acknowledged messages lost"
        assert len(w.acked) > 20, "the writer made too little progress to prove anything"
    assert "restarting it" in server.log_tail(500_000)


def test_a_connection_sending_large_batches_migrates_after_its_reply(server_factory):
    server = sharded(server_factory)
    client = client_on(server, 0)
    client_id = struct.unpack_from("<I", client.call(GET_ME))[0]
    setup_topic(client)
    foreign = partition_owned_by(1)
    big = [raw.message(bytes([i % 251]) * 1000) for i in range(200)]  # a 200 KB frame
    for _ in range(4):
        client.send(STREAM, TOPIC, raw.partition_id(foreign), big)
    assert f"client {client_id} migrated to shard 1" in server.log_tail(200_000)
    assert len(client.poll_all(STREAM, TOPIC, foreign)) == 800


GET_GROUP, CREATE_GROUP, JOIN_GROUP = 600, 602, 604


def group_members_count(client: raw.RawClient) -> int:
    reply = client.call(GET_GROUP, raw.ident(STREAM) + raw.ident(TOPIC) + raw.ident("g"))
    return struct.unpack_from("<III", reply)[2]


def restart_shard(server: LurcherServer, shard: int) -> None:
    """SIGKILL the shard and wait until the supervisor has started it again."""
    victim = shard_pid(server, shard)
    os.kill(victim, signal.SIGKILL)
    pid_file = Path(server.data_dir) / "runtime" / f"shard-{shard}.pid"
    for _ in range(600):
        if pid_file.exists() and int(pid_file.read_text()) != victim:
            return
        time.sleep(0.05)
    pytest.fail(f"the supervisor did not restart shard {shard}")


def test_members_on_a_killed_shard_leave_their_groups(server_factory):
    """Clients of a shard that died are gone: the metadata owner (which keeps group
    membership) must drop them, or their partitions stay assigned to nobody alive and a new
    client of the restarted shard, numbered like a dead one, would inherit its membership."""
    server = sharded(server_factory)
    admin = client_on(server, 0)
    setup_topic(admin)
    admin.call(CREATE_GROUP, raw.ident(STREAM) + raw.ident(TOPIC) + raw.name("g"))
    member = client_on(server, 1)
    member.call(JOIN_GROUP, raw.ident(STREAM) + raw.ident(TOPIC) + raw.ident("g"))
    assert group_members_count(admin) == 1
    restart_shard(server, 1)
    newcomer = client_on(server, 1)  # the restarted shard is subscribed: it answers
    assert group_members_count(newcomer) == 0
    assert group_members_count(admin) == 0


@pytest.mark.parametrize("shards", [2, 3])
def test_members_on_other_shards_keep_their_groups_when_shard_0_restarts(server_factory,
                                                                         shards: int):
    """Shard 0 keeps group membership in memory only: after it restarts, the other shards'
    clients are still members (their shards tell it again, each subscription checking the
    clients of those before it), not left out of their groups with nothing to tell them to
    join again."""
    server = sharded(server_factory, shards)
    admin = client_on(server, 0, shards)
    setup_topic(admin)
    admin.call(CREATE_GROUP, raw.ident(STREAM) + raw.ident(TOPIC) + raw.name("g"))
    for p in range(PARTITIONS):
        admin.send(STREAM, TOPIC, raw.partition_id(p), payloads(f"p{p}", 3))
    members = [client_on(server, shard, shards) for shard in range(1, shards)]
    for member in members:
        member.call(JOIN_GROUP, raw.ident(STREAM) + raw.ident(TOPIC) + raw.ident("g"))
    restart_shard(server, 0)
    counts = []
    for _ in range(100):
        with client_on(server, 0, shards) as observer:
            counts.append(group_members_count(observer))
        if counts[-1] == len(members):
            break
        time.sleep(0.1)
    assert counts[-1] == len(members), f"members seen by the restarted shard 0: {counts}"
    group = b"\x02" + raw.ident("g")
    polled = [m.payload for member in members for _ in range(PARTITIONS) for m in member.poll(
        STREAM, TOPIC, None, raw.STRATEGY_NEXT, 0, 10, auto_commit=True, consumer=group).messages]
    assert sorted(polled) == sorted(p for i in range(PARTITIONS)
                                    for p in [f"p{i}-{n}".encode() for n in range(3)])
