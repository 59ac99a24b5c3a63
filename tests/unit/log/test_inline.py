"""Inline writes (``core.log.inline``, ``Partition.append_async``): a small batch that finds
its partition idle is written on the event loop; the process's gate closes for a pause after
an inline write that slept in the kernel and held the loop, and sends go asynchronous
meanwhile; O_DIRECT writes never run inline."""

from __future__ import annotations

import asyncio
import errno
import logging
import time

import pytest
from log_helpers import HeldIo, ManualClock

from lurcher.core.log.config import LogConfig
from lurcher.core.log.direct import DirectIo
from lurcher.core.log.inline import InlineGate, voluntary_switches
from lurcher.core.log.partition import Partition
from lurcher.core.wire.batch import MessageBatch
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError

pytestmark = pytest.mark.page_cache_only  # the O_DIRECT case is built explicitly below


class FakeTime:
    """A monotonic clock and a voluntary-context-switch counter the test moves."""

    def __init__(self) -> None:
        self.now = 100.0
        self.switches = 0

    def clock(self) -> float:
        return self.now

    def count(self) -> int:
        return self.switches

    def gate(self) -> InlineGate:
        return InlineGate(stall_s=0.002, min_pause_s=1.0, max_pause_s=8.0, clock=self.clock,
                          switches=self.count)


class StallingIo(HeldIo):
    """Held asynchronous writes; each synchronous write moves ``time`` on by ``took`` seconds
    and, when ``sleeps``, counts a voluntary context switch (the kernel made it wait)."""

    def __init__(self, time: FakeTime, took: float = 0.0, sleeps: bool = False,
                 error: OSError | None = None) -> None:
        super().__init__()
        self.time, self.took, self.sleeps, self.error = time, took, sleeps, error
        self.inline_writes = 0

    def append_pair(self, log_fd, blob, log_position, index_fd, entries, index_position, fsync):
        self.time.now += self.took
        self.time.switches += self.sleeps
        if self.error is not None and not self.submitted:
            raise self.error
        self.inline_writes += 1
        super().append_pair(log_fd, blob, log_position, index_fd, entries, index_position, fsync)


def batch(tag: int, n: int = 3) -> MessageBatch:
    return MessageBatch.build([bytes([tag]) * 50 for _ in range(n)]).writable()


def open_part(tmp_path, io, gate: InlineGate | None = None,
              inline_write_max_bytes: int = 1000) -> Partition:
    config = LogConfig(inline_write_max_bytes=inline_write_max_bytes)
    part = Partition.open(str(tmp_path / "p"), 0, config, io=io, clock=ManualClock())
    if gate is not None:
        part.inline_gate = gate
    return part


async def test_small_batch_on_an_idle_partition_is_written_inline(tmp_path):
    io = HeldIo()
    part = open_part(tmp_path, io, FakeTime().gate())
    assert part.append_async(batch(1)) is None and part.next_offset == 3
    big = part.append_async(batch(2, n=20))  # over the threshold: asynchronous
    small = part.append_async(batch(3))  # something is in flight: queued behind it
    assert len(io.submitted) == 2
    io.complete(0)
    io.complete(1)
    await asyncio.gather(big, small)
    assert part.next_offset == 26
    part.close()


async def test_the_default_writes_a_one_message_batch_inline(tmp_path):
    io = HeldIo()
    part = Partition.open(str(tmp_path / "p"), 0, LogConfig(), io=io, clock=ManualClock())
    part.inline_gate = FakeTime().gate()  # not the process's: an earlier test may have closed it
    one_kib = MessageBatch.build([b"x" * 1000]).writable()
    assert part.append_async(one_kib) is None and part.next_offset == 1
    assert io.submitted == []
    part.close()


def stall(t: FakeTime, gate: InlineGate) -> None:
    """One inline write that took 5 ms and slept in the kernel."""
    started = gate.start()
    t.now += 0.005
    t.switches += 1
    gate.finished(started, 1064)


def assert_reopens_after_one_second(t: FakeTime, gate: InlineGate) -> None:
    t.now += 0.9
    assert not gate.is_open()
    t.now += 0.2
    assert gate.is_open()


def test_a_slow_write_that_slept_closes_the_gate_for_the_pause(caplog):
    t = FakeTime()
    gate = t.gate()
    with caplog.at_level(logging.WARNING, logger="lurcher.core.log.inline"):
        stall(t, gate)
    assert not gate.is_open() and gate.stalls == 1
    assert "1064 bytes" in caplog.text and "5.0 ms" in caplog.text
    assert_reopens_after_one_second(t, gate)


def test_stalls_soon_after_reopening_double_the_pause_up_to_the_cap():
    t = FakeTime()
    gate = t.gate()
    pauses = []
    for _ in range(6):
        stall(t, gate)
        closed_at = t.now
        while not gate.is_open():
            t.now += 0.125
        pauses.append(t.now - closed_at)
        t.now += 0.5  # the next stall comes half a second after reopening
    assert pauses == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]


def test_a_stall_after_a_quiet_spell_pauses_for_the_shortest_time_again():
    t = FakeTime()
    gate = t.gate()
    for _ in range(3):  # pauses of 1, 2 and 4 s
        stall(t, gate)
        t.now = gate.closed_until + 0.5
    t.now = gate.closed_until + 4.5  # longer open than the last pause
    stall(t, gate)
    assert_reopens_after_one_second(t, gate)


def test_a_slow_write_that_never_slept_leaves_the_gate_open():
    """The process was preempted (a busy machine), the write itself did not wait."""
    t = FakeTime()
    gate = t.gate()
    started = gate.start()
    t.now += 0.050
    gate.finished(started, 1064)
    assert gate.is_open() and gate.stalls == 0


def test_a_quick_write_leaves_the_gate_open_even_if_it_slept():
    t = FakeTime()
    gate = t.gate()
    started = gate.start()
    t.now += 0.001
    t.switches += 1
    gate.finished(started, 1064)
    assert gate.is_open() and gate.stalls == 0


async def test_after_a_stalled_inline_write_small_batches_go_asynchronous(tmp_path):
    t = FakeTime()
    io = StallingIo(t, took=0.003, sleeps=True)
    part = open_part(tmp_path, io, t.gate())
    assert part.append_async(batch(1)) is None  # inline, and it stalled
    later = part.append_async(batch(2))
    assert later is not None and len(io.submitted) == 1  # the gate is closed: asynchronous
    io.complete(0)
    await later
    t.now += 10.0
    io.took = 0.0
    assert part.append_async(batch(3)) is None  # the pause is over
    assert io.inline_writes == 3 and part.next_offset == 9  # HeldIo writes through append_pair
    part.close()


async def test_a_failed_inline_write_is_refused_keeps_nothing_and_still_counts(tmp_path):
    t = FakeTime()
    io = StallingIo(t, took=0.003, sleeps=True, error=OSError(errno.ENOSPC, "No space left"))
    gate = t.gate()
    part = open_part(tmp_path, io, gate)
    with pytest.raises(IggyError) as refused:
        part.append_async(batch(1))
    assert refused.value.status == ErrorCode.CANNOT_WRITE_TO_FILE
    assert part.next_offset == 0 and part.size_bytes == 0
    assert not gate.is_open()  # the failed write stalled the loop too
    part.close()


async def test_an_inline_write_never_fsyncs_on_the_loop(tmp_path):
    """``enforce_fsync`` without group commit would fsync inside ``append``: asynchronous then
    (the server always syncs by group commit, off the loop, and writes inline there)."""
    io = HeldIo()
    part = Partition.open(str(tmp_path / "p"), 0,
                          LogConfig(enforce_fsync=True, inline_write_max_bytes=1000),
                          io=io, clock=ManualClock())
    part.inline_gate = FakeTime().gate()
    written = part.append_async(batch(1))
    assert written is not None and len(io.submitted) == 1
    io.complete(0)
    await written
    grouped = Partition.open(str(tmp_path / "g"), 0,
                             LogConfig(enforce_fsync=True, group_commit=True,
                                       inline_write_max_bytes=1000), io=HeldIo(),
                             clock=ManualClock())
    grouped.inline_gate = FakeTime().gate()
    assert grouped.append_async(batch(2)) is None
    part.close()
    grouped.close()


async def test_o_direct_writes_are_never_inline(tmp_path):
    """An O_DIRECT write waits for the device, so it never runs on the event loop."""
    held = HeldIo()
    part = open_part(tmp_path, DirectIo(held), FakeTime().gate())
    written = part.append_async(batch(1))
    assert written is not None and len(held.submitted) == 1
    held.complete(0)
    await written
    assert part.next_offset == 3
    part.close()


def test_voluntary_switches_counts_a_sleep():
    before = voluntary_switches()
    time.sleep(0.01)
    assert voluntary_switches() > before
