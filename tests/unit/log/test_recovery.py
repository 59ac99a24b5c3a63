"""Start-up recovery: torn tails, missing/short/long indexes, garbage after the log."""

from __future__ import annotations

import os
import shutil
import tracemalloc

import pytest
from log_helpers import (MESSAGE_BYTES, STORED_HEADER, ManualClock, batch, messages, read_file,
                         write_file)

from lurcher.core.log import LogConfig, Partition, PosixIo
from lurcher.core.log import recovery
from lurcher.core.log.recovery import SegmentMisnamed
from lurcher.core.wire.batch import MessageBatch

LOG = "00000000000000000000.log"
INDEX = "00000000000000000000.index"


def build(path: str, sizes=(10, 0, 33, 7, 120, 1)) -> tuple[bytes, bytes, list[int]]:
    """A closed partition with messages of ``sizes``; returns log, index, message ends."""
    p = Partition.open(path, 0, LogConfig(), clock=ManualClock(5000))
    for i, size in enumerate(sizes):
        p.append(MessageBatch.build([bytes([i]) * size], origin_timestamp_us=1).writable())
    p.close()
    ends, total = [], 0
    for size in sizes:
        total += 64 + size
        ends.append(total)
    return read(path, LOG), read(path, INDEX), ends


read, write = read_file, write_file


def reopen(path: str) -> Partition:
    return Partition.open(path, 0, LogConfig(), clock=ManualClock(9000))


def check_consistent(p: Partition, log: bytes, index: bytes, count: int) -> None:
    assert p.messages_count == count and p.next_offset == count
    assert p.size_bytes == len(log)
    assert read(p.path, LOG) == log
    assert read(p.path, INDEX) == index
    if count:
        assert p.read_first(1000).to_bytes() == log


@pytest.fixture
def original(tmp_path):
    path = str(tmp_path / "orig")
    log, index, ends = build(path)
    return path, log, index, ends


def test_clean_reopen_changes_nothing(original):
    path, log, index, ends = original
    p = reopen(path)
    assert not p.recovery[0].changed
    check_consistent(p, log, index, len(ends))
    p.close()


def test_torn_tail_at_every_cut_point(original, tmp_path):
    path, log, index, ends = original
    boundaries = [0] + ends
    for cut in range(ends[-3] - 3, len(log)):     # every byte of the last three messages
        work = str(tmp_path / f"cut{cut}")
        shutil.copytree(path, work)
        write(work, LOG, log[:cut])
        kept = max(i for i, b in enumerate(boundaries) if b <= cut)
        p = reopen(work)
        report = p.recovery[0]
        assert report.log_bytes_truncated == cut - boundaries[kept]
        assert report.index_entries_dropped == len(ends) - kept
        check_consistent(p, log[:boundaries[kept]], index[:16 * kept], kept)
        p.append(MessageBatch.build([b"next"], origin_timestamp_us=1).writable())
        assert p.current_offset == kept
        p.close()
        shutil.rmtree(work)


def test_torn_tail_not_yet_in_the_index(original):
    path, log, index, ends = original
    write(path, LOG, log + log[:70])      # a partial extra record, index untouched
    p = reopen(path)
    assert p.recovery[0].log_bytes_truncated == 70
    check_consistent(p, log, index, len(ends))
    p.close()


def test_missing_index_is_rebuilt(original):
    path, log, index, ends = original
    os.unlink(os.path.join(path, INDEX))
    p = reopen(path)
    assert p.recovery[0].index_entries_added == len(ends)
    check_consistent(p, log, index, len(ends))
    assert p.read_timestamp(5000, 2).count == 2
    p.close()


@pytest.mark.parametrize("keep_bytes", [0, 16, 16 * 3, 16 * 3 + 5, 16 * 5 + 15])
def test_short_index_is_rebuilt_but_the_unindexed_last_batch_goes(original, keep_bytes):
    """Each message is its own batch here. Batches after the short index followed by
    another batch are whole and rebuilt; the last batch has no index entry (its commit
    record), so it was never acknowledged and may be a torn prefix: it is dropped."""
    path, log, index, ends = original
    write(path, INDEX, index[:keep_bytes])
    p = reopen(path)
    kept = len(ends) - 1
    assert p.recovery[0].index_entries_added == kept - keep_bytes // 16
    check_consistent(p, log[:ends[-2]], index[:16 * kept], kept)
    p.close()


def test_a_rebuilt_index_costs_no_python_object_per_message(tmp_path, monkeypatch):
    """An index rebuilt from the log (here 200,000 small messages, the index file gone) is
    collected chunk by chunk into arrays: the old code held a Python tuple per message until
    the end, about 224 bytes a message at its peak (3 GB for a 1 GiB segment of the smallest
    messages), where the entries need 16."""
    monkeypatch.setattr(recovery, "SCAN_CHUNK_BYTES", 64 * 1024)
    path = str(tmp_path / "p")
    p = Partition.open(path, 1, LogConfig(page_cache_window=0))
    for _ in range(20):
        p.append(MessageBatch.build([b"x"] * 10_000).writable())
    p.close()
    os.remove(os.path.join(path, f"{0:020d}.index"))
    tracemalloc.start()
    try:
        p = Partition.open(path, 1, LogConfig(page_cache_window=0))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert p.messages_count == 200_000 and p.recovery[0].index_entries_added == 200_000
    assert peak < 100 * p.messages_count, peak // p.messages_count
    p.close()


def test_a_header_declaring_more_than_any_message_is_not_read(original):
    """Past the last indexed message, a header (the next offset) declaring a 90 MB payload,
    and the log grown to 100 MB: the old scan read the 90 MB it declared to check its
    checksum (and the start's first-message check reads a declared size the same way).
    No send stores more than a 64 MB payload: such a header is damage, cut unread."""
    path, log, index, _ = original
    p = reopen(path)
    p.close()
    damage = STORED_HEADER.pack(0, bytes(16), 6, 5000, 0, 0, 90_000_000, 0)
    with open(os.path.join(path, LOG), "r+b") as f:
        f.seek(len(log))
        f.write(damage)
        f.truncate(100_000_000)
    tracemalloc.start()
    try:
        p = reopen(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    check_consistent(p, log, index, 6)
    assert peak < 40_000_000, peak  # a scan chunk (16 MiB), not the 90 MB declared
    p.close()


def test_index_longer_than_log_is_trimmed(original):
    path, log, index, ends = original
    write(path, LOG, log[:ends[3]])       # the log lost its last two messages
    p = reopen(path)
    assert p.recovery[0].index_entries_dropped == 2
    check_consistent(p, log[:ends[3]], index[:16 * 4], 4)
    p.close()


def test_index_entries_beyond_the_log_are_dropped(original):
    path, log, index, ends = original
    extra = index[-16:] * 3               # bogus entries after the real ones
    write(path, INDEX, index + extra)
    p = reopen(path)
    assert p.recovery[0].index_entries_dropped == 3
    check_consistent(p, log, index, len(ends))
    p.close()


class LargestRead(PosixIo):
    """Posix, keeping the length of its largest pread."""

    largest = 0

    def pread(self, fd, length, position):
        self.largest = max(self.largest, length)
        return super().pread(fd, length, position)


def test_an_index_far_longer_than_its_log_is_not_read_whole(original):
    """A zero-filled (here sparse) index of 64 MiB beside a 555-byte log was read whole
    into memory at start, and checked entry by entry: gigabytes for a big one."""
    path, log, index, ends = original
    os.truncate(os.path.join(path, INDEX), 64 * 1024 * 1024)
    io = LargestRead()
    p = Partition.open(path, 0, LogConfig(), io=io, clock=ManualClock(9000))
    assert io.largest <= len(log)
    assert p.recovery[0].index_entries_dropped == 4 * 1024 * 1024 - len(ends)
    check_consistent(p, log, index, len(ends))
    p.close()

def test_wrong_index_entry_is_replaced_from_the_log(original):
    path, log, index, ends = original
    bad = bytearray(index)
    bad[16 * 4 + 4:16 * 4 + 8] = (ends[4] - 1).to_bytes(4, "little")   # entry 4 ends early
    write(path, INDEX, bytes(bad))
    p = reopen(path)
    check_consistent(p, log, index, len(ends))
    p.close()


def test_zeros_after_the_log_are_cut(original):
    path, log, index, ends = original
    write(path, LOG, log + bytes(4096))
    p = reopen(path)
    assert p.recovery[0].log_bytes_truncated == 4096
    check_consistent(p, log, index, len(ends))
    p.close()


def test_corrupt_tail_message_is_cut(original):
    path, log, index, ends = original
    bad = bytearray(log)
    bad[ends[3] + 70] ^= 0xFF              # payload byte of message 4 (120 bytes)
    write(path, LOG, bytes(bad))
    write(path, INDEX, index[:16 * 4])     # messages 4 and 5 are not in the index
    p = reopen(path)
    check_consistent(p, log[:ends[3]], index[:16 * 4], 4)
    p.close()


def test_sealed_segment_index_rebuilt(tmp_path):
    path = str(tmp_path / "multi")
    clock = ManualClock(100)
    p = Partition.open(path, 0, LogConfig(segment_size_bytes=4 * MESSAGE_BYTES), clock=clock)
    for b in range(5):
        p.append(batch(3, tag=3 * b))
    before = p.read_first(100).to_bytes()
    starts = [s.start_offset for s in p.segments]
    p.close()
    assert starts == [0, 6, 12]
    os.unlink(os.path.join(path, INDEX))
    os.unlink(os.path.join(path, "00000000000000000006.index"))
    again = reopen(path)
    assert again.read_first(100).to_bytes() == before
    assert [s.count for s in again.segments] == [6, 6, 3]
    again.close()


def test_orphan_index_is_removed(tmp_path):
    path = str(tmp_path / "orphan")
    os.makedirs(path)
    write(path, "00000000000000000042.index", b"\x00" * 16)
    p = reopen(path)
    assert not os.path.exists(os.path.join(path, "00000000000000000042.index"))
    assert p.first_offset == 0 and p.messages_count == 0
    p.close()


def test_large_message_scanned_across_chunks(tmp_path, monkeypatch):
    from lurcher.core.log import recovery
    monkeypatch.setattr(recovery, "SCAN_CHUNK_BYTES", 256)
    path = str(tmp_path / "large")
    log, index, ends = build(path, sizes=(10, 1000, 5, 700, 3))
    os.unlink(os.path.join(path, INDEX))
    p = reopen(path)
    check_consistent(p, log, index, len(ends))
    p.close()


def _write_batches(path: str, count: int) -> list[bytes]:
    """``count`` batches of 4 messages of 3,000 bytes (a 4 KiB page never holds a whole
    batch); the polled bytes of each batch."""
    p = Partition.open(path, 0, LogConfig(), clock=ManualClock(5000))
    polled = []
    for b in range(count):
        p.clock.now_us += 10
        before = p.size_bytes
        p.append(batch(4, tag=b, size=3000))
        polled.append(p.read_first(1000).to_bytes()[before:])
    p.close()
    return polled


@pytest.mark.page_cache_only  # the damage is written past the O_DIRECT descriptor's state
def test_a_torn_page_inside_an_indexed_batch_drops_it_and_everything_after(tmp_path):
    """A power loss can put a batch's index page on the device but not one of its log
    pages (zeros): the batch goes whole, and so does every batch after the hole."""
    path = str(tmp_path / "p")
    polled = _write_batches(path, 3)
    second_starts = len(polled[0])
    with open(os.path.join(path, LOG), "r+b") as f:  # a page inside the second batch
        page = (second_starts // 4096 + 1) * 4096
        f.seek(page)
        f.write(bytes(4096))
    p = reopen(path)
    assert p.next_offset == 4 and p.read_first(1000).to_bytes() == polled[0]
    assert p.recovery[0].index_entries_dropped == 8
    p.close()


@pytest.mark.parametrize("entry, timestamp", [(5, 5005 + (1 << 56)), (2, 5002 + (1 << 56)),
                                              (2, 0), (5, 0)],
                         ids=["last-up", "middle-up", "middle-down", "last-down"])
def test_a_damaged_index_timestamp_is_replaced_from_the_log(original, entry, timestamp):
    """Else every later batch would be dated after it (the stamp never goes back) and a
    poll by timestamp would start at the wrong message. The last batch's entry disagreeing
    with its log header is an unfinished batch's, as after a torn index write: it goes."""
    path, log, index, ends = original
    bad = bytearray(index)
    assert int.from_bytes(bad[16 * entry + 8:16 * entry + 16], "little") == 5000 + entry
    bad[16 * entry + 8:16 * entry + 16] = timestamp.to_bytes(8, "little")
    write(path, INDEX, bytes(bad))
    p = reopen(path)
    assert p.recovery[0].changed
    kept = entry if entry == len(ends) - 1 else len(ends)
    check_consistent(p, log[:ends[kept - 1]], index[:16 * kept], kept)
    p.append(batch(1))
    assert p.read_last(1).to_bytes()[32:40] == (9000).to_bytes(8, "little")  # dated now
    p.close()


def sealed_segments(path: str) -> Partition:
    """A partition of three segments of 6, 6 and 3 messages (batches of 3), closed."""
    p = Partition.open(path, 0, LogConfig(segment_size_bytes=4 * MESSAGE_BYTES),
                       clock=ManualClock(100))
    for b in range(5):
        p.append(batch(3, tag=3 * b))
    assert [s.start_offset for s in p.segments] == [0, 6, 12]
    p.close()


def test_offsets_a_sealed_segment_lost_are_skipped_by_reads(tmp_path, caplog):
    """A sealed segment that lost its last batch (a power loss without enforce_fsync: its
    tail was never synced) leaves offsets 3 to 5 unstored: a poll from one of them goes on
    from the next stored offset instead of returning nothing for ever."""
    path = str(tmp_path / "gap")
    sealed_segments(path)
    write(path, LOG, read(path, LOG)[:3 * MESSAGE_BYTES])
    write(path, INDEX, read(path, INDEX)[:3 * 16])
    again = reopen(path)
    assert [s.count for s in again.segments] == [3, 6, 3]
    assert "offsets 3 to 5 are not stored" in caplog.text
    assert (again.read_offset(3, 2).first_offset, again.read_offset(3, 2).count) == (6, 2)
    assert again.read_offset(5, 100).first_offset == 6
    again.store_offset("consumers", 1, 2)
    assert again.read_next("consumers", 1, 4).first_offset == 6
    assert again.read_last(10).first_offset == 6
    across = again.read_first(100)   # a slice across the gap holds what is stored
    assert (across.first_offset, across.count, across.last_offset) == (0, 12, 14)
    assert [o for o, _, _ in messages(across.to_bytes())] == [0, 1, 2, *range(6, 15)]
    again.close()


def test_segment_files_not_named_by_a_u64_offset_are_ignored(tmp_path):
    path = str(tmp_path / "names")
    sealed_segments(path)
    before = reopen(path)
    data = before.read_first(100).to_bytes()
    before.close()
    for stem in ("0000000000000000000\u00b2", "0000000000000000001\u0663",
                 "99999999999999999999"):
        write(path, stem + ".log", read(path, LOG))
    again = reopen(path)
    assert [s.start_offset for s in again.segments] == [0, 6, 12]
    assert again.read_first(100).to_bytes() == data
    again.close()


def test_a_renamed_segment_is_refused_and_left_as_it_is(tmp_path):
    """Segment 6 renamed to 7 would otherwise be cut to nothing (none of its messages has
    the offsets its name says)."""
    path = str(tmp_path / "renamed")
    sealed_segments(path)
    for suffix in (".log", ".index"):
        os.rename(os.path.join(path, f"{6:020d}{suffix}"), os.path.join(path, f"{7:020d}{suffix}"))
    names = [n for n in os.listdir(path) if n.endswith((".log", ".index"))]
    files = {name: read(path, name) for name in names}
    with pytest.raises(SegmentMisnamed, match="begins with message 6, not 7"):
        reopen(path)
    assert {name: read(path, name) for name in names} == files


def test_a_stray_copy_after_a_torn_open_segment_is_refused_before_recovery(tmp_path):
    """A copy of segment 6 named 20 would make segment 12 count as sealed, so its torn last
    batch (2 of 3 messages, no index entry) would be kept for good: the start is refused
    before any segment is recovered, and every file stays as it was."""
    path = str(tmp_path / "stray")
    sealed_segments(path)
    p = Partition.open(path, 0, LogConfig(segment_size_bytes=4 * MESSAGE_BYTES),
                       clock=ManualClock(200))
    p.append(batch(3, tag=99))  # offsets 15 to 17, into segment 12
    p.close()
    last = f"{12:020d}"
    write(path, last + ".log", read(path, last + ".log")[:5 * MESSAGE_BYTES])  # torn: 15, 16
    write(path, last + ".index", read(path, last + ".index")[:3 * 16])
    write(path, f"{20:020d}.log", read(path, f"{6:020d}.log"))
    names = sorted(n for n in os.listdir(path) if n.endswith((".log", ".index")))
    files = {name: read(path, name) for name in names}
    with pytest.raises(SegmentMisnamed, match="begins with message 6, not 20"):
        reopen(path)
    assert sorted(n for n in os.listdir(path) if n.endswith((".log", ".index"))) == names
    assert {name: read(path, name) for name in names} == files
    os.unlink(os.path.join(path, f"{20:020d}.log"))
    again = reopen(path)
    assert again.next_offset == 15  # the torn batch goes
    again.close()


def test_a_segment_inside_the_one_before_is_logged(tmp_path, caplog):
    """An empty segment file made at offset 8 hides messages 8 to 11 of segment 6: the
    server says so (it changes nothing of either)."""
    path = str(tmp_path / "inside")
    sealed_segments(path)
    write(path, f"{8:020d}.log", b"")
    reopen(path).close()
    assert "starts at offset 8, inside" in caplog.text
    assert len(read(path, f"{6:020d}.log")) == 6 * MESSAGE_BYTES
