"""The bounded descriptor cache: partitions keep at most ``capacity`` segment files open,
and a poll's byte ranges stay readable (same file, same bytes) after eviction or delete."""

from __future__ import annotations

import os

import pytest
from log_helpers import ManualClock, batch

from lurcher.core.log import LogConfig, Partition
from lurcher.core.log.files import DescriptorCache


def open_fds(under) -> int:
    """Descriptors of this process open on files under ``under``: other tests' background
    threads (drop-behind, writers) open and close files of their own at any moment."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed meanwhile
            continue
        count += target.startswith(f"{under}/")
    return count


def test_many_partitions_keep_descriptors_bounded(tmp_path):
    cache = DescriptorCache(capacity=6)
    before = open_fds(tmp_path)
    parts = [Partition.open(str(tmp_path / str(i)), i, LogConfig(), clock=ManualClock(),
                            files=cache) for i in range(50)]
    for i, p in enumerate(parts):
        p.append(batch(3, tag=i))
    assert len(cache) <= 6
    assert open_fds(tmp_path) - before <= 6
    for i, p in enumerate(parts):          # every file reopens lazily and reads back
        assert p.read_first(10).to_bytes() == Partition.open(
            str(tmp_path / str(i)), i, LogConfig(), clock=ManualClock()).read_first(10).to_bytes()
        assert p.read_first(10).count == 3
    assert open_fds(tmp_path) - before <= 6


def test_a_polled_range_survives_eviction_and_reuse_of_descriptor_numbers(tmp_path):
    cache = DescriptorCache(capacity=2)
    a = Partition.open(str(tmp_path / "a"), 0, LogConfig(), clock=ManualClock(), files=cache)
    a.append(batch(4, tag=1))
    polled = a.read_first(10)
    expected = polled.to_bytes()
    others = [Partition.open(str(tmp_path / f"o{i}"), i, LogConfig(), clock=ManualClock(),
                             files=cache) for i in range(10)]
    for p in others:                        # evicts a's files; new opens reuse numbers
        p.append(batch(2, tag=200))
    assert cache.get(a.segments[0].log_path) is not polled.ranges[0].handle
    assert os.pread(polled.ranges[0].fd, len(expected), 0) == expected
    assert polled.to_bytes() == expected


def test_a_polled_range_survives_segment_deletion(tmp_path):
    cache = DescriptorCache(capacity=4)
    p = Partition.open(str(tmp_path / "p"), 0, LogConfig(), clock=ManualClock(), files=cache)
    p.append(batch(3))
    polled = p.read_first(10)
    expected = polled.to_bytes()
    p.purge()
    assert os.path.getsize(polled.ranges[0].path) == 0   # a new, empty segment 0
    assert polled.to_bytes() == expected


def refers_to(fd: int, path: str) -> bool:
    """Whether ``fd`` is open on ``path``. A closed number may already be reused by another
    thread of this process (a writer thread left by an earlier test) for another file."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}") == path
    except FileNotFoundError:
        return False


def test_descriptor_closes_when_evicted_and_unreferenced(tmp_path):
    cache = DescriptorCache(capacity=2)
    paths = [str(tmp_path / f"f{i}") for i in range(3)]
    fd0 = cache.get(paths[0], create=True).fd
    cache.get(paths[1], create=True)
    held = cache.get(paths[1])
    cache.get(paths[2], create=True)        # evicts f0, nobody holds it: closed
    assert not refers_to(fd0, paths[0])
    cache.get(paths[0])                     # evicts f1, but ``held`` keeps it open
    assert os.readlink(f"/proc/self/fd/{held.fd}") == paths[1]


def test_capacity_below_two_is_refused():
    with pytest.raises(ValueError):
        DescriptorCache(capacity=1)
