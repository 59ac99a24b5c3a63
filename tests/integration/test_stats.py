"""GetStats on a real server: every field is present and plausible, counts follow the data
(streams, topics, partitions, segments, messages, bytes, groups, clients) and change with
deletions."""

from __future__ import annotations

import os
import time

import psutil

from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.requests.consumer_groups.create_consumer_group import (
    CreateConsumerGroup,
)
from lurcher.core.wire.requests.partitions.delete_partitions import DeletePartitions
from lurcher.core.wire.requests.system.get_stats import GetStats
from lurcher.core.wire.responses.stats import Stats
from tests.support import raw

MESSAGE_BYTES = 64 + 100


def stats(c: raw.RawClient) -> Stats:
    return Stats.decode_exact(c.call(GetStats.CODE, GetStats().encode()))


def test_stats_fields(server_factory):
    server = server_factory({"LURCHER_SYSTEM_SEGMENT_SIZE": "4096"})
    with raw.RawClient(server.tcp_address) as c, raw.RawClient(server.tcp_address) as other:
        c.login()
        other.ping()
        empty = stats(c)
        assert (empty.streams_count, empty.topics_count, empty.partitions_count,
                empty.segments_count, empty.messages_count, empty.messages_size_bytes,
                empty.consumer_groups_count) == (0, 0, 0, 0, 0, 0, 0)
        assert empty.process_id == server.pid and empty.clients_count == 2
        assert empty.iggy_server_version == "0.8.0" and empty.iggy_server_semver == 8000
        assert 0 < empty.memory_usage_bytes < empty.total_memory_bytes
        assert 0 < empty.available_memory_bytes <= empty.total_memory_bytes
        now_us = time.time_ns() // 1000
        assert now_us - 60_000_000 < empty.start_time_us <= now_us
        assert 0 <= empty.run_time_us < 60_000_000
        assert empty.threads_count == psutil.Process(server.pid).num_threads()
        disk = os.statvfs(server.data_dir)
        assert empty.total_disk_space_bytes == disk.f_blocks * disk.f_frsize
        assert 0 < empty.free_disk_space_bytes <= empty.total_disk_space_bytes
        assert empty.hostname and empty.os_name and empty.os_version and empty.kernel_version

        c.create_stream("s")
        c.create_topic("s", "t", 3)
        c.create_stream("s2")
        for _ in range(8):                           # 64 messages -> segments 0 and 32
            c.send("s", "t", raw.partition_id(0), [raw.message(b"x" * 100)] * 8)
        c.send("s", "t", raw.partition_id(1), [raw.message(b"y" * 100)])
        sid, tid = Identifier.parse("s"), Identifier.parse("t")
        c.call(CreateConsumerGroup.CODE, CreateConsumerGroup(sid, tid, "g").encode())
        full = stats(c)
        assert (full.streams_count, full.topics_count, full.partitions_count,
                full.consumer_groups_count) == (2, 1, 3, 1)
        assert (full.messages_count, full.messages_size_bytes) == (65, 65 * MESSAGE_BYTES)
        assert full.segments_count == 2 + 1 + 1
        assert full.written_bytes >= 0 and full.read_bytes >= 0

        c.call(DeletePartitions.CODE, DeletePartitions(sid, tid, 2).encode())
        after = stats(c)
        assert (after.partitions_count, after.segments_count, after.messages_count) == (1, 2, 64)
        assert after.run_time_us > full.run_time_us
