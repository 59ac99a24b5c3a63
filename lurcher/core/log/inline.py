"""Inline writes: a small batch copied into the page cache by the event loop itself, and the
gate that stops them in a process whose inline writes start to stall.

Handing a batch to the writer thread or to an io_uring worker and being woken by its
completion costs about 100 us on this project's machines (ext4 has no non-blocking buffered
writes, so io_uring punts them to a worker thread). Two ``pwrite`` calls for a batch of a few
KiB cost a few microseconds. So a batch of at most ``system.partition.inline_write_max_bytes``
that finds its partition idle is written on the loop (``Partition.append_async``): a lone
message is acknowledged without a hand-off. Larger batches, and batches behind others in
flight, stay asynchronous, so the loop never spends long on one copy.

A page-cache write can still block: the kernel throttles writers when too many pages are
dirty (``balance_dirty_pages``), and a write may wait for a page lock or a read. ``InlineGate``
times every inline write; one that took longer than ``stall_s`` *and* slept in the kernel
(the thread's voluntary context switches grew: being preempted by another process on a busy
machine does not count) closes the gate for a pause (one warning in the log), and every
partition of the process (they share its event loop) writes asynchronously meanwhile. So
the loop waits for at most one stalled write per pause. A lone stall is an accident (an ext4
journal commit, a page lock; a few a minute on this project's machines) and pauses for
``min_pause_s``; a stall soon after the gate reopened (within the last pause's length) means
the throttling goes on, and doubles the pause, up to ``max_pause_s``. A long pause after a
lone stall would cost every small send the hand-off (40-90 us) for its whole length. Cost:
one ``getrusage`` per inline write (about half a microsecond).

Invariant: the gate only decides where a write runs; an inline write is the same positional
write, with the same error handling, as the synchronous ``Partition.append``.
"""

from __future__ import annotations

import logging
import resource
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

STALL_S = 0.002      # an inline write this slow, that slept in the kernel, closes the gate
MIN_PAUSE_S = 1.0    # for this long after a lone stall
MAX_PAUSE_S = 30.0   # at most this long while stalls keep coming


def voluntary_switches() -> int:
    """How many times this thread has slept in the kernel so far."""
    return resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw


class InlineGate:
    """Whether small writes may run on the event loop now (see the module docstring).
    ``clock`` (seconds, monotonic) and ``switches`` (``voluntary_switches``) are injectable
    for tests."""

    def __init__(self, stall_s: float = STALL_S, min_pause_s: float = MIN_PAUSE_S,
                 max_pause_s: float = MAX_PAUSE_S,
                 clock: Callable[[], float] = time.monotonic,
                 switches: Callable[[], int] = voluntary_switches) -> None:
        self.stall_s, self.min_pause_s, self.max_pause_s = stall_s, min_pause_s, max_pause_s
        self.clock, self.switches = clock, switches
        self.pause_s = min_pause_s  # the last pause
        self.closed_until = 0.0
        self.stalls = 0

    def is_open(self) -> bool:
        return not self.closed_until or self.clock() >= self.closed_until

    def start(self) -> tuple[float, int]:
        """Called just before an inline write; pass the result to ``finished``."""
        return self.clock(), self.switches()

    def finished(self, started: tuple[float, int], nbytes: int) -> None:
        """The inline write of ``nbytes`` begun at ``started`` is over (or failed)."""
        took = self.clock() - started[0]
        if took <= self.stall_s or self.switches() == started[1]:
            return
        self.stalls += 1
        now = self.clock()
        again = self.closed_until and now - self.closed_until < self.pause_s
        self.pause_s = min(2 * self.pause_s, self.max_pause_s) if again else self.min_pause_s
        self.closed_until = now + self.pause_s
        log.warning("an inline write of %d bytes slept in the kernel and held the event loop "
                    "for %.1f ms (dirty-page throttling?); small batches are written "
                    "asynchronously for the next %.0f s", nbytes, took * 1000, self.pause_s)


PROCESS_GATE = InlineGate()
"""The gate of this process's event loop (a shard is a process with one loop)."""
