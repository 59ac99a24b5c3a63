"""Idle polling: an event loop that keeps polling for I/O, without sleeping, for a short
while when an answer or the next request is due soon, so it is seen at once.

On these machines a process asleep in ``epoll_wait`` takes about 30 us to wake when a
loopback packet arrives for it, more than lurcher's own work for a ping. A loop that is
polling (``epoll_wait`` with a zero timeout) sees the packet at once. Seastar (Redpanda)
polls for a while before it sleeps, as do Aeron's idle strategies. lurcher's server polls
after each request for the next one (``system.idle_poll``), its SDK while a request waits
for its answer (the ``idle_poll`` client option).

Two pieces:
- ``PollWindow`` (sans-IO: times in, a window out) decides how long to poll, adaptively as
  KVM's halt polling does. Each wait is ``start``ed and ``end``ed. A new window is
  ``max_s``, so the first waits are polled (KVM starts from 0; here the first requests of
  a connection would pay the wake-ups while it grew). A wait that ended inside the window
  kept it. One that ended after the window but within ``max_s`` grows it
  (doubles, from ``GROW_FROM_S``): polling longer would have caught it. One that took
  longer than ``max_s`` halves it, down to 0: polling cannot catch such waits, and on a
  busy machine (many clients on few cores) a polling process only takes CPU from the
  others. So polling costs CPU only where answers come fast.
- ``LoopPoller`` (one per event loop, ``for_loop``) keeps the loop polling until a
  deadline: one callback re-schedules itself with ``call_soon``, which makes the loop's
  next wait a zero-timeout poll. Other callbacks, timers and I/O run as usual in between;
  nothing blocks. At the deadline the callback stops and the loop sleeps as before.

Invariants: a window stays within ``[0, max_s]``; at most one poll callback is scheduled per
loop, and it never moves its own deadline, so a loop polls at most ``max_s`` past the last
``start`` of any window. Cost: a clock read per ``start``/``end``; while polling, one
callback and one ``epoll_wait`` per loop turn, on a core that would otherwise sleep.
"""

from __future__ import annotations

import asyncio
import os
import time
import weakref
from collections.abc import Callable

# The longest idle poll a server or client may be configured with: beyond a few
# milliseconds polling buys no latency, only a busy core.
MAX_IDLE_POLL_S = 0.01
# A window that grows from 0 starts here, then doubles.
GROW_FROM_S = 0.000_02


class PollWindow:
    """How long to poll for the next awaited event, adapted to how long waits take.
    ``max_s`` 0 turns polling off."""

    def __init__(self, max_s: float) -> None:
        self.max_s = max_s
        self.window_s = max_s  # the first waits poll: a connection's first requests are fast
        self.started: float | None = None

    def start(self, now: float) -> float:
        """A wait begins at ``now``; returns how long to poll for it (0: not at all)."""
        self.started = now
        return self.window_s

    def end(self, now: float) -> None:
        """The awaited event came at ``now``: adapt the window to the wait's length."""
        if self.started is None or not self.max_s:
            return
        took, self.started = now - self.started, None
        if took <= self.window_s:
            return
        if took <= self.max_s:
            self.window_s = min(self.max_s, max(2 * self.window_s, GROW_FROM_S))
        else:
            halved = self.window_s / 2
            self.window_s = halved if halved >= GROW_FROM_S else 0.0


class LoopPoller:
    """Keeps one loop polling until the latest deadline asked. ``schedule`` is the loop's
    ``call_soon``; ``clock`` (seconds, monotonic) is injectable for tests."""

    def __init__(self, schedule: Callable[[Callable[[], None]], object],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.schedule, self.clock = schedule, clock
        self.yield_cpu = getattr(os, "sched_yield", _nothing)
        self.deadline = 0.0
        self.polling = False
        self.turns = 0  # poll callbacks run (diagnostics and tests)

    def poll_until(self, deadline: float) -> None:
        """Poll until at least ``deadline`` (a ``clock`` time)."""
        if deadline > self.deadline:
            self.deadline = deadline
        if not self.polling and deadline > self.clock():
            self.polling = True
            self.schedule(self._turn)

    def wait_started(self, window: PollWindow) -> None:
        """``window``'s wait begins now: poll for as long as it says."""
        self._start(window, self.clock())

    def wait_ended(self, window: PollWindow) -> None:
        """``window``'s wait is over now."""
        window.end(self.clock())

    def next_event(self, window: PollWindow) -> None:
        """An event of a stream of them came (a request to a server): it ends ``window``'s
        wait and begins the wait for the next (one clock read)."""
        now = self.clock()
        window.end(now)
        self._start(window, now)

    def _start(self, window: PollWindow, now: float) -> None:
        poll_s = window.start(now)
        if poll_s:
            self.poll_until(now + poll_s)

    def _turn(self) -> None:
        self.turns += 1
        if self.clock() >= self.deadline:
            self.polling = False
            return
        self.yield_cpu()
        self.schedule(self._turn)


def _nothing() -> None:
    return None


_POLLERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopPoller] = (
    weakref.WeakKeyDictionary())


def for_loop(loop: asyncio.AbstractEventLoop) -> LoopPoller:
    """The poller of ``loop`` (made on first use, kept while the loop lives: it refers to
    the loop weakly, so a loop that is done with is freed with its poller)."""
    poller = _POLLERS.get(loop)
    if poller is None:
        poller = _POLLERS[loop] = LoopPoller(_call_soon_of(weakref.ref(loop)))
    return poller


def _call_soon_of(loop_ref: weakref.ref) -> Callable[[Callable[[], None]], None]:
    """``call_soon`` of the loop ``loop_ref`` refers to; nothing once it is gone or closed."""
    def call_soon(callback: Callable[[], None]) -> None:
        loop = loop_ref()
        if loop is not None and not loop.is_closed():
            loop.call_soon(callback)
    return call_soon
