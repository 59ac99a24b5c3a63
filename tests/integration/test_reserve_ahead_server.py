"""``system.segment.reserve_ahead`` on a real server: a partition receiving big batches has
disk blocks reserved past its log's end while it runs (the file's size stays the data's);
they are given back at a clean stop and after a crash; "0" reserves nothing; every message
is there, exact, through all of it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lurcher.core.log.segment import METADATA_SLACK
from tests.support import raw
from tests.support.disk import blocks_past_end
from tests.support.server import ServerFactory

MIB = 1024 * 1024
BATCHES, PER_BATCH, SIZE = 6, 64, 4000  # batches of about 260 KB: a 4 MiB step each


def payload(i: int) -> bytes:
    return f"message {i}:".encode().ljust(SIZE, bytes([65 + i % 26]))


def segment_log(data_dir: Path) -> Path:
    logs = [p for p in data_dir.rglob("*.log") if "partitions" in p.parts]
    assert len(logs) == 1, logs
    return logs[0]


def send_all(address: str) -> None:
    raw.fill_partition(address, "big", "t", ([payload(b * PER_BATCH + i)
                                              for i in range(PER_BATCH)]
                                             for b in range(BATCHES)))


def read_everything(address: str) -> list[bytes]:
    with raw.RawClient(address, timeout_s=30) as c:
        c.login()
        return [m.payload for m in c.poll_all("big", "t", 0)]


@pytest.mark.parametrize("io", ["posix", "uring"])
def test_big_batches_reserve_blocks_ahead_until_the_server_stops(server_factory: ServerFactory,
                                                                 io: str):
    server = server_factory({"LURCHER_SYSTEM_IO": io})
    send_all(server.tcp_address)
    assert server.data_dir is not None
    log = segment_log(server.data_dir)
    expected = [payload(i) for i in range(BATCHES * PER_BATCH)]
    assert os.path.getsize(log) == sum(64 + len(p) for p in expected)  # headers + payloads
    assert blocks_past_end(log) >= 2 * MIB
    server.restart()
    assert blocks_past_end(log) <= METADATA_SLACK
    assert read_everything(server.tcp_address) == expected


def test_a_crash_leaves_no_reservation_behind(server_factory: ServerFactory):
    server = server_factory({})
    send_all(server.tcp_address)
    assert server.data_dir is not None
    log = segment_log(server.data_dir)
    assert blocks_past_end(log) >= 2 * MIB
    server.restart(crash=True)
    assert blocks_past_end(log) <= METADATA_SLACK
    assert read_everything(server.tcp_address) == [payload(i)
                                                   for i in range(BATCHES * PER_BATCH)]


def test_reserve_ahead_zero_reserves_nothing(server_factory: ServerFactory):
    server = server_factory({"LURCHER_SYSTEM_SEGMENT_RESERVE_AHEAD": "0"})
    send_all(server.tcp_address)
    assert server.data_dir is not None
    assert blocks_past_end(segment_log(server.data_dir)) <= METADATA_SLACK
