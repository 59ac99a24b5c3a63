"""GetStats's answer: ``Stats``.

Layout: a 108-byte numeric block (``STATS_HEAD``), five str(u32) strings (hostname, OS name,
OS version, kernel version, server version), ``iggy_server_semver u32`` (major*10^6 +
minor*10^3 + patch, 0 = unknown), ``cache_metrics_count u32`` + 32-byte ``CacheMetric``
entries, then ``threads_count u32``, ``free_disk_space u64``, ``total_disk_space u64``.
Every field is mandatory for the 0.8 decoder. The writer derives the cache count.
"""

from __future__ import annotations

import struct
from typing import Self

from lurcher.core.wire.buffer import Reader, Writer
from lurcher.core.wire.codec import WireStruct

STATS_HEAD = struct.Struct("<IffQQQQQQQQIIIIQII")
CACHE_METRIC = struct.Struct("<IIIQQf")
STATS_TAIL = struct.Struct("<IQQ")
assert (STATS_HEAD.size, CACHE_METRIC.size, STATS_TAIL.size) == (108, 32, 20)


def semver_code(version: str) -> int:
    """``"0.8.0"`` -> 8000 (major*10^6 + minor*10^3 + patch); 0 when unparsable."""
    try:
        major, minor, patch = (int(p) for p in version.split("-")[0].split("."))
    except ValueError:
        return 0
    return major * 1_000_000 + minor * 1_000 + patch


class CacheMetric(WireStruct, frozen=True):
    stream_id: int
    topic_id: int
    partition_id: int
    hits: int
    misses: int
    hit_ratio: float

    def write(self, w: Writer) -> None:
        w.raw(CACHE_METRIC.pack(self.stream_id, self.topic_id, self.partition_id,
                                self.hits, self.misses, self.hit_ratio))

    @classmethod
    def read(cls, r: Reader) -> Self:
        return cls(*CACHE_METRIC.unpack_from(r.buf, r.need(CACHE_METRIC.size, "cache metric")))


class Stats(WireStruct, frozen=True):
    process_id: int = 0
    cpu_usage: float = 0.0
    total_cpu_usage: float = 0.0
    memory_usage_bytes: int = 0
    total_memory_bytes: int = 0
    available_memory_bytes: int = 0
    run_time_us: int = 0
    start_time_us: int = 0
    read_bytes: int = 0
    written_bytes: int = 0
    messages_size_bytes: int = 0
    streams_count: int = 0
    topics_count: int = 0
    partitions_count: int = 0
    segments_count: int = 0
    messages_count: int = 0
    clients_count: int = 0
    consumer_groups_count: int = 0
    hostname: str = ""
    os_name: str = ""
    os_version: str = ""
    kernel_version: str = ""
    iggy_server_version: str = ""
    iggy_server_semver: int = 0
    cache_metrics: list[CacheMetric] = []
    threads_count: int = 0
    free_disk_space_bytes: int = 0
    total_disk_space_bytes: int = 0

    def write(self, w: Writer) -> None:
        w.raw(STATS_HEAD.pack(*(getattr(self, f) for f in self.__struct_fields__[:18])))
        for text in (self.hostname, self.os_name, self.os_version, self.kernel_version,
                     self.iggy_server_version):
            w.str32(text)
        w.u32(self.iggy_server_semver).u32(len(self.cache_metrics))
        for metric in self.cache_metrics:
            metric.write(w)
        w.raw(STATS_TAIL.pack(self.threads_count, self.free_disk_space_bytes,
                              self.total_disk_space_bytes))

    @classmethod
    def read(cls, r: Reader) -> Self:
        head = STATS_HEAD.unpack_from(r.buf, r.need(STATS_HEAD.size, "stats"))
        texts = [r.str32(what) for what in
                 ("hostname", "os_name", "os_version", "kernel_version", "server_version")]
        semver = r.u32("iggy_server_semver")
        metrics = [CacheMetric.read(r) for _ in range(r.u32("cache_metrics_count"))]
        tail = STATS_TAIL.unpack_from(r.buf, r.need(STATS_TAIL.size, "stats tail"))
        return cls(*head, *texts, semver, metrics, *tail)
