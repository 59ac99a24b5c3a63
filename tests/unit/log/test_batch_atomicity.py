"""A batch survives a crash whole or not at all: torn logs and torn indexes of multi-message
batches, as a SIGKILL during an append leaves them (log written first, index after it)."""

from __future__ import annotations

import os

import pytest
from log_helpers import MESSAGE_BYTES, ManualClock, batch, read_file, write_file

from lurcher.core.log import LogConfig, Partition

LOG = "00000000000000000000.log"
INDEX = "00000000000000000000.index"
BATCHES = (3, 5, 4)   # messages per batch; the last batch is the one torn
ENTRY = 16


def build(path: str) -> tuple[bytes, bytes]:
    p = Partition.open(path, 0, LogConfig(), clock=ManualClock(7000))
    for i, n in enumerate(BATCHES):
        p.append(batch(n, tag=10 * i))
    p.close()
    return read(path, LOG), read(path, INDEX)


read, write = read_file, write_file


def reopen(path: str) -> Partition:
    return Partition.open(path, 0, LogConfig(), clock=ManualClock(9000))


@pytest.fixture
def files(tmp_path):
    path = str(tmp_path / "p")
    log, index = build(path)
    return path, log, index


def whole(p: Partition) -> int:
    """Messages stored; asserts the count is a whole number of batches of BATCHES."""
    counts = [sum(BATCHES[:k]) for k in range(len(BATCHES) + 1)]
    assert p.messages_count in counts, f"{p.messages_count} messages is not whole batches"
    assert p.read_first(100).count == p.messages_count
    return p.messages_count


BEFORE_LAST = sum(BATCHES[:-1])


@pytest.mark.parametrize("messages_written", range(1, BATCHES[-1]))
def test_prefix_of_the_last_batch_in_the_log_is_dropped(files, messages_written):
    """The kill tore the log write: some whole messages of the batch, no index entries."""
    path, log, index = files
    write(path, LOG, log[:(BEFORE_LAST + messages_written) * MESSAGE_BYTES])
    write(path, INDEX, index[:BEFORE_LAST * ENTRY])
    p = reopen(path)
    assert whole(p) == BEFORE_LAST
    assert os.path.getsize(os.path.join(path, LOG)) == BEFORE_LAST * MESSAGE_BYTES
    assert read(path, INDEX) == index[:BEFORE_LAST * ENTRY]
    p.append(batch(2, tag=99))               # appends continue at the right offset
    assert p.next_offset == BEFORE_LAST + 2
    p.close()


def test_whole_last_batch_in_the_log_without_index_is_dropped(files):
    """Log write finished, index write never started: not acknowledged, so not kept."""
    path, log, index = files
    write(path, INDEX, index[:BEFORE_LAST * ENTRY])
    assert whole(reopen(path)) == BEFORE_LAST


@pytest.mark.parametrize("entries_written", range(1, BATCHES[-1]))
@pytest.mark.parametrize("partial_bytes", [0, 7])
def test_torn_index_of_the_last_batch_is_completed_from_the_log(files, entries_written,
                                                                partial_bytes):
    """The kill tore the index write: the log holds the whole batch (written before)."""
    path, log, index = files
    cut = (BEFORE_LAST + entries_written) * ENTRY + partial_bytes
    write(path, INDEX, index[:cut])
    p = reopen(path)
    assert whole(p) == sum(BATCHES)
    assert read(path, INDEX) == index and read(path, LOG) == log
    p.close()


@pytest.mark.parametrize("messages_left", range(1, BATCHES[-1]))
def test_indexed_batch_torn_in_the_log_is_dropped_whole(files, messages_left):
    """Index entries name more messages of the last batch than the log holds (the log lost
    its tail, e.g. a power cut without fsync): the batch goes whole."""
    path, log, index = files
    write(path, LOG, log[:(BEFORE_LAST + messages_left) * MESSAGE_BYTES + 20])
    p = reopen(path)
    assert whole(p) == BEFORE_LAST
    assert read(path, INDEX) == index[:BEFORE_LAST * ENTRY]
    p.close()


def test_missing_index_file_rebuilds_every_batch(files):
    """No index file at all is never left by a crash (both files exist before the first
    write): the log is trusted and every whole message kept."""
    path, log, index = files
    os.unlink(os.path.join(path, INDEX))
    p = reopen(path)
    assert whole(p) == sum(BATCHES)
    assert read(path, INDEX) == index
    p.close()


def test_every_cut_of_log_and_index_keeps_whole_batches(files, tmp_path):
    """Any prefix of the log with any prefix of the index that a crash can leave (index
    entries only for messages whose batch is whole in the log) recovers to whole batches,
    and never loses a batch whose index entries were all written."""
    path, log, index = files
    ends = [sum(BATCHES[:k + 1]) for k in range(len(BATCHES))]
    for log_cut in range(BEFORE_LAST * MESSAGE_BYTES, len(log) + 1, 9):
        messages_whole = log_cut // MESSAGE_BYTES
        batches_whole = sum(1 for e in ends if e <= messages_whole)
        max_entries = ends[batches_whole - 1] if batches_whole else 0
        for entries in range(BEFORE_LAST, max_entries + 1):
            work = tmp_path / f"c{log_cut}-{entries}"
            os.makedirs(work)
            write(str(work), LOG, log[:log_cut])
            write(str(work), INDEX, index[:entries * ENTRY])
            p = reopen(str(work))
            committed = max(e for e in [0, *ends] if e <= entries)
            got = whole(p)
            assert got >= committed, f"log {log_cut}, index {entries}: lost a committed batch"
            assert got == (sum(BATCHES) if entries > BEFORE_LAST else BEFORE_LAST)
            p.close()


def test_sealed_segment_keeps_its_last_batch_without_index_entries(tmp_path):
    """A later segment exists, so the sealed one's last batch was finished: a short index
    there (external damage, never a crash) is rebuilt, leaving no offset gap."""
    path = str(tmp_path / "sealed")
    p = Partition.open(path, 0, LogConfig(segment_size_bytes=4 * MESSAGE_BYTES),
                       clock=ManualClock(100))
    for b in range(3):
        p.append(batch(3, tag=3 * b))
    before = p.read_first(100).to_bytes()
    assert [s.start_offset for s in p.segments] == [0, 6]
    p.close()
    write(path, INDEX, read(path, INDEX)[:3 * ENTRY])   # entries of the 2nd batch lost
    again = reopen(path)
    assert again.read_first(100).to_bytes() == before
    assert [s.count for s in again.segments] == [6, 3]
    again.close()
