"""Idle polling (``core.idle_poll``): the adaptive window grows only while waits end soon
after it, shrinks to nothing for waits polling cannot catch, and the loop poller polls
until its deadline and no longer. Driven with a fake clock and a fake ``call_soon``; the
last test runs a real event loop."""

from __future__ import annotations

import asyncio
import gc
import weakref

import pytest

from lurcher.core.idle_poll import GROW_FROM_S, LoopPoller, PollWindow, for_loop
from tests.support.fake_loop import FakeLoop

US = 1e-6


def waits(window: PollWindow, *durations_us: float) -> float:
    """Run waits of these lengths through ``window``; its window afterwards."""
    now = 100.0
    for took in durations_us:
        window.start(now)
        now += took * US
        window.end(now)
        now += 1.0
    return window.window_s


def test_a_new_window_polls_for_the_maximum_and_keeps_it_while_waits_end_inside():
    window = PollWindow(500 * US)
    assert window.start(0.0) == pytest.approx(500 * US)
    window.end(60 * US)
    assert waits(window, 100, 400, 30) == pytest.approx(500 * US)


def test_once_shrunk_fast_waits_grow_the_window_by_doubling_up_to_the_maximum():
    window = PollWindow(500 * US)
    waits(window, *[5000] * 6)   # 250, 125, 62.5, 31.25, 15.6 -> 0
    assert window.window_s == 0.0
    window.start(0.0)
    window.end(60 * US)          # ended within max: polling would have caught it
    assert window.start(1.0) == GROW_FROM_S
    window.end(1.0)
    assert waits(window, 100, 100) == pytest.approx(80 * US)  # 40, 80
    assert waits(window, 400, 400, 400) == pytest.approx(500 * US)  # 160, 320, capped
    assert waits(window, 30) == pytest.approx(500 * US)  # inside the window: kept


def test_waits_longer_than_the_maximum_halve_the_window_down_to_nothing():
    window = PollWindow(500 * US)
    assert window.window_s == pytest.approx(500 * US)
    assert waits(window, 5000) == pytest.approx(250 * US)
    assert waits(window, 5000, 5000, 5000) == pytest.approx(250 / 8 * US)
    assert waits(window, 5000) == 0.0  # 15.6 us: below where growing starts
    assert window.start(0.0) == 0.0


def test_a_window_of_max_0_never_polls():
    window = PollWindow(0)
    assert waits(window, 1, 1, 1) == 0.0


def test_the_loop_polls_until_the_deadline_with_one_callback_at_a_time():
    loop = FakeLoop()
    poller = LoopPoller(loop.call_soon, clock=loop.clock)
    poller.yield_cpu = lambda: None
    poller.poll_until(100 * US)
    poller.poll_until(50 * US)   # an earlier deadline changes nothing
    assert len(loop.ready) == 1
    turns = 0
    while loop.ready:
        assert len(loop.ready) == 1
        loop.run_turn(10 * US)
        turns += 1
    assert 10 <= turns <= 11 and not poller.polling
    poller.poll_until(loop.now - 1)  # a deadline already past: nothing scheduled
    assert not loop.ready


def test_a_stream_of_events_polls_only_while_they_come_close_together():
    loop = FakeLoop()
    poller = LoopPoller(loop.call_soon, clock=loop.clock)
    poller.yield_cpu = lambda: None
    window = PollWindow(500 * US)
    for _ in range(6):        # requests 100 us apart: the window grows
        poller.next_event(window)
        loop.now += 100 * US
    assert window.window_s >= 100 * US and poller.polling
    for _ in range(12):       # then 50 ms apart: it shrinks to nothing
        loop.now += 0.05
        poller.next_event(window)
    assert window.window_s == 0.0
    while loop.ready:
        loop.run_turn(10 * US)
    assert not poller.polling


def test_a_real_loop_keeps_running_other_work_while_it_polls():
    async def main() -> int:
        loop = asyncio.get_running_loop()
        poller = for_loop(loop)
        assert for_loop(loop) is poller
        poller.poll_until(poller.clock() + 0.05)
        ticks = 0
        while poller.polling:
            ticks += 1
            await asyncio.sleep(0)
        await asyncio.sleep(0.01)  # a timer still fires
        return ticks
    assert asyncio.run(main()) > 10


def test_a_loop_done_with_is_freed_with_its_poller():
    """The poller refers to its loop weakly: a loop kept by its own poller was never freed
    (every SyncClient makes a loop of its own)."""
    loops = []

    async def poll_a_while() -> None:
        loop = asyncio.get_running_loop()
        loops.append(weakref.ref(loop))
        poller = for_loop(loop)
        poller.poll_until(poller.clock() + 0.001)
        await asyncio.sleep(0)

    for _ in range(3):
        asyncio.run(poll_a_while())  # ends while its poller may still be polling
    gc.collect()
    assert [ref() for ref in loops] == [None, None, None]
