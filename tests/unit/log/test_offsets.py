"""Stored consumer offsets: files, persistence, deletion; with fsync, written off the event
loop, in call order, visible once durable."""

from __future__ import annotations

import asyncio
import errno
import os
import shutil
import threading

import pytest

from log_helpers import batch

from lurcher.core.log import LogConfig, Partition, PosixIo
from lurcher.core.log.faulty_io import FaultyIo
from lurcher.core.log.offsets import ConsumerOffsets
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError


def test_offsets_persist_in_files(open_partition, part_dir):
    p = open_partition()
    p.append(batch(50))
    p.store_offset("consumers", 3, 41)
    p.store_offset("groups", 9, 7)
    p.store_offset("consumers", 3, 42)
    with open(os.path.join(part_dir, "offsets", "consumers", "3"), "rb") as f:
        assert f.read() == (42).to_bytes(8, "little")
    with open(os.path.join(part_dir, "offsets", "groups", "9"), "rb") as f:
        assert f.read() == (7).to_bytes(8, "little")
    p.close()
    again = open_partition()
    assert again.get_offset("consumers", 3) == 42
    assert again.get_offset("groups", 9) == 7
    assert again.get_offset("groups", 3) is None


def test_offsets_are_u64_files(part_dir):
    offsets = ConsumerOffsets(part_dir, PosixIo())
    offsets.load()
    offsets.store("groups", 9, 2**63)
    assert stored_file(part_dir, "groups", 9) == 2**63
    assert loaded(part_dir, "groups") == {9: 2**63}


def test_offsets_past_the_log_after_recovery_are_lowered_to_its_end(open_partition, part_dir):
    """Recovery cut the log below a stored offset (here: the offset files say more than
    the log holds); at open it is lowered to the last stored message, or removed when the
    partition holds none, so the sends that reuse those offsets are not skipped."""
    p = open_partition()
    p.append(batch(10))
    p.close()
    offsets = ConsumerOffsets(part_dir, PosixIo())
    offsets.load()
    offsets.store("consumers", 1, 35)
    offsets.store("groups", 2, 9)
    offsets.store("groups", 3, 4)
    replicated = Partition.open(part_dir, 1, LogConfig(cap_stored_offsets=False))
    assert replicated.get_offset("consumers", 1) == 35  # its group refills the log
    replicated.close()
    again = open_partition()
    assert [again.get_offset(*who) for who in
            (("consumers", 1), ("groups", 2), ("groups", 3))] == [9, 9, 4]
    assert stored_file(part_dir, "consumers", 1) == 9  # also on disk: a restart keeps it
    assert again.read_next("consumers", 1, 5).count == 0
    again.append(batch(2))
    assert again.read_next("consumers", 1, 5).first_offset == 10
    again.close()
    shutil.rmtree(part_dir)
    os.makedirs(part_dir)
    offsets = ConsumerOffsets(part_dir, PosixIo())
    offsets.load()
    offsets.store("consumers", 1, 3)
    empty = open_partition()
    assert empty.get_offset("consumers", 1) is None
    assert stored_file(part_dir, "consumers", 1) is None


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
                       ("\u00b2", bytes(8)), ("1\u0663", bytes(8)), (str(2**64), bytes(8)),
                       ("7", (7).to_bytes(8, "little"))]:
        with open(os.path.join(part_dir, "offsets", "consumers", name), "wb") as f:
            f.write(data)
    assert loaded(part_dir, "consumers") == {7: 7}



def test_a_damaged_offset_file_is_named_in_a_warning(part_dir, caplog):
    """A stored offset file cut short, emptied or grown was skipped without a word: the
    consumer silently polled from the first message again."""
    folder = os.path.join(part_dir, "offsets", "groups")
    os.makedirs(folder)
    for name, data in [("3", b"\x05\x00\x00"), ("4", b""), ("5", bytes(12)),
                       ("6.tmp", b"\x01"), ("9", (9).to_bytes(8, "little"))]:
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
    caplog.set_level("WARNING", logger="lurcher.core.log.offsets")
    assert loaded(part_dir, "groups") == {9: 9}
    lines = sorted(r.getMessage() for r in caplog.records)
    assert lines == [
        f"stored offset file {folder}/{name} holds {size} bytes, not 8: ignored "
        f"(groups {name} has no stored offset)"
        for name, size in [("3", 3), ("4", 0), ("5", "more than 8")]]

# -- with enforce_fsync: off the event loop, in order, durable before visible ------------

class RecordingIo(PosixIo):
    """Posix, recording each fsync (its path, whether it ran on the event loop's thread,
    and for a directory the names in it then); ``gate`` holds writes of offset files until
    it is set (``writing`` is set once a write reached it); fsyncs raise EIO while ``fail``,
    and so do writes of the values in ``fail_values``."""

    def __init__(self) -> None:
        self.fsyncs: list[tuple[str, bool]] = []
        self.events: list[str] = []
        self.loop_thread = threading.get_ident()
        self.gate = threading.Event()
        self.gate.set()
        self.writing = threading.Event()
        self.fail = False
        self.fail_values: set[int] = set()

    def pwrite(self, fd, data, position):
        self.writing.set()
        self.gate.wait(10)
        if int.from_bytes(data, "little") in self.fail_values:
            raise OSError(errno.EIO, "injected")
        return super().pwrite(fd, data, position)

    def fsync_in_worker(self, fd):
        path = os.readlink(f"/proc/self/fd/{fd}")
        self.fsyncs.append((path, threading.get_ident() == self.loop_thread))
        listing = sorted(os.listdir(path)) if os.path.isdir(path) else None
        self.events.append(f"fsync {os.path.basename(path)}" + (f" {listing}" if listing else ""))
        if self.fail:
            raise OSError(errno.EIO, "injected")
        super().fsync_in_worker(fd)


def offsets_with_fsync(part_dir: str, io: RecordingIo) -> ConsumerOffsets:
    offsets = ConsumerOffsets(part_dir, io, fsync=True)
    offsets.load()
    return offsets


async def one_stored(part_dir: str, kind: str, key: int,
                     value: int) -> tuple[RecordingIo, ConsumerOffsets]:
    """Offsets with fsync over a ``RecordingIo``, (kind, key) stored as ``value``."""
    io = RecordingIo()
    offsets = offsets_with_fsync(part_dir, io)
    await offsets.store(kind, key, value)
    return io, offsets


def stored_file(part_dir: str, kind: str, key: int) -> int | None:
    path = os.path.join(part_dir, "offsets", kind, str(key))
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        return int.from_bytes(f.read(), "little")


def loaded(part_dir: str, kind: str) -> dict[int, int]:
    again = ConsumerOffsets(part_dir, PosixIo())
    again.load()
    return again.items(kind)


async def test_fsync_store_is_durable_off_the_loop_before_it_is_visible(part_dir):
    io = RecordingIo()
    offsets = offsets_with_fsync(part_dir, io)
    io.gate.clear()
    pending = offsets.store("consumers", 3, 41)
    assert isinstance(pending, asyncio.Future)
    await asyncio.sleep(0.05)
    assert not pending.done() and loaded(part_dir, "consumers") == {}
    assert offsets.get("consumers", 3) == 41  # what the key's last call leaves
    io.gate.set()
    await pending
    assert offsets.get("consumers", 3) == 41 == stored_file(part_dir, "consumers", 3)
    consumers_dir = os.path.join(part_dir, "offsets", "consumers")
    assert io.fsyncs == [(os.path.join(consumers_dir, "3.tmp"), False), (consumers_dir, False)]
    assert io.events == ["fsync 3.tmp", "fsync consumers ['3']"]  # renamed in between
    assert loaded(part_dir, "consumers") == {3: 41}


async def test_fsync_calls_land_in_order(part_dir):
    io, offsets = await one_stored(part_dir, "groups", 1, 5)
    io.gate.clear()
    first, second = offsets.store("groups", 1, 6), offsets.store("groups", 1, 7)
    io.gate.set()
    await asyncio.gather(first, second)
    assert offsets.get("groups", 1) == 7 == stored_file(part_dir, "groups", 1)
    io.gate.clear()
    late_store = offsets.store("groups", 2, 9)
    deleting = offsets.delete("groups", 1)
    assert offsets.get("groups", 1) is None
    io.gate.set()
    await asyncio.gather(late_store, deleting)
    assert stored_file(part_dir, "groups", 1) is None
    assert offsets.items("groups") == {2: 9} == loaded(part_dir, "groups")


async def test_fsync_store_overtaken_by_a_delete_stays_deleted(part_dir):
    io, offsets = await one_stored(part_dir, "consumers", 4, 1)
    io.gate.clear()
    storing = offsets.store("consumers", 4, 2)
    deleting = offsets.delete("consumers", 4)
    io.gate.set()
    await asyncio.gather(storing, deleting)
    assert offsets.get("consumers", 4) is None and stored_file(part_dir, "consumers", 4) is None


async def test_a_delete_removes_an_offset_whose_store_is_still_queued(part_dir):
    """A deleted group's offset, stored for the first time a moment before, is gone too
    (a group re-using the id must not start from it)."""
    io = RecordingIo()
    offsets = offsets_with_fsync(part_dir, io)
    io.gate.clear()
    storing = offsets.store("groups", 7, 99)
    deleting = offsets.delete("groups", 7)
    io.gate.set()
    await asyncio.gather(storing, deleting)
    assert offsets.get("groups", 7) is None and loaded(part_dir, "groups") == {}


async def test_failed_fsync_fails_the_store_and_keeps_the_previous_offset(part_dir):
    io, offsets = await one_stored(part_dir, "consumers", 3, 10)
    io.fail = True
    with pytest.raises(IggyError) as info:
        await offsets.store("consumers", 3, 11)
    assert info.value.code == ErrorCode.CANNOT_WRITE_TO_FILE
    assert offsets.get("consumers", 3) == 10 == stored_file(part_dir, "consumers", 3)
    with pytest.raises(IggyError) as info:
        await offsets.delete("consumers", 3)
    assert info.value.code == ErrorCode.CANNOT_WRITE_TO_FILE
    assert offsets.get("consumers", 3) == 10


# the first store renames its file (rename 1) and removes nothing
@pytest.mark.parametrize("fault, call", [("remove-eio@1", "delete"), ("rename-eio@2", "store")])
async def test_the_offsets_thread_removes_and_renames_through_the_io_backend(part_dir, fault,
                                                                             call):
    """A fault test sees the files the offsets thread changes with fsync: a removal or
    rename that fails fails the call and keeps the stored offset."""
    kind, _, at = fault.partition("@")
    offsets = offsets_with_fsync(part_dir, FaultyIo(PosixIo(), kind, int(at)))
    await offsets.store("consumers", 3, 10)
    pending = (offsets.delete("consumers", 3) if call == "delete"
               else offsets.store("consumers", 3, 11))
    with pytest.raises(IggyError) as info:
        await pending
    assert info.value.code == ErrorCode.CANNOT_WRITE_TO_FILE
    assert offsets.get("consumers", 3) == 10 == stored_file(part_dir, "consumers", 3)


async def test_a_purge_removes_queued_offsets_through_the_io_backend(part_dir):
    """``clear`` with a store still queued: the removal it queues behind the store (of the
    file the store leaves) goes through the backend too."""
    io = FaultyIo(PosixIo(), "remove-eio", 99)  # counts, never fires here
    offsets = offsets_with_fsync(part_dir, io)
    queued = offsets.store("consumers", 6, 2)
    offsets.clear()
    await queued
    ConsumerOffsets.drain()
    assert io.removals == 1 and loaded(part_dir, "consumers") == {}


async def test_a_failed_store_keeps_the_earlier_one_that_succeeded(part_dir):
    io, offsets = await one_stored(part_dir, "consumers", 2, 30)
    io.fail_values = {50}
    io.gate.clear()
    succeeded, failed = offsets.store("consumers", 2, 40), offsets.store("consumers", 2, 50)
    io.gate.set()
    results = await asyncio.gather(succeeded, failed, return_exceptions=True)
    assert results[0] is None and isinstance(results[1], IggyError)
    assert offsets.get("consumers", 2) == 40 == stored_file(part_dir, "consumers", 2)


async def test_a_queued_store_follows_its_directory_not_its_path(part_dir, tmp_path):
    """A topic deleted (its directory moved away) and re-created under the same id while a
    store is queued: the store lands in the moved directory, never in the new one."""
    io = RecordingIo()
    offsets = offsets_with_fsync(part_dir, io)
    io.gate.clear()
    storing = offsets.store("consumers", 1, 77)
    moved = str(tmp_path / "graveyard")
    os.rename(part_dir, moved)
    assert loaded(part_dir, "consumers") == {}  # creates the new, empty directories
    io.gate.set()
    await storing
    assert loaded(part_dir, "consumers") == {} and loaded(moved, "consumers") == {1: 77}


async def test_clear_drops_stores_still_queued(part_dir):
    io, offsets = await one_stored(part_dir, "consumers", 1, 1)
    io.gate.clear()
    queued = offsets.store("consumers", 2, 2)
    offsets.clear()
    assert offsets.items("consumers") == {}
    io.gate.set()
    await queued
    after = offsets.store("consumers", 5, 5)
    await after
    assert offsets.items("consumers") == {5: 5}
    assert sorted(os.listdir(os.path.join(part_dir, "offsets", "consumers"))) == ["5"]


async def test_retention_keeps_to_the_lower_of_stored_and_queued(part_dir):
    """A queued store or delete may yet fail and leave the stored offset: retention
    (``lowest``) must not pass it meanwhile."""
    io, offsets = await one_stored(part_dir, "consumers", 1, 100)
    io.gate.clear()
    raising = offsets.store("consumers", 1, 5000)
    assert offsets.get("consumers", 1) == 5000 and offsets.lowest() == 100
    deleting = offsets.delete("consumers", 1)
    assert offsets.get("consumers", 1) is None and offsets.lowest() == 100
    io.gate.set()
    await asyncio.gather(raising, deleting)
    assert offsets.lowest() is None


def fds_under(directory) -> list[str]:
    """The paths of this process's descriptors open on ``directory`` or below it (the
    process-wide count also moves with other tests' leftover threads)."""
    root, paths = str(directory), []
    for fd in os.listdir("/proc/self/fd"):
        try:
            path = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed meanwhile
            continue
        if path == root or path.startswith(root + os.sep):
            paths.append(path)
    return sorted(paths)


async def test_a_purge_that_cannot_queue_its_removal_still_purges(part_dir, monkeypatch,
                                                                  caplog):
    """No descriptor for the queued removal (EMFILE): the purge still empties memory and the
    stored files, leaks no descriptor, and says so in the log."""
    io, offsets = await one_stored(part_dir, "groups", 1, 1)
    io.gate.clear()
    io.writing.clear()
    queued = offsets.store("groups", 2, 2)
    assert io.writing.wait(10)  # its temporary file is open: the count below includes it
    opened = []
    real_open = ConsumerOffsets._open_dir

    def second_open_fails(self, kind):
        if opened:
            raise OSError(errno.EMFILE, "injected")
        opened.append(real_open(self, kind))
        return opened[-1]

    monkeypatch.setattr(ConsumerOffsets, "_open_dir", second_open_fails)
    fds_before = fds_under(part_dir)
    offsets.clear()
    assert len(opened) == 1 and fds_under(part_dir) == fds_before  # closed
    assert "cannot queue the removal of purged consumer offsets" in caplog.text
    io.gate.set()
    await queued
    assert offsets.items("groups") == {} and stored_file(part_dir, "groups", 1) is None


class OutOfDescriptorsIo(PosixIo):
    """Opening a file fails with EMFILE while ``failing`` (descriptors used up)."""

    failing = False

    def open(self, path, create=True, mode=0o644):
        if self.failing:
            raise OSError(errno.EMFILE, "Too many open files (injected)", path)
        return super().open(path, create, mode)


def test_a_store_that_cannot_open_its_file_answers_cannot_open_and_changes_nothing(part_dir):
    io = OutOfDescriptorsIo()
    offsets = ConsumerOffsets(part_dir, io)
    offsets.load()
    offsets.store("consumers", 3, 10)
    io.failing = True
    with pytest.raises(IggyError) as info:
        offsets.store("consumers", 3, 11)
    assert info.value.code == ErrorCode.CANNOT_OPEN_CONSUMER_OFFSETS_FILE
    assert offsets.get("consumers", 3) == 10 == stored_file(part_dir, "consumers", 3)
    io.failing = False
    offsets.store("consumers", 3, 11)
    assert offsets.get("consumers", 3) == 11 == stored_file(part_dir, "consumers", 3)


def test_a_delete_that_cannot_remove_its_file_keeps_the_offset(part_dir, monkeypatch):
    offsets = ConsumerOffsets(part_dir, PosixIo())
    offsets.load()
    offsets.store("groups", 4, 7)

    def cannot_remove(self, path):
        raise OSError(errno.EACCES, "Permission denied (injected)", path)

    monkeypatch.setattr(PosixIo, "remove", cannot_remove)
    with pytest.raises(IggyError) as info:
        offsets.delete("groups", 4)
    assert info.value.code == ErrorCode.CANNOT_DELETE_CONSUMER_OFFSET_FILE
    assert offsets.get("groups", 4) == 7 == stored_file(part_dir, "groups", 4)  # as on disk


async def test_an_fsync_store_out_of_descriptors_answers_cannot_open(part_dir, monkeypatch):
    io, offsets = await one_stored(part_dir, "consumers", 5, 1)

    def out_of_descriptors(self, kind):
        raise OSError(errno.EMFILE, "Too many open files (injected)")

    monkeypatch.setattr(ConsumerOffsets, "_open_dir", out_of_descriptors)
    for call in (lambda: offsets.store("consumers", 5, 2), lambda: offsets.delete("consumers", 5)):
        with pytest.raises(IggyError) as info:
            call()
        assert info.value.code == ErrorCode.CANNOT_OPEN_CONSUMER_OFFSETS_FILE
    assert offsets.get("consumers", 5) == 1 == stored_file(part_dir, "consumers", 5)


class QueuedRemovalFailsIo(RecordingIo):
    """``RecordingIo`` whose removals on the offsets thread (relative to a directory
    descriptor) fail with EIO."""

    def remove(self, path, folder=None):
        if folder is not None:
            raise OSError(errno.EIO, "injected")
        super().remove(path, folder)


def fail_opening_a_second_directory(monkeypatch) -> None:
    """``ConsumerOffsets._open_dir`` fails with EMFILE from its second call on."""
    real_open, opened = ConsumerOffsets._open_dir, []

    def second_open_fails(self, kind):
        if opened:
            raise OSError(errno.EMFILE, "injected")
        opened.append(kind)
        return real_open(self, kind)

    monkeypatch.setattr(ConsumerOffsets, "_open_dir", second_open_fails)


@pytest.mark.parametrize("failure", ["removal fails", "removal cannot be queued"])
async def test_a_purge_whose_queued_offset_removal_fails_is_finished_by_the_next_start(
        part_dir, monkeypatch, failure):
    """A store still queued at a purge leaves its file, and the removal of it the purge
    queues behind it fails (or cannot be queued: no descriptor for the directories): the
    purge keeps its marker (so the next start finishes it and the offset stays gone) and
    the partition refuses sends until then, as when its last fsync fails."""
    io = QueuedRemovalFailsIo() if failure == "removal fails" else RecordingIo()
    if failure == "removal cannot be queued":
        fail_opening_a_second_directory(monkeypatch)  # the store's is the first
    config = LogConfig(enforce_fsync=True)
    part = Partition.open(part_dir, 0, config, io=io)
    io.gate.clear()
    storing = part.store_offset("consumers", 1, 0)
    purging = asyncio.ensure_future(part.purge_async())
    for _ in range(1000):  # until the purge cleared the offsets (queued its removal)
        if part.get_offset("consumers", 1) is None:
            break
        await asyncio.sleep(0.01)
    io.gate.set()
    await storing
    await purging
    assert os.path.exists(os.path.join(part_dir, "purging")), "the marker was set aside"
    with pytest.raises(IggyError) as refused:
        part.append(batch(1))
    assert refused.value.code == ErrorCode.CANNOT_WRITE_TO_FILE
    part.close()
    # not capped to the (empty) log at open: the offset file as it is on disk
    again = Partition.open(part_dir, 0, LogConfig(enforce_fsync=True, cap_stored_offsets=False),
                           io=PosixIo())
    assert again.get_offset("consumers", 1) is None, "the purged offset came back"
    again.close()
