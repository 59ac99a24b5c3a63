"""Fixtures for the storage tests."""

from __future__ import annotations

import pytest
from log_helpers import ManualClock

from lurcher.core.log import IoBackend, LogConfig, Partition


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def part_dir(tmp_path) -> str:
    return str(tmp_path / "partitions" / "1")


@pytest.fixture
def open_partition(part_dir, clock):
    """``open_partition(segment_size_bytes=..., enforce_fsync=..., io=...)``; closed after."""
    opened: list[Partition] = []

    def make(segment_size_bytes: int = 1 << 30, enforce_fsync: bool = False,
             io: IoBackend | None = None) -> Partition:
        config = LogConfig(segment_size_bytes=segment_size_bytes, enforce_fsync=enforce_fsync)
        p = Partition.open(part_dir, 1, config, io=io, clock=clock)
        opened.append(p)
        return p

    yield make
    for p in opened:
        p.close()
