"""One actor process: connect, warm up, wait for everyone, run the measured loop, report.

Roles (``ActorSpec.role``):
- producer: ``send`` one batch per step; latency = the send round trip.
- consumer: ``poll`` per step; latency = the poll round trip; empty polls are not recorded
  (a short sleep keeps an idle consumer from starving the server of CPU). Plain consumers
  stop after ``target_messages``; group members when their group's shared count reaches it;
  a plain consumer of stored data with no target (duration mode) rewinds when it runs dry.
- producing consumer: ``send`` a batch, then ``poll`` until all of it came back; latency =
  send + poll-back, the end-to-end round trip.
Producers and producing consumers stop after ``message_batches`` or ``duration_s``; every
role stops when the coordinator raises the shared stop flag.

Before its warm-up an actor exempts what it has built so far from the garbage collector's
full collections (``runtime.heap.freeze_startup_objects``, as each server shard does), for
every target alike: a full collection of the client's modules would otherwise land in the
measured tail.

The result (``ActorResult``) carries per-batch arrays: completion time (CLOCK_MONOTONIC,
comparable across processes on Linux), latency seconds and message count. All per-batch
bookkeeping is appending three numbers; nothing here touches individual messages.
"""

from __future__ import annotations

import asyncio
import time
import traceback
from array import array
from typing import Any

import msgspec

from lurcher.bench.drivers import Driver, driver
from lurcher.bench.options import BenchOptions
from lurcher.bench.workloads import CONSUMER, PRODUCER, PRODUCING_CONSUMER, ActorSpec, workload
from lurcher.core.allocator import return_large_buffers_to_the_kernel
from lurcher.core.event_loop import loop_factory
from lurcher.runtime.heap import freeze_startup_objects

EMPTY_POLL_SLEEP_S = 0.0005
BARRIER_TIMEOUT_S = 120.0


class ActorResult(msgspec.Struct):
    spec: ActorSpec
    start: float
    end: float
    done_at: bytes      # float64 array: completion time of each recorded batch
    latency_s: bytes    # float64 array
    messages: bytes     # int64 array


class Shared:
    """Cross-process state of one run (created by the runner from a spawn context)."""

    def __init__(self, ctx: Any, actors: int, groups: int) -> None:
        self.progress = ctx.Array("q", actors, lock=False)   # messages done, per actor
        self.group_done = ctx.Array("q", groups + 1)          # messages read, per group
        self.stop = ctx.Value("b", 0, lock=False)
        self.barrier = ctx.Barrier(actors + 1)
        self.results = ctx.Queue()


class Recorder:
    def __init__(self) -> None:
        self.done_at = array("d")
        self.latency = array("d")
        self.messages = array("q")

    def add(self, done_at: float, latency: float, messages: int) -> None:
        self.done_at.append(done_at)
        self.latency.append(latency)
        self.messages.append(messages)


class Loop:
    """The measured loop of one actor (state shared by the role steps)."""

    def __init__(self, drv: Driver, spec: ActorSpec, options: BenchOptions, shared: Shared,
                 index: int) -> None:
        self.drv, self.spec, self.options, self.shared, self.index = (
            drv, spec, options, shared, index)
        self.rec = Recorder()
        self.batches = 0
        self.received = 0
        self.deadline = float("inf")
        self.wrap = workload(options.workload).seeded and spec.group is None \
            and spec.target_messages is None

    # -- finish conditions

    def finished(self, now: float) -> bool:
        if self.shared.stop.value or now >= self.deadline:
            return True
        spec, o = self.spec, self.options
        if spec.role != CONSUMER:
            return o.message_batches is not None and self.batches >= o.message_batches
        if spec.target_messages is None:
            return False
        if spec.group is not None:
            return self.shared.group_done[spec.group] >= spec.target_messages
        return self.received >= spec.target_messages

    # -- steps: return messages handled (0: nothing to record)

    async def produce(self) -> int:
        return await self.drv.send()

    async def consume(self) -> int:
        n = await self.drv.poll()
        if n == 0:
            if self.wrap:
                self.drv.rewind()
            await asyncio.sleep(EMPTY_POLL_SLEEP_S)
        elif self.spec.group is not None:
            with self.shared.group_done.get_lock():
                self.shared.group_done[self.spec.group] += n
        return n

    async def round_trip(self) -> int:
        sent = await self.drv.send()
        got = 0
        while got < sent and not self.shared.stop.value:
            got += await self.drv.poll()
        return sent

    def step(self):
        return {PRODUCER: self.produce, CONSUMER: self.consume,
                PRODUCING_CONSUMER: self.round_trip}[self.spec.role]

    async def warm_up(self) -> None:
        if self.options.warmup_s <= 0 or self.spec.group is not None:
            return
        step, end = self.step(), time.monotonic() + self.options.warmup_s
        while time.monotonic() < end:
            await step()
        self.drv.rewind()

    async def measure(self) -> tuple[float, float]:
        step, rec, progress, i = self.step(), self.rec, self.shared.progress, self.index
        clock = time.monotonic
        start = clock()
        if self.options.duration_s is not None:
            self.deadline = start + self.options.duration_s
        now = start
        while not self.finished(now):
            t = clock()
            n = await step()
            now = clock()
            if n:
                rec.add(now, now - t, n)
                self.batches += 1
                self.received += n
                progress[i] += n
        return start, now


async def _run(target: str, address: str, spec: ActorSpec, options: BenchOptions,
               shared: Shared, index: int) -> ActorResult:
    drv = driver(target, address, spec, options)
    await drv.open()
    try:
        loop = Loop(drv, spec, options, shared, index)
        freeze_startup_objects()  # as the server does: no full collection of them measured
        await loop.warm_up()  # after the freeze: its collection is a pause the warm-up absorbs
        await asyncio.get_running_loop().run_in_executor(
            None, shared.barrier.wait, BARRIER_TIMEOUT_S)
        start, end = await loop.measure()
    finally:
        await drv.close()
    r = loop.rec
    return ActorResult(spec, start, end, r.done_at.tobytes(), r.latency.tobytes(),
                       r.messages.tobytes())


def actor_main(target: str, address: str, spec: ActorSpec, options: BenchOptions,
               shared: Shared, index: int) -> None:
    """Process entry point: puts ``(index, ActorResult)`` or ``(index, traceback str)``.
    The process allocates as the server does (``return_large_buffers_to_the_kernel``)."""
    return_large_buffers_to_the_kernel()
    try:
        with asyncio.Runner(loop_factory=loop_factory()) as runner:
            result: ActorResult | str = runner.run(
                _run(target, address, spec, options, shared, index))
    except BaseException:
        result = traceback.format_exc()
        shared.barrier.abort()
    shared.results.put((index, result))
