"""Stored consumer offsets: files, persistence, deletion."""

from __future__ import annotations

import os

import pytest

from lurcher.core.log import LogConfig, Partition
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError


def test_offsets_persist_in_files(open_partition, part_dir):
    p = open_partition()
    p.store_offset("consumers", 3, 41)
    p.store_offset("groups", 9, 2**63)
    p.store_offset("consumers", 3, 42)
    with open(os.path.join(part_dir, "offsets", "consumers", "3"), "rb") as f:
        assert f.read() == (42).to_bytes(8, "little")
    with open(os.path.join(part_dir, "offsets", "groups", "9"), "rb") as f:
        assert f.read() == (2**63).to_bytes(8, "little")
    p.close()
    again = open_partition()
    assert again.get_offset("consumers", 3) == 42
    assert again.get_offset("groups", 9) == 2**63
    assert again.get_offset("groups", 3) is None


def test_delete_offset(open_partition, part_dir):
    p = open_partition()
    p.store_offset("groups", 1, 5)
    p.delete_offset("groups", 1)
    assert p.get_offset("groups", 1) is None
    assert not os.path.exists(os.path.join(part_dir, "offsets", "groups", "1"))
    with pytest.raises(IggyError) as info:
        p.delete_offset("groups", 1)
    assert info.value.code == ErrorCode.CONSUMER_OFFSET_NOT_FOUND == 3021


def test_unknown_kind(open_partition):
    with pytest.raises(ValueError):
        open_partition().store_offset("people", 1, 1)


def test_malformed_and_temporary_files_are_ignored(part_dir):
    os.makedirs(os.path.join(part_dir, "offsets", "consumers"))
    for name, data in [("5", b"\x01"), ("6.tmp", bytes(8)), ("x", bytes(8)),
                       ("7", (7).to_bytes(8, "little"))]:
        with open(os.path.join(part_dir, "offsets", "consumers", name), "wb") as f:
            f.write(data)
    p = Partition.open(part_dir, 1, LogConfig())
    assert p.offsets.items("consumers") == {7: 7}
    p.close()
