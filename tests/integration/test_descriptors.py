"""Many partitions under a low descriptor limit (issue 14, point 6), on a real server.

The server is started as under ``ulimit -n``: soft 256, hard 1024 open files. It must raise
the soft limit to the hard one (and log it), keep segment files behind its bounded cache,
hold a 1,000-partition topic (2,000 segment files), take a send to every partition, come
back after a restart (clean and SIGKILL) and answer every poll and new connections.
The partition limit answers TOO_MANY_PARTITIONS (2015).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support import admin, raw
from tests.support.server import REPO_ROOT, LurcherServer, ServerFactory

PARTITIONS = 1000
SOFT, HARD = 256, 1024
TOO_MANY_PARTITIONS = 2015


def payload(pid: int, i: int) -> bytes:
    return f"partition {pid} message {i}".encode()


def send_to_every_partition(address: str) -> None:
    with raw.RawClient(address, timeout_s=30) as c:
        c.login()
        for pid in range(PARTITIONS):
            c.send("many", "t", raw.partition_id(pid), [raw.message(payload(pid, i))
                                                          for i in range(3)])


def check_every_partition(address: str) -> None:
    with raw.RawClient(address, timeout_s=30) as c:
        c.login()
        for pid in range(PARTITIONS):
            got = [m.payload for m in c.poll("many", "t", pid, count=10).messages]
            assert got == [payload(pid, i) for i in range(3)], f"partition {pid}"


def many_connections_answer(address: str, n: int = 40) -> None:
    clients = [raw.RawClient(address, timeout_s=30) for _ in range(n)]
    try:
        for c in clients:
            c.ping()
    finally:
        for c in clients:
            c.close()


@pytest.mark.slow
@pytest.mark.parametrize("shards", [1, 2])
def test_thousand_partitions_under_a_low_descriptor_limit(tmp_path, shards: int) -> None:
    server = LurcherServer()
    server.open_files_limit = (SOFT, HARD)
    with server:
        server.start(tmp_path / "data", {"LURCHER_SYSTEM_SHARDING_SHARDS": str(shards)})
        assert f"open files limit raised from {SOFT} to the hard limit {HARD}" in server.log_tail(
            10**6)
        with raw.RawClient(server.tcp_address) as c:
            c.login()
            c.create_stream("many")
            c.create_topic("many", "t", PARTITIONS)
        send_to_every_partition(server.tcp_address)
        many_connections_answer(server.tcp_address)
        server.restart()
        check_every_partition(server.tcp_address)
        server.restart(crash=True)
        check_every_partition(server.tcp_address)
        many_connections_answer(server.tcp_address)


def test_server_partition_limit_answers_too_many_partitions(server_factory: ServerFactory) -> None:
    server = server_factory({"LURCHER_SYSTEM_PARTITION_MAX_PARTITIONS": "30"})
    with raw.RawClient(server.tcp_address) as c:
        c.login()
        c.create_stream("limited")
        c.create_topic("limited", "t", 20)
        with pytest.raises(raw.StatusError) as over:
            admin.create_partitions(c, "limited", "t", 11)
        assert over.value.status == TOO_MANY_PARTITIONS
        admin.create_partitions(c, "limited", "t", 10)
        with pytest.raises(raw.StatusError) as refused:
            c.create_topic("limited", "u", 1)
        assert refused.value.status == TOO_MANY_PARTITIONS
        with pytest.raises(raw.StatusError) as too_big:
            c.create_topic("limited", "v", 1001)
        assert too_big.value.status == TOO_MANY_PARTITIONS
        c.ping()


BIG_PARTITIONS = 12
BIG_PAYLOAD = 20_000


def big_payload(pid: int, i: int) -> bytes:
    return f"{pid}:{i}:".encode().ljust(BIG_PAYLOAD, bytes([65 + pid]))


@pytest.mark.parametrize("shards", [1, 2])
def test_sendfile_polls_with_a_tiny_descriptor_cache(server_factory: ServerFactory,
                                                     shards: int) -> None:
    """Two segment files open per shard at most: every poll (large, so sent with sendfile)
    of one partition is interleaved with sends and polls of the others, which evict its
    files; each answer is still exactly the stored messages."""
    server = server_factory({"LURCHER_SYSTEM_SEGMENT_MAX_OPEN_FILES": "2",
                             "LURCHER_SYSTEM_SEGMENT_SIZE": "50KiB",
                             "LURCHER_SYSTEM_SHARDING_SHARDS": str(shards)})
    with raw.RawClient(server.tcp_address) as reader, \
            raw.RawClient(server.tcp_address) as writer:
        reader.login()
        writer.login()
        writer.create_stream("tiny")
        writer.create_topic("tiny", "t", BIG_PARTITIONS)
        sent: dict[int, list[bytes]] = {pid: [] for pid in range(BIG_PARTITIONS)}
        for round_ in range(4):
            for pid in range(BIG_PARTITIONS):
                batch = [big_payload(pid, len(sent[pid]) + i) for i in range(5)]
                writer.send("tiny", "t", raw.partition_id(pid), [raw.message(p) for p in batch])
                sent[pid] += batch
                other = (pid * 7 + round_) % BIG_PARTITIONS
                got = [m.payload for m in reader.poll("tiny", "t", other, count=1000).messages]
                assert got == sent[other], f"partition {other} after round {round_}"
        server.restart()
    with raw.RawClient(server.tcp_address) as reader:
        reader.login()
        for pid in range(BIG_PARTITIONS):
            assert [m.payload for m in reader.poll_all("tiny", "t", pid)] == sent[pid]


@pytest.mark.parametrize("key,value", [("SEGMENT_MAX_OPEN_FILES", "1"),
                                       ("PARTITION_MAX_PARTITIONS", "0")])
def test_unusable_limits_are_refused_at_start_in_one_line(tmp_path, key: str,
                                                          value: str) -> None:
    env = {**os.environ, "LURCHER_SYSTEM_PATH": str(tmp_path), f"LURCHER_SYSTEM_{key}": value,
           "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run([sys.executable, "-m", "lurcher.server"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lurcher-server: configuration error:")
    assert f"system.{key.lower().replace('_', '.', 1)}" in lines[0]
