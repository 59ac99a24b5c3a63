"""A kill in the middle of a deletion never leaks a deleted entity's messages.

The server is started with ``TEST_LURCHER_CRASH_AT`` naming the exact step where it must
SIGKILL itself (``lurcher.core.faults``): just after the delete event is in the metadata log
(``meta-recorded:*``: the deletion is committed, its directories are not gone yet) or just
before it is written (``meta-recording:*``: the deletion never happened). After a restart
without the hook the test re-creates the same ids and checks that no old message shows up,
that a deletion that was not committed kept everything, and that no directory the metadata
does not know remains. A separate test plants orphan partition directories while the server
is down and checks start-up removes them. 1 and 2 shards; with 2, also a replica shard that
missed a deletion while the metadata owner restarted (it catches up without observers).
"""

from __future__ import annotations

import shutil
import socket
import time
from pathlib import Path

import pytest

from tests.support import admin
from tests.support.raw import (GET_STREAM, PeerClosed, RawClient, StatusError, ident, message,
                                partition_id)
from tests.support.server import LurcherServer, ServerFactory

pytestmark = pytest.mark.slow  # 11 servers started, some twice

CRASH_ENV = "TEST_LURCHER_CRASH_AT"
SECRET = b"secret of the deleted entity"
PARTITIONS = 3
LIVENESS_S = 60.0


def shard_env(shards: int) -> dict[str, str]:
    return {"LURCHER_SYSTEM_SHARDING_SHARDS": str(shards)}


def seed(client: RawClient, stream_name: str) -> tuple[int, int]:
    """A stream with one topic of PARTITIONS partitions, SECRET messages in each."""
    sid = client.create_stream(stream_name)
    tid = client.create_topic(sid, "t", PARTITIONS)
    for pid in range(PARTITIONS):
        client.send(sid, tid, partition_id(pid), [_message(pid, i) for i in range(5)])
    return sid, tid


def _message(pid: int, i: int) -> bytes:
    return message(SECRET + bytes([pid, i]), message_id=pid * 100 + i + 1)


def payloads(client: RawClient, sid: int, tid: int, pid: int) -> list[bytes]:
    return [m.payload for m in client.poll_all(sid, tid, pid)]


def crash_during(server: LurcherServer, action) -> None:
    """Run ``action`` (a client call the hook kills the server in), then restart cleanly."""
    with RawClient(server.tcp_address, timeout_s=15.0) as client:
        client.login()
        with pytest.raises((PeerClosed, StatusError, socket.timeout, ConnectionError)):
            action(client)
    server.env.pop(CRASH_ENV)
    server.restart(crash=True)


def assert_on_disk(server: LurcherServer, expected: set[tuple[int, int, int]]) -> None:
    data = Path(server.data_dir)
    assert admin.partition_keys(data) == expected
    assert admin.tombstones(data) == []


@pytest.fixture(params=[1, 2], ids=["1shard", "2shards"])
def shards(request) -> int:
    return request.param


def test_stream_delete_committed_before_rmtree(server_factory: ServerFactory, shards: int):
    server = server_factory({**shard_env(shards), CRASH_ENV: "meta-recorded:StreamDeleted"})
    with RawClient(server.tcp_address) as client:
        client.login()
        keep_sid, keep_tid = seed(client, "kept")
        sid, _ = seed(client, "doomed")
    crash_during(server, lambda c: admin.delete_stream(c, sid))
    with RawClient(server.tcp_address) as client:
        client.login()
        assert client.call(GET_STREAM, ident("doomed")) == b""
        new_sid = client.create_stream("fresh")
        assert new_sid == sid  # the id is reused: the case that leaked
        new_tid = client.create_topic(new_sid, "t", PARTITIONS)
        for pid in range(PARTITIONS):
            assert payloads(client, new_sid, new_tid, pid) == []
            assert len(payloads(client, keep_sid, keep_tid, pid)) == 5
    assert_on_disk(server, {(s, t, p) for s, t in ((keep_sid, keep_tid), (new_sid, new_tid))
                            for p in range(PARTITIONS)})


def test_stream_delete_not_yet_recorded_is_rolled_back(server_factory: ServerFactory, shards: int):
    server = server_factory({**shard_env(shards), CRASH_ENV: "meta-recording:StreamDeleted"})
    with RawClient(server.tcp_address) as client:
        client.login()
        sid, tid = seed(client, "survivor")
    crash_during(server, lambda c: admin.delete_stream(c, sid))
    with RawClient(server.tcp_address) as client:
        client.login()
        assert client.call(GET_STREAM, ident("survivor")) != b""
        for pid in range(PARTITIONS):
            assert len(payloads(client, sid, tid, pid)) == 5
    assert_on_disk(server, {(sid, tid, p) for p in range(PARTITIONS)})


def crash_seeded(server_factory: ServerFactory, shards: int, point: str, action):
    """A server with stream "s" seeded, killed by the hook at ``point`` while ``action(client,
    sid, tid)`` runs, restarted without the hook; (server, sid, tid)."""
    server = server_factory({**shard_env(shards), CRASH_ENV: point})
    with RawClient(server.tcp_address) as client:
        client.login()
        sid, tid = seed(client, "s")
    crash_during(server, lambda c: action(c, sid, tid))
    return server, sid, tid


def test_topic_delete_committed_before_rmtree(server_factory: ServerFactory, shards: int):
    server, sid, tid = crash_seeded(server_factory, shards, "meta-recorded:TopicDeleted",
                                    admin.delete_topic)
    with RawClient(server.tcp_address) as client:
        client.login()
        new_tid = client.create_topic(sid, "again", PARTITIONS)
        assert new_tid == tid
        for pid in range(PARTITIONS):
            assert payloads(client, sid, new_tid, pid) == []
    assert_on_disk(server, {(sid, tid, p) for p in range(PARTITIONS)})


def test_partitions_delete_committed_before_rmtree(server_factory: ServerFactory, shards: int):
    server, sid, tid = crash_seeded(server_factory, shards, "meta-recorded:PartitionsDeleted",
                                    lambda c, s, t: admin.delete_partitions(c, s, t, 2))
    with RawClient(server.tcp_address) as client:
        client.login()
        assert len(payloads(client, sid, tid, 0)) == 5
        admin.create_partitions(client, sid, tid, 2)
        for pid in (1, 2):
            assert payloads(client, sid, tid, pid) == []
    assert_on_disk(server, {(sid, tid, p) for p in range(PARTITIONS)})


def test_start_removes_partition_dirs_the_metadata_does_not_know(
        server_factory: ServerFactory, shards: int):
    server = server_factory(shard_env(shards))
    with RawClient(server.tcp_address) as client:
        client.login()
        sid, tid = seed(client, "s")
    server.stop()
    data = Path(server.data_dir)
    old = data / "streams" / str(sid) / "topics" / str(tid) / "partitions"
    planted = [data / "streams" / str(sid + 1) / "topics" / "0" / "partitions" / "0",
               data / "streams" / str(sid) / "topics" / str(tid + 1) / "partitions" / "0",
               old / str(PARTITIONS)]
    for path in planted:
        shutil.copytree(old / "0", path)
    server.restart()
    assert_on_disk(server, {(sid, tid, p) for p in range(PARTITIONS)})
    assert "orphan" in server.log_tail(20_000)
    with RawClient(server.tcp_address) as client:
        client.login()
        other = client.create_stream("other")
        assert other == sid + 1
        other_tid = client.create_topic(other, "t", 1)
        assert payloads(client, other, other_tid, 0) == []
        new_tid = client.create_topic(sid, "second", 1)
        assert new_tid == tid + 1
        assert payloads(client, sid, new_tid, 0) == []
        admin.create_partitions(client, sid, tid, 1)
        assert payloads(client, sid, tid, PARTITIONS) == []


def retry(address: str, action, what: str):
    """``action()`` on a fresh logged-in connection until it succeeds (a shard restarting)."""
    deadline = time.monotonic() + LIVENESS_S
    while True:
        try:
            with RawClient(address, timeout_s=5.0) as client:
                client.login()
                return action(client)
        except (PeerClosed, StatusError, OSError) as exc:
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: still failing after {LIVENESS_S}s: {exc}") from exc
            time.sleep(0.2)


def test_replica_shard_forgets_what_was_deleted_while_the_owner_restarted(
        server_factory: ServerFactory):
    """Shard 0 dies right after recording a topic deletion and is restarted by the
    supervisor; shard 1 never got the event live. Once it catches up it must not keep
    serving the deleted partitions under the re-used ids."""
    server = server_factory({**shard_env(2), CRASH_ENV: "meta-recorded:TopicDeleted"})
    with RawClient(server.tcp_address) as client:
        client.login()
        sid, tid = seed(client, "s")
        with pytest.raises((PeerClosed, StatusError, socket.timeout, ConnectionError)):
            admin.delete_topic(client, sid, tid)
    address = server.tcp_address
    new_tid = retry(address, lambda c: c.create_topic(sid, "again", PARTITIONS), "re-create")
    assert new_tid == tid
    for pid in range(PARTITIONS):
        assert retry(address, lambda c: payloads(c, sid, tid, pid), f"poll {pid}") == []
