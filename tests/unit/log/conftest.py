"""Fixtures for the storage tests.

Every test here runs twice: with segment files written through the page cache and with
O_DIRECT (``segment_writes``: ``Partition.open`` wraps the backend it is given, or posix,
in ``DirectIo``), so every storage behaviour is checked on both write paths."""

from __future__ import annotations

import pytest
from log_helpers import OPEN_DIRECT, ManualClock

from lurcher.core.log import IoBackend, LogConfig, Partition, PosixIo
from lurcher.core.log.direct import DirectIo
from tests.support.page_cache import require_disk_file_system


def pytest_generate_tests(metafunc):
    """Both write paths, but the page cache only for tests marked ``page_cache_only``."""
    if "segment_writes" in metafunc.fixturenames:
        only = metafunc.definition.get_closest_marker("page_cache_only")
        modes = ["page-cache"] if only else ["page-cache", "direct"]
        metafunc.parametrize("segment_writes", modes, indirect=True)


@pytest.fixture(autouse=True)
def segment_writes(request, monkeypatch) -> str:
    if request.param == "direct":
        plain_open = Partition.open.__func__

        def open_direct(cls, path, partition_id, config=None, io=None, *args, **kwargs):
            if kwargs.get("files") is None and not isinstance(io, DirectIo):
                io = DirectIo(io or PosixIo())
                OPEN_DIRECT.append(io)
            return plain_open(cls, path, partition_id, config, io, *args, **kwargs)

        monkeypatch.setattr(Partition, "open", classmethod(open_direct))
    yield request.param
    OPEN_DIRECT.clear()


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


@pytest.fixture
def disk_dir(tmp_path):
    """``tmp_path``, on a disk file system (page-cache eviction is observable there only)."""
    require_disk_file_system(str(tmp_path))
    return tmp_path
